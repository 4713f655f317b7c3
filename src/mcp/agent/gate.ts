import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { holdFor, holdUnavailable, type Hold } from '../../../proxy/approval-hold.js';
import { catalogVersionOf } from '../../../proxy/cache/cacheable.js';
import { recordedRefusal } from '../../../proxy/decision-record.js';
import { RELATION_UNKNOWN } from '../../../proxy/policy/known-relations.js';
import { sessionValuesOf, statementKind, type StatementDecision } from '../../../proxy/policy/hook.js';
import type { UpstreamCatalog } from '../../../proxy/policy/upstream-catalog.js';
import { decideWithCatalog, type CatalogUnavailable } from '../../../proxy/upstream/catalog-snapshot.js';
import { isUpstreamRule, upstreamRule, type UpstreamFailure } from '../../../proxy/upstream/failure.js';
import type { AuditEventKind } from '../../events/audit.js';
import { asFailure, toolError } from '../tool.js';
import { audit } from './audit.js';
import type { AgentContext } from './context.js';

export type Allowed = Extract<StatementDecision, { action: 'allow' }>;
export type Refused = Extract<StatementDecision, { action: 'refuse' }>;

/** The key of a refusal's machine-readable form in a tool result's `_meta`. */
export const DECISION_META = 'pgward/decision';

/**
 * A refusal as the agent gets it: the reason verbatim, with the rule and SQLSTATE, so it can correct
 * itself (spec §4.7, §7 rule 5). One for want of an upstream connection (rule upstream.*, or region.* for a relay link) is not the policy's.
 */
export function refusal(decision: Pick<Refused, 'rule' | 'reason' | 'sqlstate' | 'tablesBlocked'> & { readonly event: AuditEventKind }): CallToolResult {
  const lead = isUpstreamRule(decision.rule) ? 'The statement did not run' : 'Refused by the policy';
  return {
    ...toolError(`${lead} (decision_rule ${decision.rule}, SQLSTATE ${decision.sqlstate}): ${decision.reason}`),
    _meta: { [DECISION_META]: { event: decision.event, decision_rule: decision.rule, reason: decision.reason, sqlstate: decision.sqlstate, tables_blocked: decision.tablesBlocked } },
  };
}

/** A statement that could not run because no upstream connection could be had: the failure's wording, SQLSTATE and rule, as a refusal's; a failure for the tool-call metrics (outcome error). */
export function upstreamRefusal(failure: UpstreamFailure): CallToolResult {
  return asFailure(refusal({ event: 'blocked', rule: upstreamRule(failure), reason: failure.message, sqlstate: failure.sqlstate, tablesBlocked: [] }));
}

/**
 * The policy engine's decision on `sql`, exactly as the wire decides an extended-protocol Parse,
 * on the database's catalog snapshot (refused, catalog.unavailable, when there is none). The
 * credential is the token's (no SCRAM verifier: the MCP never loads one), which is all its
 * honeytokens need to disable it.
 */
export async function decide(context: AgentContext, sql: string): Promise<StatementDecision> {
  return decideOn(context, sql, await catalogFor(context, sql));
}

/**
 * The catalog snapshot to decide `sql` on: read again first when the statement names a relation the
 * snapshot lacks (refused catalog.relation_unknown on it), so that it is decided on what the upstream has now.
 */
async function catalogFor(context: AgentContext, sql: string): Promise<UpstreamCatalog | CatalogUnavailable> {
  const catalog = await context.services.databases.catalog(context.credential, context.upstream);
  const decision = decideOn(context, sql, catalog);
  if (decision.action !== 'refuse' || decision.rule !== RELATION_UNKNOWN) return catalog;
  return context.services.databases.catalog(context.credential, context.upstream, true);
}

function decideOn(context: AgentContext, sql: string, catalog: UpstreamCatalog | CatalogUnavailable): StatementDecision {
  return decideWithCatalog(sql, { credential: context.credential, policy: context.policy, protocol: 'extended', honeytokens: context.honeytokens, hashKey: context.hashKey, sessionValues: sessionValuesOf(context.credential), sandboxed: context.upstream.branch !== undefined }, catalog);
}

/**
 * Decides a statement the agent wants run, and audits what the wire would: progress rows, and a
 * refusal (returned as the tool error). Under `audit_mode: strict` nothing runs while the audit
 * trail cannot take records.
 */
export async function admit(context: AgentContext, sql: string): Promise<{ allowed: Allowed; catalogVersion: string } | { refused: CallToolResult }>;
/** With `holds`, a statement the approval rules hold is returned as held, for the caller to hold it (approval.ts). */
export async function admit(context: AgentContext, sql: string, options: { readonly holds: true }): Promise<{ allowed: Allowed; catalogVersion: string } | { refused: CallToolResult } | { held: Allowed; hold: Hold }>;
export async function admit(context: AgentContext, sql: string, options: { readonly holds?: boolean } = {}): Promise<{ allowed: Allowed; catalogVersion: string } | { refused: CallToolResult } | { held: Allowed; hold: Hold }> {
  const catalog = await catalogFor(context, sql);
  // Synchronous from here: a batch's calls run concurrently, and no await may split the budget check from the count.
  if (context.policy?.audit_mode === 'strict' && !context.services.decisions.acceptingStrict()) {
    return { refused: toolError('The audit trail cannot take records right now, and this credential’s policy (audit_mode strict) refuses statements it cannot audit; retry shortly.') };
  }
  const overBudget = context.policy && context.budgets.refusal(context.credential, context.policy);
  if (overBudget) {
    audit(context, { event: 'budget_exhausted', sql, kind: statementKind(sql), rule: overBudget.rule, reason: overBudget.reason, ran: false });
    return { refused: refusal({ event: 'budget_exhausted', sqlstate: '53400', tablesBlocked: [], ...overBudget }) };
  }
  const decision = decideOn(context, sql, catalog);
  for (const progress of decision.action === 'allow' ? decision.progress : []) {
    audit(context, { event: progress.event, sql, kind: decision.statementKind, rule: progress.rule, reason: progress.reason, ran: false, tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten });
  }
  const hold = decision.action === 'allow' ? holdFor(context.policy, decision, catalog) : undefined;
  if (decision.action === 'allow' && hold && options.holds) return { held: decision, hold };
  if (decision.action === 'allow' && hold) {
    // A tool that cannot hold a statement (explain) refuses it: it never runs unheld.
    const held = { event: 'blocked' as const, ...holdUnavailable(hold, 'through this tool'), tablesBlocked: [] };
    audit(context, { ...held, sql, kind: decision.statementKind, ran: false, tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten });
    return { refused: refusal(held) };
  }
  if (decision.action === 'allow') {
    // Counted as it is admitted, before it runs: the statements of one batch cannot overrun the budget together.
    context.budgets.admit(context.credential);
    return { allowed: decision, catalogVersion: catalogVersionOf(catalog) };
  }
  auditRefusal(context, sql, decision);
  return { refused: refusal(decision) };
}

/** Records a refusal in the audit trail, as the wire does. */
export function auditRefusal(context: AgentContext, sql: string, decision: Refused): void {
  audit(context, {
    ...recordedRefusal(decision),
    sql,
    kind: decision.statementKind,
    ran: false,
    tablesRead: decision.tablesRead,
    tablesWritten: decision.tablesWritten,
    tablesBlocked: decision.tablesBlocked,
  });
}
