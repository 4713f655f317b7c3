/**
 * People (docs/identity.md): the identity server (Better Auth) keeps accounts, passwords, sessions
 * and second factors; who belongs to which organization with which role, and which legal documents
 * a person accepted, are events like every other fact of the domain.
 */
import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { ApiKeyRole } from './organizations.js';
import { idSchema, OrgId, text, Timestamp } from './fields.js';

/** A person's id, as the identity server issues it (`usr_...`). */
export const UserId = idSchema('usr_');
export const ConsentId = idSchema('cns_');

/** A person became a member of an organization with a role (a sign-up makes its author the owner of a new organization). */
export const OrganizationMemberAdded = defineEvent('OrganizationMemberAdded', 1, z.strictObject({ org_id: OrgId, user_id: UserId, role: ApiKeyRole }));
export type OrganizationMemberAdded = z.infer<typeof OrganizationMemberAdded.schema>;

/** The legal documents a person may accept; the version is the document's own label (a date or a semver). */
export const ConsentDocumentType = z.enum(['terms_of_service', 'privacy_policy', 'data_processing_agreement', 'marketing_emails', 'usage_limit_alerts']);
export type ConsentDocumentType = z.infer<typeof ConsentDocumentType>;

/** A person accepted (or, for the e-mail preferences, declined with `accepted: false`) a version of a document; kept as evidence, never rewritten. */
export const ConsentRecorded = defineEvent(
  'ConsentRecorded',
  1,
  z.strictObject({
    consent_id: ConsentId,
    user_id: UserId,
    document_type: ConsentDocumentType,
    document_version: text(64, 1),
    accepted: z.boolean(),
    accepted_at: Timestamp,
    ip_address: text(64).nullable(),
  }),
);
export type ConsentRecorded = z.infer<typeof ConsentRecorded.schema>;
