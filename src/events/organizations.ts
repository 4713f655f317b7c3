import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { ApiKeyId, OrgId, SecretPrefix, Sha256Hex, text } from './fields.js';

export const Plan = z.enum(['free', 'pro', 'scale', 'enterprise']);
export type Plan = z.infer<typeof Plan>;

/** Feature flags enabled for an organization, e.g. `agent-gateway`. */
export const Features = z.array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, { message: 'expected a feature flag name' })).max(64);

/** A person's role in an organization, ordered viewer < member < admin < owner (docs/permissions.md). */
export const HumanRole = z.enum(['owner', 'admin', 'member', 'viewer']);
export type HumanRole = z.infer<typeof HumanRole>;

/** The role of an AI agent acting on the CRM (spec §2.13): it may call only the CRM operations its role allows (docs/crm.md). */
export const AgentRole = z.enum(['researcher', 'enricher', 'outreach']);
export type AgentRole = z.infer<typeof AgentRole>;

/** What an organization API key carries: a person's role, or an agent role. */
export const ApiKeyRole = z.enum([...HumanRole.options, ...AgentRole.options]);
export type ApiKeyRole = z.infer<typeof ApiKeyRole>;

export function isAgentRole(role: ApiKeyRole): role is AgentRole {
  return (AgentRole.options as readonly string[]).includes(role);
}

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

/** Who bills an organization: `none`, or a provider's name such as `stripe` or `aws_marketplace`. */
export const BillingProvider = z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, { message: 'expected a provider name of [a-z0-9_], such as stripe or none' });

/** The state of an organization's subscription with its provider (the values payment providers use); `none` before any. */
export const SubscriptionStatus = z.enum(['none', 'trialing', 'active', 'past_due', 'unpaid', 'paused', 'canceled', 'incomplete', 'incomplete_expired']);
export type SubscriptionStatus = z.infer<typeof SubscriptionStatus>;

/** An operator recorded who bills the organization and the state of its subscription. */
export const OrganizationBillingChanged = defineEvent(
  'OrganizationBillingChanged',
  1,
  z.strictObject({ org_id: OrgId, billing_provider: BillingProvider, subscription_status: SubscriptionStatus }),
);
export type OrganizationBillingChanged = z.infer<typeof OrganizationBillingChanged.schema>;
