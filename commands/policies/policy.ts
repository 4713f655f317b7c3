import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { PolicyProfileCreated, PolicyProfileDeleted, PolicyProfileUpdated, PolicyRoleProvisioned } from '../../src/events/policies.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

export interface PolicyState {
  readonly exists: boolean;
  readonly deleted: boolean;
  readonly policyId?: string;
  readonly readOnly: boolean;
  readonly version: number;
  readonly revision: number;
}

type PolicyCreatedData = z.input<typeof PolicyProfileCreated.schema>;
type PolicyChanges = z.input<typeof PolicyProfileUpdated.schema>['changes'];

export type PolicyCommand =
  | { readonly kind: 'create'; readonly policy: PolicyCreatedData }
  | { readonly kind: 'update'; readonly changes: PolicyChanges; readonly ifRevision?: number }
  /** `inUse` counts live credentials enforcing the policy; the route looks it up. */
  | { readonly kind: 'delete'; readonly inUse: number; readonly ifRevision?: number }
  /** Records an upstream role the route has just made for the policy on one database. */
  | { readonly kind: 'record-role'; readonly role: Omit<z.input<typeof PolicyRoleProvisioned.schema>, 'policy_id'>; readonly version: number };

function evolve(state: PolicyState, event: CatalogEvent): PolicyState {
  switch (event.type) {
    case PolicyProfileCreated.type:
      return { ...state, exists: true, policyId: event.data.policy_id, readOnly: event.data.read_only, version: 1, revision: event.revision };
    case PolicyProfileUpdated.type:
      return { ...state, readOnly: event.data.changes.read_only ?? state.readOnly, version: event.data.version, revision: event.revision };
    case PolicyProfileDeleted.type:
      return { ...state, deleted: true, revision: event.revision };
    default:
      return state;
  }
}

/** Why a write-capable policy gets no upstream role. */
export const WRITE_CAPABLE = 'the policy is write-capable (read_only false); database-side enforcement makes SELECT-only roles, so only read-only policies can be provisioned';

/** The role's grants were computed from policy version `version`; a policy changed since then is provisioned again, not recorded. */
function recordRole(state: PolicyState, command: Extract<PolicyCommand, { kind: 'record-role' }>): Emit[] | DomainError {
  if (!state.readOnly) return new DomainError('INVALID_STATE', WRITE_CAPABLE);
  if (state.version !== command.version) {
    return new DomainError('CONFLICT', `the policy changed (version ${command.version} → ${state.version}) while its role was provisioned; provision again`);
  }
  return [emit(PolicyRoleProvisioned, { policy_id: state.policyId!, ...command.role })];
}

function decide(state: PolicyState, command: PolicyCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `policy ${command.policy.policy_id} already exists`);
    return [emit(PolicyProfileCreated, command.policy)];
  }
  if (!state.exists || state.deleted) return new DomainError('NOT_FOUND', 'policy not found');
  if (command.kind === 'record-role') return recordRole(state, command);
  if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the policy is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
  }
  if (command.kind === 'update') return [emit(PolicyProfileUpdated, { policy_id: state.policyId!, changes: command.changes, version: state.version + 1 })];
  if (command.inUse > 0) {
    return new DomainError('CONFLICT', `the policy is enforced for ${command.inUse} live credential(s); revoke them or move them to another policy first`);
  }
  return [emit(PolicyProfileDeleted, { policy_id: state.policyId! })];
}

export const policy: Aggregate<PolicyState, PolicyCommand> = {
  initial: { exists: false, deleted: false, readOnly: true, version: 0, revision: -1 },
  evolve,
  decide,
};
