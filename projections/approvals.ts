import {
  ApprovalApproved, ApprovalExecuted, ApprovalExecutionStarted, ApprovalExpired, ApprovalFailed, ApprovalRejected, ApprovalRequested, type ApprovalSource, type EstimateMethod,
} from '../src/events/approvals.js';
import { decodeWith } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** Spec §3.2's statuses; a running request reads as `approved` until it ends. */
export type ApprovalRowStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'executed' | 'failed';

export type ApprovalRow = {
  approval_id: string;
  project_id: string;
  database_id: string;
  policy_profile_id: string;
  policy_version: number;
  credential_id: string | null;
  session_id: string;
  region: string;
  source: ApprovalSource;
  sql: string;
  normalized_sql: string;
  statement_kind: string;
  target_tables: string[];
  estimated_rows: string | null;
  estimate_method: EstimateMethod | null;
  binding: string;
  hold_rule: string;
  hold_reason: string;
  status: ApprovalRowStatus;
  /** Taken by its executor (ApprovalExecutionStarted): it runs, or ran, at most once. */
  started: boolean;
  requested_at: string;
  expires_at: string;
  decided_at: string | null;
  decided_by: string | null;
  reason: string;
  rows_affected: string | null;
  revision: number;
  updated_at: string;
};

const STREAM = 'approval-';

export function evolveApproval(row: ApprovalRow | undefined, event: RecordedEvent): ApprovalRow | null {
  if (event.type === ApprovalRequested.type) {
    const { data, metadata } = decodeWith(ApprovalRequested, event);
    return {
      ...data,
      estimate_method: data.estimate_method ?? null,
      status: 'pending',
      started: false,
      requested_at: metadata.at,
      decided_at: null,
      decided_by: null,
      reason: '',
      rows_affected: null,
      revision: event.revision,
      updated_at: metadata.at,
    };
  }
  if (!row) return null;
  const moved = (changes: Partial<ApprovalRow>, at: string): ApprovalRow => ({ ...row, ...changes, revision: event.revision, updated_at: at });
  switch (event.type) {
    case ApprovalApproved.type:
    case ApprovalRejected.type: {
      const { data, metadata } = decodeWith(event.type === ApprovalApproved.type ? ApprovalApproved : ApprovalRejected, event);
      return moved({ status: event.type === ApprovalApproved.type ? 'approved' : 'rejected', decided_at: metadata.at, decided_by: data.decided_by, reason: data.reason }, metadata.at);
    }
    case ApprovalExpired.type: {
      const { data, metadata } = decodeWith(ApprovalExpired, event);
      return moved({ status: 'expired', reason: `expired undecided at ${data.expired_at}` }, metadata.at);
    }
    case ApprovalExecutionStarted.type:
      return moved({ started: true }, decodeWith(ApprovalExecutionStarted, event).metadata.at);
    case ApprovalExecuted.type: {
      const { data, metadata } = decodeWith(ApprovalExecuted, event);
      return moved({ status: 'executed', rows_affected: data.rows_affected }, metadata.at);
    }
    case ApprovalFailed.type: {
      const { data, metadata } = decodeWith(ApprovalFailed, event);
      const note = row.reason === '' ? '' : `${row.reason}; `;
      return moved({ status: 'failed', reason: `${note}failed (${data.sqlstate}): ${data.message}`.slice(0, 2_500) }, metadata.at);
    }
    default:
      return row;
  }
}

export function approvalIdOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(STREAM) ? event.stream.slice(STREAM.length) : undefined;
}

export const approvalsProjection = rowProjection<ApprovalRow>({
  name: 'approvals',
  streamPrefixes: [STREAM],
  table: {
    name: 'approvals',
    key: 'approval_id',
    columnNames: [
      'approval_id', 'project_id', 'database_id', 'policy_profile_id', 'policy_version', 'credential_id', 'session_id', 'region', 'source', 'sql', 'normalized_sql',
      'statement_kind', 'target_tables', 'estimated_rows', 'binding', 'hold_rule', 'hold_reason', 'status', 'started', 'requested_at', 'expires_at', 'decided_at',
      'decided_by', 'reason', 'rows_affected', 'revision', 'updated_at', 'estimate_method',
    ],
    columns: `approval_id text primary key, project_id text not null, database_id text not null, policy_profile_id text not null, policy_version integer not null,
      credential_id text, session_id text not null, region text not null, source text not null, sql text not null, normalized_sql text not null,
      statement_kind text not null, target_tables jsonb not null, estimated_rows text, binding text not null, hold_rule text not null, hold_reason text not null,
      status text not null, started boolean not null, requested_at timestamptz not null, expires_at timestamptz not null, decided_at timestamptz,
      decided_by text, reason text not null, rows_affected text, revision integer not null, updated_at timestamptz not null, estimate_method text`,
    addedColumns: ['estimate_method text'],
    orderBy: 'approval_id',
    indexes: ['project_id, approval_id', { name: 'approvals_pending_expiry', columns: 'expires_at', where: `status = 'pending'` }],
  },
  keyOf: approvalIdOf,
  evolve: evolveApproval,
});
