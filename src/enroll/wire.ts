import { z } from 'zod';
import type { RecordedEvent } from '../store/port.js';

/** An event as the data-plane channel carries it: data and metadata as base64 of the stored bytes, the position as a decimal string. */
export const WireEvent = z.object({
  stream: z.string(),
  revision: z.int().min(0),
  position: z.string().regex(/^[0-9]{1,20}$/),
  id: z.string(),
  type: z.string(),
  data: z.base64(),
  metadata: z.base64(),
});
export type WireEvent = z.infer<typeof WireEvent>;

export function toWire(event: RecordedEvent): WireEvent {
  return {
    stream: event.stream,
    revision: event.revision,
    position: event.position.toString(),
    id: event.id,
    type: event.type,
    data: Buffer.from(event.data).toString('base64'),
    metadata: Buffer.from(event.metadata).toString('base64'),
  };
}

export function fromWire(event: WireEvent): RecordedEvent {
  return {
    stream: event.stream,
    revision: event.revision,
    position: BigInt(event.position),
    id: event.id,
    type: event.type,
    data: new Uint8Array(Buffer.from(event.data, 'base64')),
    metadata: new Uint8Array(Buffer.from(event.metadata, 'base64')),
  };
}

/** An event a data plane appends: no stream, revision or position yet. */
export const WireNewEvent = WireEvent.pick({ id: true, type: true, data: true, metadata: true });
export type WireNewEvent = z.infer<typeof WireNewEvent>;

export const ExpectedRevision = z.union([z.enum(['any', 'no_stream', 'exists']), z.int().min(0)]);

/** Why a data plane's channel ended; the control plane says it in the stream's last message and in 401 problems. */
export const ChannelEnd = z.object({ reason: z.enum(['revoked', 'expired']), detail: z.string() });
export type ChannelEnd = z.infer<typeof ChannelEnd>;

/** The prefixes of the categories a data plane may read: its proxy's live views and its project's hash key. */
export const DATA_PLANE_PREFIXES = ['credential-', 'project-', 'policy-', 'honeytoken-', 'org-', 'approval-', 'hashkey-', 'iprules-', 'branch-', 'cache-'] as const;

/** The response header of a 401 naming why a token no longer authenticates (`revoked`, `expired`). */
export const ENROLLMENT_END_HEADER = 'pgward-enrollment-end';

/** What a data plane learns of its enrollment at start. */
export const EnrollmentInfo = z.object({
  enrollment_id: z.string(),
  project_id: z.string(),
  org_id: z.string(),
  region_label: z.string(),
  expires_at: z.string().nullable(),
  max_message_bytes: z.int().min(1024),
});
export type EnrollmentInfo = z.infer<typeof EnrollmentInfo>;

/**
 * Ingest's progress on the control plane, for an enrolled proxy's audit back-pressure: how long the
 * oldest decision ingest has not taken has waited (to 100 ms; null: no ingest consumer), whether any
 * waits, and whether ingest took any within the stall time (ingest-progress.ts), told alike to every
 * asker. No counts: those would tell one enrollment how much every project sends.
 */
export const AuditBacklogAnswer = z.object({ behind_ms: z.int().min(0).nullable(), pending: z.boolean(), progressing: z.boolean() });
export type AuditBacklogAnswer = z.infer<typeof AuditBacklogAnswer>;
