import type { AuditEventKind } from '../../src/events/audit.js';
import type { StatementAnalysis } from './analysis.js';
import type { AnalysisSession } from './analyze.js';
import { DEFAULT_MIGRATION_SAFETY, type MaskMode } from '../../src/events/policies.js';
import { catalogRowFilters } from './catalog-rows.js';
import { expandForMasks } from './expansion.js';
import { SIZING_KEY } from './hash-key.js';
import { applyMasks, maskExpression, type MaskEdit } from './mask.js';
import { knownRelationCheck } from './known-relations.js';
import { catalogMasks, rowColumnMasks, viewCheck } from './mask-reach.js';
import { qualified } from './names.js';
import { MAX_SQL_BYTES, MAX_TREE_NODES, measureTree, tooComplex, type ParseFailure } from './parser.js';
import { migrationFindings } from './migration.js';
import { ROW_FILTERED, rowFilterEdits } from './row-filters.js';
import {
  canaryCheck, deniedTableCheck, effectCheck, functionCheck, INSUFFICIENT_PRIVILEGE, maskCheck, migrationCheck, migrationReason, statementKindCheck, tableCheck,
  unsupportedCheck, type PolicyRules, type Refusal, type Trip,
} from './rules.js';

/** A progress row to record before the decision itself: a schema change, or a lock-heavy statement run under migration_safety warn. */
export interface Progress {
  readonly event: Extract<AuditEventKind, 'migration_flagged'>;
  readonly rule: string;
  readonly reason: string;
}

/** The row every schema change under a write-capable policy gets, when migration_safety has nothing more to say of it. */
export const SCHEMA_CHANGE: Progress = { event: 'migration_flagged', rule: 'migration_flagged', reason: 'schema change by an agent' };

interface DecisionFacts {
  readonly statementKind: string;
  readonly tablesRead: readonly string[];
  readonly tablesWritten: readonly string[];
  /** Progress rows to record before the decision itself, when it allows the statement. */
  readonly progress: readonly Progress[];
}

export type PolicyDecision =
  | (DecisionFacts & {
      readonly action: 'allow';
      readonly event: 'query' | 'masked';
      readonly rule: string;
      readonly reason: string;
      readonly masks: readonly MaskEdit[];
      /** The text to run upstream: the statement itself, or its masked rewrite. */
      readonly sql: string;
      /** It changes the upstream session beyond its transaction (StatementAnalysis.sessionChanges). */
      readonly changesSession: boolean;
      /** The tables whose rows the policy's row filters limit in it. */
      readonly rowFiltered: readonly string[];
    })
  | (DecisionFacts & {
      readonly action: 'refuse';
      /** What the agent is told; a tripped canary is told `blocked` too, and the truth is in `trip`. */
      readonly event: 'blocked';
      readonly rule: string;
      readonly reason: string;
      readonly sqlstate: string;
      readonly tablesBlocked: readonly string[];
      /** Set when the refusal is a tripped canary: what the audit trail records instead of the disguise above. */
      readonly trip?: Trip;
    });

function tables(analysis: StatementAnalysis, written: boolean): string[] {
  const names = new Set<string>();
  for (const use of analysis.relations) if (use.written === written) for (const table of use.candidates) names.add(qualified(table));
  return [...names];
}

