import type { BaseLogger } from 'pino';
import type { AuditEventKind } from '../src/events/audit.js';
import { logEvent } from '../src/log-events.js';

/** Who a decision was about, as its security log line names it (ids only: no statement text). */
export interface DecisionSubject {
  readonly source: 'wire' | 'mcp';
  readonly session: string;
  readonly credential_id: string;
  readonly project_id: string;
}

/** The security log line of a recorded refusal, when it is one an operator alerts on: a tripped honeytoken, a spent budget. */
export function logRecordedRefusal(logger: Pick<BaseLogger, 'info' | 'warn'>, recorded: { readonly event: AuditEventKind; readonly rule: string }, subject: DecisionSubject): void {
  if (recorded.event === 'canary_tripped') logEvent(logger, 'honeytoken_tripped', { ...subject, rule: recorded.rule }, 'a statement touched a honeytoken');
  else if (recorded.event === 'budget_exhausted') logEvent(logger, 'budget_exhausted', { ...subject, rule: recorded.rule }, 'a statement was refused: a query budget is spent');
}
