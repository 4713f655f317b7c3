import type { CatalogEvent } from '../../src/events/catalog.js';
import { ApiKeyCreated, OrganizationBillingChanged, OrganizationCreated, OrganizationPlanChanged, ApiKeyRevoked, type ApiKeyRole, type Plan, type SubscriptionStatus } from '../../src/events/organizations.js';
import { OrganizationMemberAdded } from '../../src/events/identity.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate } from '../handle.js';
import { decideMembership, evolveMembership, ownerCount, type InvitationState, type MembershipCommand } from './memberships.js';

export interface OrganizationState {
  readonly exists: boolean;
  readonly plan?: Plan;
  readonly apiKeys: ReadonlyMap<string, { readonly role: ApiKeyRole; readonly revoked: boolean }>;
  /** People and their roles (docs/identity.md). */
  readonly members: ReadonlyMap<string, ApiKeyRole>;
  /** Invitations by id, with their token's hash (docs/identity.md#invitations). */
  readonly invitations: ReadonlyMap<string, InvitationState>;
  /** The stream's revision: the ETag of the organization's billing record. */
  readonly revision: number;
}

export type OrganizationCommand =
  /** The first owner is an API key (`pgward admin create-org`) or the person who signed up. */
  | { readonly kind: 'create'; readonly orgId: string; readonly name: string; readonly plan: Plan; readonly features: string[]; readonly owner: { readonly key: NewApiKey } | { readonly userId: string } }
  | { readonly kind: 'create-api-key'; readonly orgId: string; readonly key: NewApiKey }
  /** `ifVersion` is the key's ETag (apiKeyVersion) the caller read, when it sent If-Match. */
  | { readonly kind: 'revoke-api-key'; readonly orgId: string; readonly keyId: string; readonly ifVersion?: number }
  | { readonly kind: 'set-billing'; readonly orgId: string; readonly billingProvider: string; readonly subscriptionStatus: SubscriptionStatus; readonly ifRevision?: number }
  | MembershipCommand;

export interface NewApiKey {
  readonly keyId: string;
  readonly name: string;
  readonly role: ApiKeyRole;
  readonly prefix: string;
  readonly tokenHash: string;
}

function apiKeyCreated(orgId: string, key: NewApiKey) {
  return emit(ApiKeyCreated, { org_id: orgId, key_id: key.keyId, name: key.name, role: key.role, prefix: key.prefix, token_hash: key.tokenHash });
}

/** An API key's ETag: how many times it changed since its creation (0 while active, 1 once revoked, the only change a key has). */
export function apiKeyVersion(key: { readonly revoked: boolean }): number {
  return key.revoked ? 1 : 0;
}

export const organization: Aggregate<OrganizationState, OrganizationCommand> = {
  initial: { exists: false, apiKeys: new Map(), members: new Map(), invitations: new Map(), revision: -1 },

  evolve(previous, event: CatalogEvent) {
    const state = { ...previous, revision: event.revision };
    switch (event.type) {
      case OrganizationCreated.type:
      case OrganizationPlanChanged.type:
        return { ...state, exists: true, plan: event.data.plan };
      case ApiKeyCreated.type:
        return { ...state, apiKeys: new Map(state.apiKeys).set(event.data.key_id, { role: event.data.role, revoked: false }) };
      case ApiKeyRevoked.type: {
        const key = state.apiKeys.get(event.data.key_id);
        return key ? { ...state, apiKeys: new Map(state.apiKeys).set(event.data.key_id, { ...key, revoked: true }) } : state;
      }
      default:
        // Members and invitations (memberships.ts).
        return evolveMembership(state, event);
    }
  },

  decide(state, command, now) {
    switch (command.kind) {
      case 'create':
        if (state.exists) return new DomainError('RESOURCE_EXISTS', `organization ${command.orgId} already exists`);
        return [
          emit(OrganizationCreated, { org_id: command.orgId, name: command.name, plan: command.plan, features: command.features }),
          'key' in command.owner ? apiKeyCreated(command.orgId, command.owner.key) : emit(OrganizationMemberAdded, { org_id: command.orgId, user_id: command.owner.userId, role: 'owner' }),
        ];
      case 'create-api-key':
        if (!state.exists) return new DomainError('NOT_FOUND', `organization ${command.orgId} not found`);
        return [apiKeyCreated(command.orgId, command.key)];
      case 'revoke-api-key': {
        const key = state.apiKeys.get(command.keyId);
        if (!state.exists || !key) return new DomainError('NOT_FOUND', `API key ${command.keyId} not found`);
        if (command.ifVersion !== undefined && command.ifVersion !== apiKeyVersion(key)) {
          return new DomainError('PRECONDITION_FAILED', `API key ${command.keyId} is at version ${apiKeyVersion(key)}, not ${command.ifVersion}: fetch it again and retry with its ETag`);
        }
        if (key.revoked) return new DomainError('INVALID_STATE', `API key ${command.keyId} is already revoked`);
        if (key.role === 'owner' && ownerCount(state) === 1) return new DomainError('CONFLICT', 'this is the organization’s last owner key; create another owner key first');
        return [emit(ApiKeyRevoked, { org_id: command.orgId, key_id: command.keyId })];
      }
      case 'set-billing':
        if (!state.exists) return new DomainError('NOT_FOUND', `organization ${command.orgId} not found`);
        if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
          return new DomainError('PRECONDITION_FAILED', `the organization is at revision ${state.revision}, not ${command.ifRevision}: fetch its billing again and retry with its ETag`);
        }
        return [emit(OrganizationBillingChanged, { org_id: command.orgId, billing_provider: command.billingProvider, subscription_status: command.subscriptionStatus })];
      default:
        if (!state.exists) return new DomainError('NOT_FOUND', `organization ${command.orgId} not found`);
        return decideMembership(state, command, now);
    }
  },
};