/** Applies one policy to one analyzed statement: the first rule that refuses decides, in the order of the checks below. */
export function decidePolicy(analysis: StatementAnalysis, rules: PolicyRules, session: AnalysisSession = {}): PolicyDecision {
  const masked = rowColumnMasks(catalogMasks(rules.masked_columns, session.catalog), analysis, session.catalog);
  const policy = masked === rules.masked_columns ? rules : { ...rules, masked_columns: masked };
  const facts = {
    statementKind: analysis.kind,
    tablesRead: tables(analysis, false),
    tablesWritten: tables(analysis, true),
    progress: progressOf(analysis, policy),
    changesSession: analysis.sessionChanges.length > 0,
  };
  const trip = canaryCheck(analysis, policy, session.catalog);
  if (trip) return refused(facts, disguise(analysis, { ...policy, denied: trip.denied }, trip));
  const refusal = checks(analysis, policy) ?? knownRelationCheck(analysis, policy, session.catalog) ?? viewCheck(analysis, policy, session.catalog);
  if (refusal) return refused(facts, refusal);
  // Masks are computed on the statement with its stars and positional constructs over masked tables written out.
  const expanded = expandForMasks(analysis, policy, session);
  if (!('stmt' in expanded)) return refused(facts, expanded);
  const edits = maskCheck(expanded, policy);
  if (!Array.isArray(edits)) return refused(facts, edits);
  const catalogFilters = catalogRowFilters(expanded, policy);
  if (!Array.isArray(catalogFilters)) return refused(facts, catalogFilters);
  const rowFiltering = rowFilterEdits(expanded, policy, session.catalog);
  if (!('edits' in rowFiltering)) return refused(facts, rowFiltering);
  const filters = [...catalogFilters, ...rowFiltering.edits];
  if (edits.length === 0 && expanded.edits.length === 0 && filters.length === 0) return allowed(facts, 'query', '', '', [], expanded.sql);
  const oversized = oversizedRewrite(expanded, edits);
  if (oversized) return refused(facts, parseRefusal(oversized));
  const hashed = hashRefusal(expanded, edits, policy);
  if (hashed) return refused(facts, hashed);
  const outcome = applyMasks(filters.length === 0 ? expanded : { ...expanded, edits: [...expanded.edits, ...filters] }, edits, policy.masked_columns, session, policy.hash_key);
  if (!outcome.ok && edits.length === 0) {
    return refused(facts, {
      rule: 'statement.rewrite_failed',
      reason: `the statement could not be rewritten to run safely: ${outcome.why} (rule statement.rewrite_failed). Simplify it, or write the names it uses schema-qualified.`,
      sqlstate: INSUFFICIENT_PRIVILEGE,
    });
  }
  if (!outcome.ok) {
    return refused(facts, {
      rule: 'masked_columns.rewrite_failed',
      reason: `masked columns could not be rewritten safely: ${outcome.why} (rule masked_columns.rewrite_failed). Simplify the expressions around ${edits[0]?.text ?? 'the masked columns'}.`,
      sqlstate: INSUFFICIENT_PRIVILEGE,
    });
  }
  const filtered = rowFiltering.tables.length === 0 ? '' : `rows of ${rowFiltering.tables.join(', ')} limited by the policy's row filters (rule row_filters.filtered).`;
  if (edits.length === 0) return allowed(facts, 'query', filtered === '' ? '' : ROW_FILTERED, filtered, [], outcome.sql, rowFiltering.tables);
  const columns = [...new Set(edits.map((edit) => `${edit.column} (${edit.mode})`))];
  const reason = `masked ${columns.join(', ')}: every reference reads the masked value (rule masked_columns.masked).${filtered === '' ? '' : ` The ${filtered}`}`;
  return allowed(facts, 'masked', 'masked_columns.masked', reason, edits, outcome.sql, rowFiltering.tables);
}

/**
 * What a hash mask refuses: a statement it applies to when the project's key is not at hand (fail
 * closed), and EXPLAIN of one, whose plan would print the key's pads in the mask expression.
 */
function hashRefusal(analysis: StatementAnalysis, edits: readonly MaskEdit[], policy: PolicyRules): Refusal | undefined {
  const hashed = edits.find((edit) => edit.mode === 'hash');
  if (!hashed) return undefined;
  if (!policy.hash_key) {
    return { rule: 'masked_columns.hash_key_unavailable', sqlstate: '58000', reason: `${hashed.column} is masked with hash, and the gateway does not have the project's hash key at hand yet (rule masked_columns.hash_key_unavailable); retry shortly` };
  }
  if (analysis.kind === 'explain') {
    return { rule: 'masked_columns.explain', sqlstate: INSUFFICIENT_PRIVILEGE, reason: `${hashed.column} is masked with hash, and EXPLAIN would show the mask's key (rule masked_columns.explain); run the statement itself.` };
  }
  return undefined;
}

/** Nodes a mask expression adds in place of a column reference. */
const maskGrowth = new Map<MaskMode, number>();
function growthOf(mode: MaskMode): number {
  let nodes = maskGrowth.get(mode);
  if (nodes === undefined) maskGrowth.set(mode, (nodes = measureTree(maskExpression(mode, {}, SIZING_KEY).node, Infinity, Infinity).nodes - 1));
  return nodes;
}

/**
 * The refusal of a masked rewrite that would pass the parse tree node limit: it is refused before
 * it is made, rather than after its deparse, re-parse and re-analysis, which cost more.
 */
