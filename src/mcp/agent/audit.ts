import type { Decision } from '../../../proxy/decisions.js';
import { statementIdentity } from '../../../proxy/policy/identity.js';
import type { AuditEventKind } from '../../events/audit.js';
import type { AgentContext } from './context.js';

/** What became of one statement an agent sent through MCP. */
export interface Outcome {
  readonly event: AuditEventKind;
  readonly sql: string;
  readonly kind: string;
  readonly rule: string;
  readonly reason: string;
  /** Whether it went upstream (a refusal did not). */
  readonly ran: boolean;
  /** When it started; now when absent. */
  readonly ts?: string;
  readonly rows?: number;
  readonly bytes?: number;
  readonly latencyUs?: number;
  readonly tablesRead?: readonly string[];
  readonly tablesWritten?: readonly string[];
  readonly tablesBlocked?: readonly string[];
}

/** The audit record of an outcome: a StatementDecided of source `mcp`, shaped as the wire's are. */
export function mcpDecision(context: AgentContext, outcome: Outcome): Decision {
  return {
    event: outcome.event,
    project_id: context.credential.project_id,
    credential_id: context.credential.credential_id,
    session_id: context.sessionId,
    source: 'mcp',
    region: context.services.region,
    client_ip: context.clientIp,
    ts: outcome.ts ?? new Date().toISOString(),
    sql: outcome.sql,
    ...statementIdentity(outcome.sql),
    statement_kind: outcome.kind,
    decision_rule: outcome.rule,
    reason: outcome.reason,
    cache_status: outcome.ran ? 'bypass' : 'none',
    rows_returned: String(outcome.rows ?? 0),
    bytes_out: String(outcome.bytes ?? 0),
    latency_us: outcome.latencyUs ?? null,
    tables_read: [...(outcome.tablesRead ?? [])],
    tables_written: [...(outcome.tablesWritten ?? [])],
    tables_blocked: [...(outcome.tablesBlocked ?? [])],
    parsed: outcome.kind !== '',
    approval_id: null,
  };
}

/** Hands the outcome to the decision bus (best effort, as the wire path does). */
export function audit(context: AgentContext, outcome: Outcome): void {
  if (outcome.ran) context.budgets.spent(context.credential, outcome.bytes ?? 0);
  context.services.decisions.publish(mcpDecision(context, outcome));
}
