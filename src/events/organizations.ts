import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { ApiKeyId, OrgId, SecretPrefix, Sha256Hex, text } from './fields.js';

export const Plan = z.enum(['free', 'pro', 'scale', 'enterprise']);
export type Plan = z.infer<typeof Plan>;

/** Feature flags enabled for an organization, e.g. `agent-gateway`. */
export const Features = z.array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, { message: 'expected a feature flag name' })).max(64);

export const ApiKeyRole = z.enum(['owner', 'admin', 'member', 'viewer']);
export type ApiKeyRole = z.infer<typeof ApiKeyRole>;

/** An organization was created. */
export const OrganizationCreated = defineEvent(
  'OrganizationCreated',
  1,
  z.strictObject({ org_id: OrgId, name: text(128, 1), plan: Plan, features: Features }),
);
export type OrganizationCreated = z.infer<typeof OrganizationCreated.schema>;

/** An organization moved to another plan; `features` is the full set after the change. */
export const OrganizationPlanChanged = defineEvent(
  'OrganizationPlanChanged',
  1,
  z.strictObject({ org_id: OrgId, plan: Plan, features: Features }),
);
export type OrganizationPlanChanged = z.infer<typeof OrganizationPlanChanged.schema>;

/** A human created an organization API key; only its hash is kept. */
export const ApiKeyCreated = defineEvent(
  'ApiKeyCreated',
  1,
  z.strictObject({
    org_id: OrgId,
    key_id: ApiKeyId,
    name: text(128, 1),
    role: ApiKeyRole,
    prefix: SecretPrefix,
    token_hash: Sha256Hex,
  }),
);
export type ApiKeyCreated = z.infer<typeof ApiKeyCreated.schema>;

/** An organization API key was revoked; it no longer authenticates. */
export const ApiKeyRevoked = defineEvent('ApiKeyRevoked', 1, z.strictObject({ org_id: OrgId, key_id: ApiKeyId }));
export type ApiKeyRevoked = z.infer<typeof ApiKeyRevoked.schema>;