function oversizedRewrite(analysis: StatementAnalysis, edits: readonly MaskEdit[]): ParseFailure | undefined {
  let growth = 0;
  for (const edit of edits) growth += growthOf(edit.mode);
  if (growth === 0 || measureTree(analysis.stmt, Infinity, MAX_TREE_NODES - growth).nodes + growth <= MAX_TREE_NODES) return undefined;
  return tooComplex(
    `would have more than ${MAX_TREE_NODES} parse tree nodes once its ${edits.length} references to masked columns are masked`,
    'Split it into several smaller statements, or reference the masked columns fewer times.',
  );
}

function checks(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  return (
    effectCheck(analysis, policy) ??
    statementKindCheck(analysis, policy) ??
    unsupportedCheck(analysis) ??
    functionCheck(analysis, policy) ??
    deniedTableCheck(analysis, policy) ??
    tableCheck(analysis, policy) ??
    migrationCheck(analysis, policy)
  );
}

/**
 * Under a write-capable policy: a lock-heavy statement under migration_safety warn is flagged with
 * what it locks and the safe alternative; any other schema change with SCHEMA_CHANGE.
 */
function progressOf(analysis: StatementAnalysis, policy: PolicyRules): readonly Progress[] {
  if (policy.read_only) return [];
  const findings = (policy.migration_safety ?? DEFAULT_MIGRATION_SAFETY) === 'warn' ? migrationFindings(analysis.stmt) : [];
  const first = findings[0];
  if (first) return [{ event: 'migration_flagged', rule: first.rule, reason: migrationReason(findings, 'flagged') }];
  return analysis.ddl ? [SCHEMA_CHANGE] : [];
}

/**
 * A tripped canary's refusal as the agent gets it: exactly the refusal it would get were the
 * canary's tables simply off the allowlist. A value canary in a statement that reads no table has
 * no such refusal to borrow; it gets the shape of one, naming no table.
 */
function disguise(analysis: StatementAnalysis, policy: PolicyRules, trip: Trip): Refusal & { trip: Trip } {
  const edits = checks(analysis, policy) ?? maskCheck(analysis, policy);
  if (!Array.isArray(edits)) return { ...edits, trip };
  const rule = 'allowed_tables.not_allowed';
  return { rule, reason: `the statement reads no table this credential may query (rule ${rule}).`, sqlstate: INSUFFICIENT_PRIVILEGE, trip };
}

/** Built field by field, as is `refused`: on Node 20, `{ ...facts, more }` costs microseconds a call. */
function allowed(facts: DecisionFacts & { readonly changesSession: boolean }, event: 'query' | 'masked', rule: string, reason: string, masks: readonly MaskEdit[], sql: string, rowFiltered: readonly string[] = []): PolicyDecision {
  const { statementKind, tablesRead, tablesWritten, progress, changesSession } = facts;
  return { statementKind, tablesRead, tablesWritten, progress, action: 'allow', event, rule, reason, masks, sql, changesSession, rowFiltered };
}

function refused(facts: DecisionFacts, refusal: Refusal & { readonly trip?: Trip }): PolicyDecision {
  const { statementKind, tablesRead, tablesWritten, progress } = facts;
  const { rule, reason, sqlstate } = refusal;
  const decision: PolicyDecision = { statementKind, tablesRead, tablesWritten, progress, action: 'refuse', event: 'blocked', rule, reason, sqlstate, tablesBlocked: refusal.blocked ?? [] };
  const trip = refusal.trip;
  return trip === undefined ? decision : { ...decision, trip };
}

/** The decision for text that did not parse or was too large to parse. */
export function decideParseFailure(failure: ParseFailure): PolicyDecision {
  return refused({ statementKind: '', tablesRead: [], tablesWritten: [], progress: [] }, parseRefusal(failure));
}

function parseRefusal(failure: ParseFailure): Refusal {
  if (failure.reason === 'too_large') {
    return {
      rule: 'parse.too_large',
      reason: `the statement is ${failure.bytes} bytes; the limit is ${MAX_SQL_BYTES} (rule parse.too_large). Send smaller statements.`,
      sqlstate: '54000',
    };
  }
  if (failure.reason === 'too_complex') {
    return {
      rule: 'parse.too_complex',
      reason: `the statement ${failure.what} (rule parse.too_complex). ${failure.instead ?? 'Split it into simpler statements: fewer nested subqueries, CASEs or parentheses, shorter chains of operators.'}`,
      sqlstate: '54001',
    };
  }
  const at = failure.position === null ? '' : ` at position ${failure.position}`;
  return {
    rule: 'parse.error',
    reason: `the statement does not parse: ${failure.message}${at} (rule parse.error). Only valid PostgreSQL 17 statements run.`,
    sqlstate: '42601',
  };
}
