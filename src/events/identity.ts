/**
 * People (docs/identity.md): the identity server (Better Auth) keeps accounts, passwords, sessions
 * and second factors; who belongs to which organization with which role, and which legal documents
 * a person accepted, are events like every other fact of the domain.
 */
import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { ApiKeyRole, HumanRole } from './organizations.js';
import { idSchema, OrgId, Sha256Hex, text, Timestamp } from './fields.js';

/** A person's id, as the identity server issues it (`usr_...`). */
export const UserId = idSchema('usr_');
export const ConsentId = idSchema('cns_');

/** A person became a member of an organization with a role (a sign-up makes its author the owner of a new organization). */
export const OrganizationMemberAdded = defineEvent('OrganizationMemberAdded', 1, z.strictObject({ org_id: OrgId, user_id: UserId, role: ApiKeyRole }));
export type OrganizationMemberAdded = z.infer<typeof OrganizationMemberAdded.schema>;

/** An owner or admin changed a member's role (only an owner grants or takes `owner`; the last owner keeps it). */
export const OrganizationMemberRoleChanged = defineEvent('OrganizationMemberRoleChanged', 1, z.strictObject({ org_id: OrgId, user_id: UserId, role: HumanRole }));
export type OrganizationMemberRoleChanged = z.infer<typeof OrganizationMemberRoleChanged.schema>;

/** A member was removed, or left; their sessions and tokens no longer reach the organization. */
export const OrganizationMemberRemoved = defineEvent('OrganizationMemberRemoved', 1, z.strictObject({ org_id: OrgId, user_id: UserId }));
export type OrganizationMemberRemoved = z.infer<typeof OrganizationMemberRemoved.schema>;

export const InvitationId = idSchema('inv_');
/** The invited address, stored lower-cased: an invitation admits the person whose sign-up e-mail is this address, compared case-insensitively. */
export const InvitedEmail = z.email().max(254).refine((email) => email === email.toLowerCase(), { message: 'expected a lower-cased address' });

/** An owner or admin invited an e-mail address with a role; only the token's hash is kept. */
export const OrganizationInvitationCreated = defineEvent(
  'OrganizationInvitationCreated',
  1,
  z.strictObject({ org_id: OrgId, invitation_id: InvitationId, email: InvitedEmail, role: HumanRole, token_hash: Sha256Hex, expires_at: Timestamp }),
);
export type OrganizationInvitationCreated = z.infer<typeof OrganizationInvitationCreated.schema>;

/** An invitation was withdrawn before it was accepted; its token no longer admits anyone. */
export const OrganizationInvitationRevoked = defineEvent('OrganizationInvitationRevoked', 1, z.strictObject({ org_id: OrgId, invitation_id: InvitationId }));
export type OrganizationInvitationRevoked = z.infer<typeof OrganizationInvitationRevoked.schema>;

/** The invited person accepted (with OrganizationMemberAdded, or OrganizationMemberRoleChanged for one already a member); the token is spent. */
export const OrganizationInvitationAccepted = defineEvent('OrganizationInvitationAccepted', 1, z.strictObject({ org_id: OrgId, invitation_id: InvitationId, user_id: UserId }));
export type OrganizationInvitationAccepted = z.infer<typeof OrganizationInvitationAccepted.schema>;

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
