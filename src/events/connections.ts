import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { PROXY_ID_PATTERN } from './audit.js';
import { CredentialId, ProjectId, SessionId, Timestamp } from './fields.js';

/**
 * A wire session's connection, as its proxy recorded it (docs/http-api.md, `connection_seconds`):
 * opened once its login completed, `at` being when the client connected; closed when it ended.
 * Ingest appends them to `connection-<project_id>` from the proxy's `sessions` bus records.
 */
export const WireSessionOpened = defineEvent(
  'WireSessionOpened',
  1,
  z.strictObject({ project_id: ProjectId, session_id: SessionId, credential_id: CredentialId, at: Timestamp }),
);
export type WireSessionOpened = z.infer<typeof WireSessionOpened.schema>;

export const WireSessionClosed = defineEvent('WireSessionClosed', 1, z.strictObject({ project_id: ProjectId, session_id: SessionId, at: Timestamp }));
export type WireSessionClosed = z.infer<typeof WireSessionClosed.schema>;

/**
 * A proxy's `sessions` bus record (proxy/decisions.ts): its sessions' connections opened and
 * closed. A proxy's session ids start with its proxy id and a dot, so a record names only its own.
 */
export const SessionsRecord = z
  .object({
    kind: z.literal('sessions'),
    proxy_id: z.string().regex(PROXY_ID_PATTERN),
    boot_epoch: z.int().min(0),
    sessions: z.array(z.strictObject({ phase: z.enum(['opened', 'closed']), project_id: ProjectId, session_id: SessionId, credential_id: CredentialId, at: Timestamp })).max(1_000),
  })
  .refine((record) => record.sessions.every((mark) => mark.session_id.startsWith(`${record.proxy_id}.`)), { message: 'a proxy records only its own sessions', path: ['sessions'] });
export type SessionsRecord = z.infer<typeof SessionsRecord>;
