import type { Decision } from '../../../proxy/decisions.js';
import { decisionRecord, type RanUpstream } from '../../../proxy/decision-record.js';
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
  /** Where a statement that went upstream ran, when not on this region's primary (relayed to another region's data plane). */
  readonly upstream?: RanUpstream | undefined;
}

/** Where an MCP request's records come from: the request's credential, session, region and client. */
export interface McpOrigin {
  readonly credential: { readonly project_id: string; readonly credential_id: string };
  readonly sessionId: string;
  readonly region: string;
  readonly clientIp: string;
}

/** The audit record of an outcome: a StatementDecided of source `mcp`, shaped as the wire's are. */
export function mcpDecision(origin: McpOrigin, outcome: Outcome): Decision {
  return decisionRecord({
    ...outcome,
    ts: outcome.ts ?? new Date().toISOString(),
    rows: outcome.rows ?? 0,
    bytes: outcome.bytes ?? 0,
    latencyUs: outcome.latencyUs ?? null,
    projectId: origin.credential.project_id,
    credentialId: origin.credential.credential_id,
    sessionId: origin.sessionId,
    source: 'mcp',
    region: origin.region,
    clientIp: origin.clientIp,
  });
}

/** Hands the outcome to the decision bus (best effort, as the wire path does). */
export function audit(context: AgentContext, outcome: Outcome): void {
  if (outcome.ran) context.budgets.spent(context.credential, outcome.bytes ?? 0);
  else logRecordedRefusal(context.log, outcome, { source: 'mcp', session: context.sessionId, credential_id: context.credential.credential_id, project_id: context.credential.project_id });
  context.services.auditHold?.used(context.credential.credential_id);
  context.services.decisions.publish(mcpDecision(originOf(context), outcome));
}

const originOf = (context: AgentContext): McpOrigin => ({ credential: context.credential, sessionId: context.sessionId, region: context.services.region, clientIp: context.clientIp });

/** Resolves once the decision bus holds the outcome's record; rejects when it cannot take it (a refusal's record, not counted against a budget). */
export function auditStrict(context: AgentContext, outcome: Outcome & { readonly ran: false }): Promise<void> {
  context.services.auditHold?.used(context.credential.credential_id);
  return context.services.decisions.publishStrict(mcpDecision(originOf(context), outcome));
}
