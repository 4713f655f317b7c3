import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import type { AnalysisSession } from './analyze.js';
import { AnalysisCache } from './cache.js';
import { DRIVER_METADATA } from './catalog.js';
import type { HashKey } from './hash-key.js';
import { AllowedDecisions } from './decision-cache.js';
import type { PolicyDecision, Progress } from './decide.js';
import { MAX_SQL_BYTES, parseStatements, type ParsedStatement } from './parser.js';
import { stableTree } from '../cache/cacheable.js';
import { decideSql, type StatementVerdict } from './policy.js';
import { resultRows, uncappable, type Uncappable } from './result-rows.js';
import { deparsedNumberTexts, distinctNumbers, numericShape, rewrittenNumbers, withNumbers, type NumericShape } from './shape.js';
import type { Canary, PolicyRules } from './rules.js';
import { filtersUseSessionValues, ROW_FILTERED, type SessionValues } from './row-filters.js';
import type { UpstreamCatalog } from './upstream-catalog.js';
import { statementKinds } from './kinds.js';
import { POLICY_STATEMENT_KINDS } from '../../src/events/policies.js';
import { writeRefusal, writeShape, type WriteShape } from './write-guard.js';
import { readReach, writeReach } from './reach.js';

/** What the policy engine says about one client message's SQL (one or several statements): a statement's decision, less its mask edits. */
export type StatementDecision =
  | (Omit<Extract<PolicyDecision, { action: 'allow' }>, 'masks'> & {
      /** Statements in the message. */
      readonly statementCount: number;
      /** What a row cap (max_rows) cannot limit in this message; see `rowsOf`. */
      readonly uncapped: UncappedRows;
      /** The masked columns its statements reference, as `schema.table.column:mode`, in the order the masks were applied. */
      readonly maskedColumns: readonly string[];
      /** What it writes, as the gateway can count it (max_affected_rows, write_mode). */
      readonly writes: WriteShape;
      /** Every kind its statements run (kinds.ts), for the approval rules. */
      readonly kinds: readonly string[];
      /** Every statement in it is a SELECT with no effect beyond reading (no lock, write, setting, ...): a standby can run it. */
      readonly readsOnly: boolean;
      /** Every call in the text it runs is of a function whose result a snapshot fixes, and it reads no session value (cacheable.ts's stableTree): the result cache may keep its result. */
      readonly stableCalls: boolean;
      /** The tables whose rows it may change on the catalog snapshot (reach.ts): what it writes, their partition trees, the foreign keys that cascade from them; `unbounded` when a trigger, rule or view makes that unknowable. */
      readonly writesReach: readonly string[] | 'unbounded';
      /** The relations its result depends on (reach.ts): what it reads, and what the views among them read; a cached result is dropped by a write that reaches any. `unbounded` (never cached) when a view among them calls code or row security applies. */
      readonly readsReach: readonly string[] | 'unbounded';
    })
  | Extract<PolicyDecision, { action: 'refuse' }>;

/** The honeytokens statements are checked against, and who hears when one trips (with `C`, what the caller knows of the credential: none for a what-if). */
export interface Honeytokens<C = CredentialRow> {
  /** The canaries a policy plants: its honeytoken ids resolved; ids of removed honeytokens resolve to nothing. */
  canariesOf(policy: PolicyRow): readonly Canary[];
  /** A statement of `credential` touched honeytoken `honeytokenId` and was refused. */
  tripped(credential: C, honeytokenId: string): void;
}

export interface StatementContext<C = CredentialRow> {
  /** Who sends the statement; the decision itself never reads it, it only hands it to `honeytokens.tripped`. */
  readonly credential: C;
  /** The credential's policy profile; undefined when it cannot be found, which refuses everything. */
  readonly policy: PolicyRow | undefined;
  readonly protocol: 'simple' | 'extended';
  readonly honeytokens: Honeytokens<C>;
  /** The upstream database's catalog as the proxy last read it; undefined when not (yet) known. */
  readonly catalog?: UpstreamCatalog;
  /** The project's key for `hash` masks (hash-key.ts); undefined when not (yet) at hand, which refuses what a hash mask applies to. */
  readonly hashKey?: HashKey;
  /** The session values row filters may name (`pgward.credential_id()`); absent ones refuse a statement a filter naming them applies to. */
  readonly sessionValues?: SessionValues;
  /** The session runs on a sandbox branch (write_mode sandbox): its writes go there, so they are not refused for want of one. */
  readonly sandboxed?: boolean;
}

