import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import {
  ApprovalApproved, ApprovalExecuted, ApprovalExecutionStarted, ApprovalExpired, ApprovalFailed, ApprovalRejected, ApprovalRequested,
} from '../../src/events/approvals.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** The statuses of spec §3.2, plus `running`: approved and taken by its executor (still `approved` to a reader). */
export type ApprovalStatus = 'pending' | 'approved' | 'running' | 'rejected' | 'expired' | 'executed' | 'failed';

/** One held statement per stream (`approval-<id>`). */
export interface ApprovalState {
  readonly status: ApprovalStatus | 'none';
  readonly request?: ApprovalRequested;
}

export type ApprovalCommand =
  | { readonly kind: 'request'; readonly request: z.input<typeof ApprovalRequested.schema> }
  | { readonly kind: 'approve' | 'reject'; readonly decidedBy: string; readonly reason: string }
  /** Records the lapse of a pending request at its expires_at (the sweep); refused before then. */
  | { readonly kind: 'expire' }
  /** The executor takes an approved request; only one ever does. */
  | { readonly kind: 'start'; readonly executor: string }
  | { readonly kind: 'executed'; readonly rowsAffected: number }
  | { readonly kind: 'fail'; readonly sqlstate: string; readonly message: string };

const DECIDED: Readonly<Record<string, string>> = {
  approved: 'was approved already',
  running: 'was approved already and is running',
  rejected: 'was rejected already',
  expired: 'expired undecided',
  executed: 'was approved and has run',
  failed: 'has failed',
};

function evolve(state: ApprovalState, event: CatalogEvent): ApprovalState {
  switch (event.type) {
    case ApprovalRequested.type:
      return { status: 'pending', request: event.data };
    case ApprovalApproved.type:
      return { ...state, status: 'approved' };
    case ApprovalRejected.type:
      return { ...state, status: 'rejected' };
    case ApprovalExpired.type:
      return { ...state, status: 'expired' };
    case ApprovalExecutionStarted.type:
      return { ...state, status: 'running' };
    case ApprovalExecuted.type:
      return { ...state, status: 'executed' };
    case ApprovalFailed.type:
      return { ...state, status: 'failed' };
    default:
      return state;
  }
}

function notPending(state: ApprovalState, what: string): DomainError {
  return new DomainError('INVALID_STATE', `approval request ${state.request!.approval_id} ${DECIDED[state.status] ?? 'is not pending'}; it cannot be ${what}`);
}

function decide(state: ApprovalState, command: ApprovalCommand, now: string): Emit[] | DomainError {
  if (command.kind === 'request') {
    if (state.status !== 'none') return new DomainError('RESOURCE_EXISTS', `approval request ${command.request.approval_id} exists already`);
    return [emit(ApprovalRequested, command.request)];
  }
  const request = state.request;
  if (!request) return new DomainError('NOT_FOUND', 'approval request not found');
  const approvalId = request.approval_id;
  const lapsed = now >= request.expires_at;
  switch (command.kind) {
    case 'approve':
    case 'reject':
      if (state.status !== 'pending') return notPending(state, command.kind === 'approve' ? 'approved' : 'rejected');
      if (lapsed) return new DomainError('INVALID_STATE', `approval request ${approvalId} expired at ${request.expires_at}; it cannot be decided any more`);
      return [emit(command.kind === 'approve' ? ApprovalApproved : ApprovalRejected, { approval_id: approvalId, decided_by: command.decidedBy, reason: command.reason })];
    case 'expire':
      if (state.status !== 'pending') return notPending(state, 'expired');
      if (!lapsed) return new DomainError('INVALID_STATE', `approval request ${approvalId} is not due to expire before ${request.expires_at}`);
      return [emit(ApprovalExpired, { approval_id: approvalId, expired_at: request.expires_at })];
    case 'start':
      if (state.status !== 'approved') return new DomainError('INVALID_STATE', `approval request ${approvalId} is ${state.status === 'pending' ? 'not approved' : DECIDED[state.status]}; it cannot run`);
      return [emit(ApprovalExecutionStarted, { approval_id: approvalId, executor: command.executor })];
    case 'executed':
      if (state.status !== 'running') return new DomainError('INVALID_STATE', `approval request ${approvalId} is not running`);
      return [emit(ApprovalExecuted, { approval_id: approvalId, rows_affected: String(command.rowsAffected) })];
    case 'fail':
      if (state.status !== 'pending' && state.status !== 'approved' && state.status !== 'running') return notPending(state, 'failed');
      return [emit(ApprovalFailed, { approval_id: approvalId, sqlstate: command.sqlstate, message: command.message.slice(0, 2_000) })];
  }
}

export const approval: Aggregate<ApprovalState, ApprovalCommand> = {
  initial: { status: 'none' },
  evolve,
  decide,
};

export const approvalStream = (approvalId: string): string => `approval-${approvalId}`;
