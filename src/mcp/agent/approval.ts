/**
 * A statement the policy holds, sent through the hosted MCP: `query` answers at once with the held
 * request instead of blocking the HTTP request; the agent learns the outcome by calling `query`
 * again with the same statement and parameters (bound to the same request) or `approval_status`.
 * Once approved, the next such call runs it, at most once (the request is taken first).
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { approvalStream, type ApprovalCommand } from '../../../commands/approvals/approval.js';
import { bindingOf, nextApprovalId } from '../../../commands/approvals/binding.js';
import { evolveApproval, type ApprovalRow } from '../../../projections/approvals.js';
import { estimateRows, type Estimate } from '../../../proxy/approval-estimate.js';
import { boundToEstimate, heldRequest, notRunError, onRequest, withEstimate, type Hold } from '../../../proxy/approval-hold.js';
import { latestBoundApproval } from '../../../queries/approvals.js';
import { toolError } from '../tool.js';
import { audit, auditStrict } from './audit.js';
import type { AgentContext } from './context.js';
import { DECISION_META, type Allowed } from './gate.js';

/** The key of a held request's machine-readable form in a tool result's `_meta`. */
export const APPROVAL_META = 'pgward/approval';

/** What an agent is told of a request: id, status, expiry, the estimate, and what to do. */
export function approvalView(row: Pick<ApprovalRow, 'approval_id' | 'status' | 'expires_at' | 'estimated_rows' | 'estimate_method' | 'reason' | 'decided_by' | 'hold_reason' | 'rows_affected'>) {
  return {
    approval_id: row.approval_id,
    status: row.status,
    expires_at: new Date(row.expires_at).toISOString(),
    estimated_rows: row.estimated_rows === null ? null : Number(row.estimated_rows),
    estimate_method: row.estimate_method ?? null,
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

/** Statuses after which a binding's next call makes a new request. */
const ENDED: ReadonlySet<string> = new Set(['executed', 'expired', 'failed']);

/**
 * The request a binding's call concerns: the open (or rejected) one, if any, else `next`, the id its
 * new request gets. The read model (which may lag) says where to start; the request streams decide.
 */
async function boundRequest(context: AgentContext, binding: string): Promise<{ readonly row: ApprovalRow | undefined; readonly next: string }> {
  const hint = await latestBoundApproval(context.services.pool, context.credential.credential_id, binding);
  let id = hint?.approval_id ?? nextApprovalId(binding, null);
  for (;;) {
    const events = await context.services.store.readStream(approvalStream(id));
    const row = events.reduce<ApprovalRow | undefined>((r, event) => evolveApproval(r, event) ?? undefined, undefined);
    if (!row || !ENDED.has(row.status)) return { row, next: id };
    id = nextApprovalId(binding, id);
  }
}

/** A trial run of the statement on the credential's database, rolled back (approval-estimate.ts). */
function estimateOf(context: AgentContext, sql: string, params: readonly (string | null)[]): Promise<Estimate | null> {
  return estimateRows((statement) => context.services.databases.run(context.credential, context.upstream, statement), sql, params);
}

/**
 * Holds, reports or runs a held statement. `run` runs the statement (audited with the request's id,
 * if any) under the decision it is given, and answers as `query` does; it is called at most once per
 * request. A binding (statement, parameters, credential, policy version) has at most one open
 * request: its id is derived from the binding and the request before it, so two calls at once make one.
 */
export async function heldQuery(
  context: AgentContext,
  sql: string,
  params: readonly (string | null)[],
  decision: Allowed,
  hold: Hold,
  run: (approvalId: string | undefined, decision: Allowed) => Promise<CallToolResult>,
): Promise<CallToolResult> {
  const policy = context.policy!;
  const credential = context.credential;
  const binding = bindingOf({ sql, params, credentialId: credential.credential_id, policyId: policy.policy_id, policyVersion: policy.version });
  const services = { store: context.services.store };
  const { row: latest, next } = await boundRequest(context, binding);
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
    const result = await run(latest.approval_id, boundToEstimate(decision, latest, policy));
    await onRequest(services, latest.approval_id, endOf(result), actor).catch(() => undefined);
    return result;
  }
  // None yet, or the last one ended (ran, expired, failed): estimated, then run under the threshold or a ceiling, else a new request.
  const estimated = await withEstimate(policy, decision, hold, () => estimateOf(context, decision.sql, params));
  if ('run' in estimated) {
    context.budgets.admit(credential);
    return run(undefined, estimated.run);
  }
  const request = heldRequest({
    approvalId: next,
    source: 'mcp',
    credential,
    policy,
    sql,
    params,
    decision,
    hold: estimated.hold,
    estimate: estimated.estimate,
    sessionId: context.sessionId,
    region: context.services.region,
    now: new Date(),
  });
  // The bus holds the progress row before the request exists, so every row of its outcome follows it (spec §6).
  try {
    await auditStrict(context, { event: 'approval_requested', sql, kind: decision.statementKind, rule: request.hold_rule, reason: request.hold_reason, ran: false, tablesWritten: decision.tablesWritten, approvalId: next });
  } catch {
    return toolError('The approval request could not be announced: the audit trail is not taking records, so the statement did not run (decision_rule approval.unavailable). Retry shortly.');
  }
  const made = await onRequest(services, next, { kind: 'request', request }, actor);
  if (made) {
    // Another call of the same binding recorded it first: this call concerns that request (and was held on it, as its progress row says).
    const { row } = await boundRequest(context, binding);
    return row ? heldResult(row, false) : toolError(`The approval request could not be recorded: ${made.message}. Retry.`);
  }
  return heldResult({ ...request, estimated_rows: request.estimated_rows ?? null, estimate_method: request.estimate_method ?? null, status: 'pending', reason: '', decided_by: null, rows_affected: null }, true);
}

/** How an approved statement's run ends its request: executed with the tag's rows, or failed with the refusal (its bound, the cap) or the error. */
function endOf(result: CallToolResult): ApprovalCommand {
  if (!result.isError) {
    const command = (result.structuredContent as { command?: string } | undefined)?.command ?? '';
    return { kind: 'executed', rowsAffected: Number(/(\d+)$/.exec(command)?.[1] ?? 0) };
  }
  const refused = result._meta?.[DECISION_META] as { readonly reason?: string; readonly sqlstate?: string } | undefined;
  return { kind: 'fail', sqlstate: refused?.sqlstate ?? 'XX000', message: refused?.reason ?? 'the approved statement did not complete' };
}
