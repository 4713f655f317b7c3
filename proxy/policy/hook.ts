import type { CredentialRow } from '../../projections/credentials.js';
import type { AuditEventKind } from '../../src/events/audit.js';

/** What the policy engine says about one statement. */
export type StatementDecision =
  | { readonly action: 'allow'; readonly event: AuditEventKind; readonly statementKind: string; readonly rule: string; readonly reason: string }
  | { readonly action: 'refuse'; readonly event: AuditEventKind; readonly statementKind: string; readonly rule: string; readonly reason: string; readonly sqlstate: string };

export interface StatementContext {
  readonly credential: CredentialRow;
  readonly protocol: 'simple' | 'extended';
}

const KIND = /^\s*(?:(?:--[^\n]*\n|\/\*[\s\S]*?\*\/)\s*)*([A-Za-z]+)/;

/** The statement's kind from its first keyword (`select`, `update`, ...); '' when there is none. */
export function statementKind(sql: string): string {
  return KIND.exec(sql)?.[1]?.toLowerCase().slice(0, 32) ?? '';
}

/**
 * The policy hook every statement passes through, on the wire and (later) on MCP. The policy
 * engine replaces this body; until then every statement is allowed and only its kind is reported.
 */
export function decideStatement(sql: string, _context: StatementContext): StatementDecision {
  return { action: 'allow', event: 'query', statementKind: statementKind(sql), rule: '', reason: '' };
}
