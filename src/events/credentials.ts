import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { MAX_IP_RULE_ENTRIES, StoredCidrEntry } from './ip-rules.js';
import { CredentialId, DatabaseId, PolicyId, ProjectId, Reason, ScramVerifier, SecretPrefix, Sha256Hex, text, Timestamp } from './fields.js';

export const PrincipalType = z.enum(['agent', 'human']);
export type PrincipalType = z.infer<typeof PrincipalType>;

const CredentialName = text(128, 1);

/** The Postgres user name presented in the startup message. */
const PgUsername = z.string().regex(/^[^\s\0]{1,63}$/, { message: 'expected 1-63 characters without whitespace or NUL' });

/** Both coupled secrets, as verifiers only: the SCRAM verifier of the password and the hash of the MCP token. */
const secretFields = {
  scram: ScramVerifier,
  token_hash: Sha256Hex,
  token_prefix: SecretPrefix,
};

/** An agent or human credential was registered; it is active. */
export const CredentialRegistered = defineEvent(
  'CredentialRegistered',
  1,
  z.strictObject({
    credential_id: CredentialId,
    project_id: ProjectId,
    database_id: DatabaseId,
    policy_profile_id: PolicyId,
    name: CredentialName,
    pg_username: PgUsername,
    principal_type: PrincipalType,
    ...secretFields,
    /** null means it never expires. */
    expires_at: Timestamp.nullable(),
  }),
);
export type CredentialRegistered = z.infer<typeof CredentialRegistered.schema>;

/** Both secrets of a credential were replaced in place; `secret_version` counts from 1 at registration. */
export const CredentialRotated = defineEvent(
  'CredentialRotated',
  1,
  z.strictObject({ credential_id: CredentialId, ...secretFields, secret_version: z.int().min(2) }),
);
export type CredentialRotated = z.infer<typeof CredentialRotated.schema>;

/** A credential's label changed. */
export const CredentialRenamed = defineEvent('CredentialRenamed', 1, z.strictObject({ credential_id: CredentialId, name: CredentialName }));
export type CredentialRenamed = z.infer<typeof CredentialRenamed.schema>;

/** The kill-switch was thrown: the credential is suspended until enabled again. */
export const CredentialDisabled = defineEvent('CredentialDisabled', 1, z.strictObject({ credential_id: CredentialId, reason: Reason }));
export type CredentialDisabled = z.infer<typeof CredentialDisabled.schema>;

/** A disabled credential was made active again. */
export const CredentialEnabled = defineEvent('CredentialEnabled', 1, z.strictObject({ credential_id: CredentialId }));
export type CredentialEnabled = z.infer<typeof CredentialEnabled.schema>;

/** A credential was revoked, permanently. */
export const CredentialRevoked = defineEvent('CredentialRevoked', 1, z.strictObject({ credential_id: CredentialId, reason: Reason }));
export type CredentialRevoked = z.infer<typeof CredentialRevoked.schema>;

/** A sweep recorded that a credential passed its expires_at (it was already refused from that instant). */
export const CredentialExpired = defineEvent('CredentialExpired', 1, z.strictObject({ credential_id: CredentialId, expired_at: Timestamp }));
export type CredentialExpired = z.infer<typeof CredentialExpired.schema>;

/** A credential connected; recorded at most once a minute per credential, it feeds last_used_at. */
/**
 * The credential's own IP rules were replaced (docs/http-api.md#ip-rules): they apply beside its
 * project's, and a connection must pass both.
 */
export const CredentialIpRulesSet = defineEvent(
  'CredentialIpRulesSet',
  1,
  z.strictObject({ credential_id: CredentialId, allow: z.array(StoredCidrEntry).max(MAX_IP_RULE_ENTRIES), deny: z.array(StoredCidrEntry).max(MAX_IP_RULE_ENTRIES) }),
);
export type CredentialIpRulesSet = z.infer<typeof CredentialIpRulesSet.schema>;

export const CredentialUsed = defineEvent('CredentialUsed', 1, z.strictObject({ credential_id: CredentialId, used_at: Timestamp }));
export type CredentialUsed = z.infer<typeof CredentialUsed.schema>;
