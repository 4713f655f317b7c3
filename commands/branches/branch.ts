import type { z } from 'zod';
import { BranchCreated, BranchDeleted, BranchFailed, BranchReady, type BranchCopyMethod } from '../../src/events/branches.js';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

export type BranchStatus = 'copying' | 'ready' | 'failed' | 'deleted';

/** One sandbox branch per stream (`branch-<id>`). `revision` is its ETag. */
export interface BranchState {
  readonly status: BranchStatus | 'none';
  readonly branchId?: string;
  readonly revision: number;
}

export type BranchCommand =
  | { readonly kind: 'create'; readonly branch: z.input<typeof BranchCreated.schema> }
  | { readonly kind: 'ready'; readonly method: BranchCopyMethod }
  | { readonly kind: 'fail'; readonly reason: string }
  | { readonly kind: 'delete'; readonly ifRevision?: number };

function evolve(state: BranchState, event: CatalogEvent): BranchState {
  switch (event.type) {
    case BranchCreated.type:
      return { status: 'copying', branchId: event.data.branch_id, revision: event.revision };
    case BranchReady.type:
      return { ...state, status: 'ready', revision: event.revision };
    case BranchFailed.type:
      return { ...state, status: 'failed', revision: event.revision };
    case BranchDeleted.type:
      return { ...state, status: 'deleted', revision: event.revision };
    default:
      return state;
  }
}

function decide(state: BranchState, command: BranchCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.status !== 'none') return new DomainError('RESOURCE_EXISTS', `branch ${command.branch.branch_id} already exists`);
    return [emit(BranchCreated, command.branch)];
  }
  if (state.status === 'none' || state.status === 'deleted') return new DomainError('NOT_FOUND', 'branch not found');
  const branch_id = state.branchId!;
  switch (command.kind) {
    case 'ready':
      return state.status === 'copying' ? [emit(BranchReady, { branch_id, method: command.method })] : new DomainError('INVALID_STATE', `the branch is ${state.status}, not copying`);
    case 'fail':
      return state.status === 'copying' ? [emit(BranchFailed, { branch_id, reason: command.reason })] : new DomainError('INVALID_STATE', `the branch is ${state.status}, not copying`);
    case 'delete':
      if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
        return new DomainError('PRECONDITION_FAILED', `the branch is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
      }
      return [emit(BranchDeleted, { branch_id })];
  }
}

export const branch: Aggregate<BranchState, BranchCommand> = {
  initial: { status: 'none', revision: -1 },
  evolve,
  decide,
};