const KIND = /^\s*(?:(?:--[^\n]*\n|\/\*[\s\S]*?\*\/)\s*)*([A-Za-z]+)/;

/** The statement's kind from its first keyword (`select`, `update`, ...); '' when there is none. */
export function statementKind(sql: string): string {
  return KIND.exec(sql)?.[1]?.toLowerCase().slice(0, 32) ?? '';
}

/** The session values of a credential's statements. */
export function sessionValuesOf(credential: Pick<CredentialRow, 'credential_id' | 'project_id'>): SessionValues {
  return { credential_id: credential.credential_id, project_id: credential.project_id };
}

/** Analyses depend on the text and search_path only; decisions are made per policy each time. */
const analyses = new AnalysisCache();
type Allowed = Extract<StatementDecision, { action: 'allow' }>;
/** What a policy allowed, so that a statement an agent repeats costs one lookup. */
const allowedDecisions = new AllowedDecisions<Allowed>();

/** An allowed decision serving a numeric shape; `rewritten` holds the positions of its rewritten text's numbers when it does not run as sent. */
interface ShapeTemplate {
  readonly decision: Allowed;
  readonly rewritten?: NumericShape;
}

/** What a policy allowed by numeric shape (shape.ts), so that a statement repeated with other numbers in it costs a scan and a lookup. */
const allowedShapes = new AllowedDecisions<ShapeTemplate>();
const SHAPED_KINDS: ReadonlySet<string> = new Set(['select', 'with', 'values', 'table', 'insert', 'update', 'delete']);

function rulesOf(policy: PolicyRow, canaries: readonly Canary[], hashKey: HashKey | undefined, sessionValues: SessionValues | undefined): PolicyRules {
  return {
    ...(hashKey ? { hash_key: hashKey } : {}),
    ...(sessionValues ? { session_values: sessionValues } : {}),
    read_only: policy.read_only,
    allowed_tables: policy.allowed_tables,
    masked_columns: policy.masked_columns,
    allow_catalog: policy.allow_catalog,
    canaries,
    statement_allow: policy.statement_allow,
    statement_deny: policy.statement_deny,
    denied_tables: policy.denied_tables,
    migration_safety: policy.migration_safety,
    row_filters: policy.row_filters,
  };
}

/** Whether the policy masks any column: then server errors reach the agent without their DETAIL, which can print a row. */
export function masksColumns(policy: Pick<PolicyRow, 'masked_columns'> | null | undefined): boolean {
  return policy ? Object.keys(policy.masked_columns).length > 0 : false;
}

/** What a row cap cannot bound in a message: see result-rows.ts. */
export type UncappedRows = Uncappable | null;

/** What of a message's results a row cap (max_rows) cannot bound (null when the cap holds for all of them), and what it writes. */
function rowsOf(sql: string, session: AnalysisSession): { uncapped: UncappedRows; writes: WriteShape; readsOnly: boolean; stableCalls: boolean; kinds: readonly string[] } {
  // The decision's own analysis, from the cache: the statements' trees and kinds do not depend on the session.
  const analyzed = analyses.analyze(sql, session);
  // An allowed text was analyzed; were it not to be, it is counted as a write no tag counts, of every kind (fail closed).
  if (!analyzed.ok) return { uncapped: null, writes: { rows: 'uncounted', ddl: true, what: 'this statement' }, readsOnly: false, stableCalls: false, kinds: POLICY_STATEMENT_KINDS };
  return {
    uncapped: uncappable(analyzed.statements.map((statement) => resultRows(statement.stmt, statement.kind))),
    writes: writeShape(analyzed.statements),
    readsOnly: analyzed.statements.every(
      (statement) => statement.kind === 'select' && !statement.ddl && statement.effects.length === 0 && statement.sessionChanges.length === 0 && statement.relations.every((use) => !use.written),
    ),
    stableCalls: analyzed.statements.every((statement) => stableTree(statement.stmt)),
    kinds: unique(analyzed.statements.map((statement) => statementKinds(statement.stmt))),
  };
}

