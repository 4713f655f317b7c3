/**
 * A statement the policy holds, sent through the hosted MCP: `query` answers at once with the held
 * request instead of blocking the HTTP request; the agent learns the outcome by calling `query`
 * again with the same statement and parameters (bound to the same request) or `approval_status`.
 * Once approved, the next such call runs it, at most once (the request is taken first).
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { approval, approvalStream } from '../../../commands/approvals/approval.js';
import { bindingOf } from '../../../commands/approvals/binding.js';
import { handle } from '../../../commands/handle.js';
import type { ApprovalRow } from '../../../projections/approvals.js';
import { notRunError, onRequest, type Hold } from '../../../proxy/approval-hold.js';
import { statementIdentity } from '../../../proxy/policy/identity.js';
import { latestBoundApproval } from '../../../queries/approvals.js';
import { newId } from '../../ids.js';
import { toolError } from '../tool.js';
import { audit } from './audit.js';
import type { AgentContext } from './context.js';
import type { Allowed } from './gate.js';

/** The key of a held request's machine-readable form in a tool result's `_meta`. */
export const APPROVAL_META = 'pgward/approval';

/** What an agent is told of a request: id, status, expiry, the estimate, and what to do. */
export function approvalView(row: Pick<ApprovalRow, 'approval_id' | 'status' | 'expires_at' | 'estimated_rows' | 'reason' | 'decided_by' | 'hold_reason' | 'rows_affected'>) {
  return {
    approval_id: row.approval_id,
    status: row.status,
    expires_at: new Date(row.expires_at).toISOString(),
    estimated_rows: row.estimated_rows === null ? null : Number(row.estimated_rows),
    held_because: row.hold_reason,
    decided_by: row.decided_by,
    reason: row.reason,
    rows_affected: row.rows_affected === null ? null : Number(row.rows_affected),
  };
}

function heldResult(row: Parameters<typeof approvalView>[0], fresh: boolean): CallToolResult {
  const view = approvalView(row);
  const lead = fresh ? 'Held for a human’s approval' : 'Still waiting for a human’s approval';
  return {
    ...toolError(
      `${lead} (decision_rule approval.held, request ${view.approval_id}, expires ${view.expires_at}): ${view.held_because}. It has not run. ` +
        'Call query again with exactly the same sql and params once a reviewer approved it (it then runs, once), or approval_status with the approval_id to see the decision.',
    ),
    _meta: { [APPROVAL_META]: view },
  };
}

/**
 * Holds, reports or runs a held statement. `run` runs the statement (audited with the request's id)
 * and answers as `query` does; it is called at most once per request.
 */
export async function heldQuery(context: AgentContext, sql: string, params: readonly (string | null)[], decision: Allowed, hold: Hold, run: (approvalId: string) => Promise<CallToolResult>): Promise<CallToolResult> {
  const policy = context.policy!;
  const credential = context.credential;
  const binding = bindingOf({ sql, params, credentialId: credential.credential_id, policyId: policy.policy_id, policyVersion: policy.version });
  const services = { store: context.services.store };
  const latest = await latestBoundApproval(context.services.pool, credential.credential_id, binding);
  const actor = `mcp:${context.sessionId}`.slice(0, 200);
  if (latest?.status === 'pending') return heldResult(latest, false);
  if (latest?.status === 'rejected') {
    const error = notRunError(latest);
    return toolError(`Refused by a reviewer (decision_rule ${error.rule}, SQLSTATE ${error.sqlstate}): ${error.message}. Change the statement, or ask the reviewer.`);
  }
  if (latest?.status === 'approved') {
    if (latest.started) return toolError(`Approval request ${latest.approval_id} is running or ran already (decision_rule approval.failed); an approved statement runs once. See approval_status.`);
    const taken = await onRequest(services, latest.approval_id, { kind: 'start', executor: actor }, actor);
    if (taken) return toolError(`Approval request ${latest.approval_id} cannot run: ${taken.message} (decision_rule approval.failed).`);
    audit(context, { event: 'approved', sql, kind: decision.statementKind, rule: 'approval.approved', reason: `approved by ${latest.decided_by ?? 'unknown'}${latest.reason === '' ? '' : `: ${latest.reason}`}`, ran: false, tablesWritten: decision.tablesWritten, approvalId: latest.approval_id });
    const result = await run(latest.approval_id);
    const command = (result.structuredContent as { command?: string } | undefined)?.command ?? '';
    const rows = /(\d+)$/.exec(command)?.[1];
    await onRequest(services, latest.approval_id, result.isError ? { kind: 'fail', sqlstate: 'XX000', message: 'the approved statement did not complete' } : { kind: 'executed', rowsAffected: Number(rows ?? 0) }, actor).catch(() => undefined);
    return result;
  }
  // None yet, or the last one ended (ran, expired, failed): a new request.
  const approvalId = newId('apr_');
  const request = {
    approval_id: approvalId,
    project_id: credential.project_id,
    database_id: credential.database_id,
    policy_profile_id: policy.policy_id,
    credential_id: credential.credential_id,
    session_id: context.sessionId,
    region: context.services.region,
    sql,
    normalized_sql: statementIdentity(sql).normalized_sql || sql,
    statement_kind: decision.statementKind || 'other',
    target_tables: [...decision.tablesWritten],
    estimated_rows: null,
    expires_at: new Date(Date.now() + policy.approval.expiry_seconds * 1000).toISOString(),
    source: 'mcp' as const,
    policy_version: policy.version,
    binding,
    hold_rule: hold.rule,
    hold_reason: hold.reason,
  };
  await handle(context.services.store, approvalStream(approvalId), approval, { kind: 'request', request }, { correlationId: `approval-${approvalId}`, actor });
  audit(context, { event: 'approval_requested', sql, kind: decision.statementKind, rule: hold.rule, reason: hold.reason, ran: false, tablesWritten: decision.tablesWritten, approvalId });
  return heldResult({ ...request, status: 'pending', reason: '', decided_by: null, rows_affected: null }, true);
}
