import type { Decision } from '../../../proxy/decisions.js';
import { decisionRecord } from '../../../proxy/decision-record.js';
import { logRecordedRefusal } from '../../../proxy/decision-log.js';
import type { AuditEventKind } from '../../events/audit.js';
import type { AgentContext } from './context.js';
import type { CacheOutcome } from '../../../proxy/cache/caches.js';

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
  /** The approval request it concerns (its progress rows, and the outcome of an approved statement). */
  readonly approvalId?: string;
  /** What the result cache made of a statement that ran; bypass when unset. */
  readonly cache?: CacheOutcome;
}

/** The audit record of an outcome: a StatementDecided of source `mcp`, shaped as the wire's are. */
function mcpDecision(context: AgentContext, outcome: Outcome): Decision {
  return decisionRecord({
    ...outcome,
    ts: outcome.ts ?? new Date().toISOString(),
    rows: outcome.rows ?? 0,
    bytes: outcome.bytes ?? 0,
    latencyUs: outcome.latencyUs ?? null,
    projectId: context.credential.project_id,
    credentialId: context.credential.credential_id,
    sessionId: context.sessionId,
    source: 'mcp',
    region: context.services.region,
    clientIp: context.clientIp,
  });
}

/** Hands the outcome to the decision bus (best effort, as the wire path does). */
export function audit(context: AgentContext, outcome: Outcome): void {
  if (outcome.ran) context.budgets.spent(context.credential, outcome.bytes ?? 0);
  else logRecordedRefusal(context.log, outcome, { source: 'mcp', session: context.sessionId, credential_id: context.credential.credential_id, project_id: context.credential.project_id });
  context.services.decisions.publish(mcpDecision(context, outcome));
}

/** Resolves once the decision bus holds the outcome's record; rejects when it cannot take it (a refusal's record, not counted against a budget). */
export function auditStrict(context: AgentContext, outcome: Outcome & { readonly ran: false }): Promise<void> {
  return context.services.decisions.publishStrict(mcpDecision(context, outcome));
}