/** What the policy refuses of an allowed message for what it returns or writes: max_rows, write_mode, max_affected_rows. */
function limitRefusal(decision: Extract<StatementDecision, { action: 'allow' }>, policy: PolicyRow, protocol: 'simple' | 'extended', sandboxed = false): StatementDecision | undefined {
  const capped = capRefusal(decision, policy, protocol);
  if (capped) return capped;
  const refused = writeRefusal(policy, decision.writes, sandboxed);
  if (!refused) return undefined;
  return { action: 'refuse', event: 'blocked', statementKind: decision.statementKind, ...refused, tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten, tablesBlocked: [], progress: [] };
}

/** Refuses what a policy's max_rows cannot bound, rather than let it return every row (fail closed). */
function capRefusal(decision: Extract<StatementDecision, { action: 'allow' }>, policy: PolicyRow, protocol: 'simple' | 'extended'): StatementDecision | undefined {
  const cap = policy.max_rows;
  const uncapped = decision.uncapped;
  if (!cap || cap <= 0 || !uncapped || (uncapped.on === 'extended' && protocol !== 'extended')) return undefined;
  // The proxy does not cap drivers' own type lookups either.
  if (decision.tablesRead.length > 0 && decision.tablesRead.every((table) => DRIVER_METADATA.has(table))) return undefined;
  return {
    action: 'refuse',
    event: 'blocked',
    statementKind: decision.statementKind,
    rule: uncapped.rule,
    sqlstate: '0A000',
    reason: `this credential’s policy caps every result at ${cap} rows, and ${uncapped.because} (rule ${uncapped.rule}); ${uncapped.instead}`,
    tablesRead: decision.tablesRead,
    tablesWritten: decision.tablesWritten,
    tablesBlocked: [],
    progress: [],
  };
}

/** The statements of `text` when it parses into exactly the statements `parts` (each compared as the parser slices it); undefined otherwise. */
function splitInto(text: string, parts: readonly string[]): readonly ParsedStatement[] | undefined {
  const parsed = parseStatements(text);
  return parsed.ok && parsed.statements.length === parts.length && parsed.statements.every((statement, index) => statement.sql === parts[index]) ? parsed.statements : undefined;
}

const unique = (lists: readonly (readonly string[])[]): string[] => [...new Set(lists.flat())];

/** A message's progress rows: one for each distinct one of its statements'. */
function uniqueProgress(lists: readonly (readonly Progress[])[]): Progress[] {
  const byText = new Map(lists.flat().map((progress) => [`${progress.rule}\u0000${progress.reason}`, progress]));
  return [...byText.values()];
}

/**
 * The policy hook every statement passes through, on the wire and (later) on MCP. A message with
 * several statements runs only if every one of them is allowed; a tripped canary in any of them
 * decides (and is reported to `honeytokens`), else the first refusal does.
 */
