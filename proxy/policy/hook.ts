import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import type { AuditEventKind } from '../../src/events/audit.js';
import { AnalysisCache } from './cache.js';
import type { PolicyDecision } from './decide.js';
import { decideSql } from './policy.js';
import type { PolicyRules } from './rules.js';

/** What the policy engine says about one client message's SQL (one or several statements): a statement's decision, less its mask edits. */
export type StatementDecision = Omit<Extract<PolicyDecision, { action: 'allow' }>, 'masks'> | Extract<PolicyDecision, { action: 'refuse' }>;

export interface StatementContext {
  readonly credential: CredentialRow;
  /** The credential's policy profile; undefined when it cannot be found, which refuses everything. */
  readonly policy: PolicyRow | undefined;
  readonly protocol: 'simple' | 'extended';
}

const KIND = /^\s*(?:(?:--[^\n]*\n|\/\*[\s\S]*?\*\/)\s*)*([A-Za-z]+)/;

/** The statement's kind from its first keyword (`select`, `update`, ...); '' when there is none. */
export function statementKind(sql: string): string {
  return KIND.exec(sql)?.[1]?.toLowerCase().slice(0, 32) ?? '';
}

/** Analyses depend on the text and search_path only; decisions are made per policy each time. */
const analyses = new AnalysisCache();

function rulesOf(policy: PolicyRow): PolicyRules {
  return { read_only: policy.read_only, allowed_tables: policy.allowed_tables, masked_columns: policy.masked_columns, allow_catalog: policy.allow_catalog, canaries: [] };
}

const unique = (lists: readonly (readonly string[])[]): string[] => [...new Set(lists.flat())];

/**
 * The policy hook every statement passes through, on the wire and (later) on MCP. A message with
 * several statements runs only if every one of them is allowed; then the first refusal decides.
 */
export function decideStatement(sql: string, context: StatementContext): StatementDecision {
  const policy = context.policy;
  if (!policy || policy.status !== 'active') {
    return {
      action: 'refuse', event: 'blocked', statementKind: statementKind(sql), rule: 'policy.missing', sqlstate: '42501', tablesRead: [], tablesWritten: [], tablesBlocked: [], progress: [],
      reason: 'this credential’s policy profile cannot be found, so the gateway refuses every statement (rule policy.missing); ask its owner to attach a policy',
    };
  }
  const verdicts = decideSql(sql, rulesOf(policy), {}, analyses);
  const decisions = verdicts.map((v) => v.decision);
  const read = unique(decisions.map((d) => d.tablesRead));
  const written = unique(decisions.map((d) => d.tablesWritten));
  const kind = decisions[0]?.statementKind ?? statementKind(sql);
  const refused = decisions.find((d) => d.action === 'refuse');
  if (refused?.action === 'refuse') return { ...refused, tablesRead: read, tablesWritten: written };
  const allowed = decisions.filter((d) => d.action === 'allow');
  const masked = allowed.some((d) => d.event === 'masked');
  return {
    action: 'allow',
    event: masked ? 'masked' : 'query',
    statementKind: kind,
    rule: masked ? 'masked_columns.masked' : '',
    reason: masked ? allowed.filter((d) => d.event === 'masked').map((d) => d.reason).join(' ') : '',
    // Unmasked text runs exactly as sent; a masked message runs as its rewritten statements.
    sql: masked ? allowed.map((d) => d.sql).join(';\n') : sql,
    tablesRead: read,
    tablesWritten: written,
    progress: unique(decisions.map((d) => d.progress)) as AuditEventKind[],
  };
}
