import type { ApprovalRow } from '../projections/approvals.js';
import type { AuditEventKind, AuditSource } from '../src/events/audit.js';
import { decisionRecord } from './decision-record.js';
import type { Decision } from './decisions.js';

/** What an approval's audit rows repeat of its request. */
export type ApprovalFacts = Pick<ApprovalRow, 'approval_id' | 'project_id' | 'credential_id' | 'session_id' | 'region' | 'sql' | 'statement_kind' | 'target_tables'>;

/**
 * An audit row of a held statement that did not run: its progress rows (`approval_requested`,
 * `approved`) and its refusals (`rejected`, `approval_expired`), in the held session's trail.
 */
export function approvalDecision(
  request: ApprovalFacts,
  row: { readonly event: Extract<AuditEventKind, 'approval_requested' | 'approved' | 'rejected' | 'approval_expired'>; readonly source: AuditSource; readonly rule: string; readonly reason: string; readonly ts: string; readonly clientIp?: string },
): Decision {
  return decisionRecord({
    event: row.event,
    projectId: request.project_id,
    credentialId: request.credential_id,
    sessionId: request.session_id,
    source: row.source,
    region: request.region,
    clientIp: row.clientIp ?? '',
    ts: row.ts,
    sql: request.sql,
    kind: request.statement_kind,
    rule: row.rule,
    reason: row.reason,
    ran: false,
    rows: 0,
    bytes: 0,
    latencyUs: null,
    tablesWritten: request.target_tables,
    approvalId: request.approval_id,
  });
}