export function decideStatement<C>(sql: string, context: StatementContext<C>): StatementDecision {
  const policy = context.policy;
  if (!policy || policy.status !== 'active') {
    return {
      action: 'refuse', event: 'blocked', statementKind: statementKind(sql), rule: 'policy.missing', sqlstate: '42501', tablesRead: [], tablesWritten: [], tablesBlocked: [], progress: [],
      reason: 'this credential’s policy profile cannot be found, so the gateway refuses every statement (rule policy.missing); ask its owner to attach a policy',
    };
  }
  const canaries = context.honeytokens.canariesOf(policy);
  const session = context.catalog ? { catalog: context.catalog } : {};
  const scope = sessionScope(policy, context.sessionValues);
  const key = withCatalog(context.catalog, scope + sql);
  const known = allowedDecisions.get(policy, canaries, key);
  if (known) return limitRefusal(known, policy, context.protocol, context.sandboxed) ?? known;
  const shape = shapeable(canaries, sql) ? numericShape(sql) : undefined;
  const template = shape && allowedShapes.get(policy, canaries, withCatalog(context.catalog, scope + shape.key));
  if (shape && template) return limitRefusal(template.decision, policy, context.protocol, context.sandboxed) ?? { ...template.decision, sql: shapedSql(template, sql, shape) };
  const rules = rulesOf(policy, canaries, context.hashKey, context.sessionValues);
  const decision = combine(sql, decideSql(sql, rules, session, analyses), session);
  if (decision.action === 'refuse') {
    if (decision.trip !== undefined) context.honeytokens.tripped(context.credential, decision.trip.honeytokenId);
    return decision;
  }
  allowedDecisions.set(policy, canaries, key, decision);
  const made = shape && reusableAcrossNumbers(decision) ? shapeTemplate(sql, shape, decision, (variant) => combine(variant, decideSql(variant, rules, session, analyses), session)) : undefined;
  if (shape && made) allowedShapes.set(policy, canaries, withCatalog(context.catalog, scope + shape.key), made);
  return limitRefusal(decision, policy, context.protocol, context.sandboxed) ?? decision;
}

/**
 * The part of a cache key that keeps one session's decisions to it: the session values, when the
 * policy's row filters name any (its rewrites hold them); '' otherwise.
 */
function sessionScope(policy: PolicyRow, values: SessionValues | undefined): string {
  return scopedPolicy(policy) ? `${JSON.stringify(values ?? {})}\u0000` : '';
}

/** Whether a policy's filters name session values, once per policy row and revision (as the decision caches hold them), not per statement. */
const scopedPolicies = new WeakMap<PolicyRow, { readonly revision: PolicyRow['revision']; readonly scoped: boolean }>();

function scopedPolicy(policy: PolicyRow): boolean {
  const known = scopedPolicies.get(policy);
  if (known?.revision === policy.revision) return known.scoped;
  const scoped = filtersUseSessionValues(policy.row_filters);
  scopedPolicies.set(policy, { revision: policy.revision, scoped });
  return scoped;
}

/** Allowed decisions depend on the catalog they were made with: their cache keys carry its version. */
function withCatalog(catalog: UpstreamCatalog | undefined, key: string): string {
  return catalog ? `${catalog.version}\u0000${key}` : key;
}

/**
 * One decision for a message from its statements' verdicts: the first refusal (carrying the trip
 * of a canary any statement touched, for the audit trail), else an allow of them all.
 */
function combine(sql: string, verdicts: readonly StatementVerdict[], session: AnalysisSession): StatementDecision {
  const decisions = verdicts.map((v) => v.decision);
  const read = unique(decisions.map((d) => d.tablesRead));
  const written = unique(decisions.map((d) => d.tablesWritten));
  const kind = decisions[0]?.statementKind ?? statementKind(sql);
  const refused = decisions.find((d) => d.action === 'refuse');
  if (refused?.action === 'refuse') {
    const trip = decisions.find((d) => d.action === 'refuse' && d.trip !== undefined);
    return { ...refused, tablesRead: read, tablesWritten: written, ...(trip?.action === 'refuse' && trip.trip ? { trip: trip.trip } : {}) };
  }
  const allowed = decisions.filter((d) => d.action === 'allow');
  const masked = allowed.some((d) => d.event === 'masked');
  const rewritten = verdicts.some((v) => v.decision.action === 'allow' && v.decision.sql !== v.sql);
  // A rewritten message runs as its statements' texts joined again. A text may end in a `--` comment,
  // which would swallow a `;` on its line and merge two statements into one (`SELECT f -- x` and
  // `((SELECT 'arg'))` would call f): the separator starts on a line of its own, and the joined text
  // must split back into exactly the texts that were decided.
  const text = rewritten ? allowed.map((d) => d.sql).join('\n;\n') : sql;
  const rewrites = rewritten ? splitInto(text, allowed.map((d) => d.sql)) : undefined;
  if (rewritten && !rewrites) {
    const rule = masked ? 'masked_columns.rewrite_failed' : 'statement.rewrite_failed';
    return {
      action: 'refuse', event: 'blocked', statementKind: kind, rule, sqlstate: '42501', tablesRead: read, tablesWritten: written, tablesBlocked: [], progress: [],
      reason: `the rewritten statements could not be joined back into a query string that runs exactly them (rule ${rule}); send each statement as its own query`,
    };
  }
  // A masked message's reasons say what was masked and filtered; an unmasked one names its row filters, if any.
  const noted = allowed.filter((d) => (masked ? d.event === 'masked' : d.rule === ROW_FILTERED));
  return {
    action: 'allow',
    event: masked ? 'masked' : 'query',
    statementKind: kind,
    rule: masked ? 'masked_columns.masked' : noted.length > 0 ? ROW_FILTERED : '',
    reason: noted.map((d) => d.reason).join(' '),
    // Text the policy did not rewrite runs exactly as sent; otherwise the message runs as its rewritten statements.
    sql: text,
    tablesRead: read,
    tablesWritten: written,
    writesReach: writeReach(written, session.catalog) ?? 'unbounded',
    readsReach: readReach(read, session.catalog) ?? 'unbounded',
    progress: uniqueProgress(decisions.map((d) => d.progress)),
    changesSession: allowed.some((d) => d.changesSession),
    statementCount: verdicts.length,
    ...rowsOf(sql, session),
    // The rewrite adds calls (masks, row filters): the text that runs is the one whose calls count.
    ...(rewrites ? { stableCalls: rewrites.every((statement) => stableTree(statement.stmt)) } : {}),
    maskedColumns: unique(allowed.map((d) => d.masks.map((mask) => `${mask.column}:${mask.mode}`))),
    rowFiltered: unique(allowed.map((d) => d.rowFiltered)),
  };
}

