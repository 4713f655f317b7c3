import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { idSchema, OrgId, ProjectId, SecretPrefix, Sha256Hex, text, Timestamp } from './fields.js';

export const EnrollmentId = idSchema('enr_');

/**
 * A self-host enrollment token was issued for a project (spec §2.11): the token itself is never
 * stored, only its SHA-256 and the first characters shown to humans. `expires_at` null means never.
 */
export const SelfHostEnrollmentCreated = defineEvent(
  'SelfHostEnrollmentCreated',
  1,
  z.strictObject({
    enrollment_id: EnrollmentId,
    project_id: ProjectId,
    org_id: OrgId,
    description: text(500),
    region_label: text(100),
    token_hash: Sha256Hex,
    token_prefix: SecretPrefix,
    expires_at: Timestamp.nullable(),
  }),
);
export type SelfHostEnrollmentCreated = z.infer<typeof SelfHostEnrollmentCreated.schema>;

/** The token stops authenticating data planes at once; the live ones are told and stop serving. */
export const SelfHostEnrollmentRevoked = defineEvent('SelfHostEnrollmentRevoked', 1, z.strictObject({ enrollment_id: EnrollmentId }));
export type SelfHostEnrollmentRevoked = z.infer<typeof SelfHostEnrollmentRevoked.schema>;