/**
 * Whether a text's numbers may be abstracted for the shape cache: never when a value honeytoken
 * is planted (its match is a literal's text), nor near the parser's size limit (a longer number
 * could cross it).
 */
function shapeable(canaries: readonly Canary[], sql: string): boolean {
  return sql.length <= MAX_SQL_BYTES - 1_024 && !canaries.some((canary) => canary.kind === 'value');
}

/**
 * Decisions that may serve every text of their shape: a single plain read or write, run as sent or
 * rewritten (masked, functions qualified), with no rule or reason that could quote its text. The
 * analyzer reads a number's value only through constantText (SET values, DefElem options,
 * set_config's and current_setting's names), none of which these carry an allow through;
 * shapeTemplate checks each shape once more against a variant of its text.
 */
function reusableAcrossNumbers(decision: Allowed): boolean {
  const plain = decision.event === 'query' ? decision.rule === '' && decision.reason === '' : decision.rule === 'masked_columns.masked';
  return plain && decision.statementCount === 1 && decision.progress.length === 0 && SHAPED_KINDS.has(decision.statementKind);
}

/**
 * The template for a shape, when a variant of the text with other, pairwise different numbers is
 * decided the same way and, if the text is rewritten, rewritten to this rewrite with the variant's
 * numbers in the same places.
 */
function shapeTemplate(sql: string, shape: NumericShape, decision: Allowed, decide: (variant: string) => StatementDecision): ShapeTemplate | undefined {
  const rewritten = decision.sql === sql ? undefined : rewrittenNumbers(sql, shape, decision.sql);
  if (decision.sql !== sql && !rewritten) return undefined;
  const numbers = distinctNumbers(sql, shape);
  const variantSql = withNumbers(sql, shape, numbers);
  const variant = decide(variantSql);
  if (variant.action !== 'allow' || JSON.stringify({ ...variant, sql: '' }) !== JSON.stringify({ ...decision, sql: '' })) return undefined;
  const expected = rewritten ? withNumbers(decision.sql, rewritten, numbers) : variantSql;
  if (variant.sql !== expected) return undefined;
  return rewritten ? { decision, rewritten } : { decision };
}

/** The text a shape's template runs for `sql`: `sql` itself, or the template's rewrite with `sql`'s numbers. */
function shapedSql(template: ShapeTemplate, sql: string, shape: NumericShape): string {
  return template.rewritten ? withNumbers(template.decision.sql, template.rewritten, deparsedNumberTexts(sql, shape)) : sql;
}
