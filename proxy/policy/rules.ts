import type { SessionValues } from './row-filters.js';
import type { HashKey } from './hash-key.js';
import type { HoneytokenKind } from '../../src/events/honeytokens.js';
import { DEFAULT_MIGRATION_SAFETY, type MaskMode, type MigrationSafety, type PolicyStatementKind } from '../../src/events/policies.js';
import type { Effect, StatementAnalysis, WholeRowForm } from './analysis.js';
import { canaryReach } from './canary-reach.js';
import { DRIVER_METADATA, isTempSchema, NEVER_READABLE } from './catalog.js';
import type { MaskEdit } from './mask.js';
import { isCatalog, qualified, type RelationName } from './names.js';
import { describeConstruct } from './constructs.js';
import { FUNCTION_ALTERNATIVES } from './functions.js';
import { statementKinds, upserts } from './kinds.js';
import { migrationFindings, type MigrationFinding } from './migration.js';
import { SETTABLE } from './settings.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

/** A planted honeytoken, resolved from the policy's honeytoken ids by the caller. */
export interface Canary {
  readonly honeytoken_id: string;
  readonly kind: HoneytokenKind;
  /** `schema.table`, `schema.table.column`, or a literal value. */
  readonly target: string;
}

/** The parts of a policy profile (projections/policies.ts PolicyRow) the statement rules read. */
export interface PolicyRules {
  readonly read_only: boolean;
  readonly allowed_tables: readonly string[];
  readonly masked_columns: Readonly<Record<string, MaskMode>>;
  readonly allow_catalog: boolean;
  readonly canaries: readonly Canary[];
  /** Tables (`schema.table`) treated as off the allowlist whatever it says: a tripped canary's disguise. */
  readonly denied?: readonly string[];
  /** Only statements whose every kind is listed run; absent or null: every kind. */
  readonly statement_allow?: readonly PolicyStatementKind[] | null;
  /** Statements running any of these kinds are refused. */
  readonly statement_deny?: readonly PolicyStatementKind[];
  /** `schema.table` or `schema.*`: refused wherever named, whatever allowed_tables says. */
  readonly denied_tables?: readonly string[];
  /** Absent: DEFAULT_MIGRATION_SAFETY. */
  readonly migration_safety?: MigrationSafety;
  /** `schema.table` → a vetted predicate ANDed into every read of the table and every UPDATE or DELETE of it (row-filters.ts); absent: none. */
  readonly row_filters?: Readonly<Record<string, string>>;
  /** The values of the session decided for that row filters may name (`pgward.credential_id()`); absent: a filter naming one refuses. */
  readonly session_values?: SessionValues;
  /** The project's key for `hash` masks (hash-key.ts); absent: a statement a hash mask applies to is refused. */
  readonly hash_key?: HashKey;
}

export interface Refusal {
  readonly rule: string;
  readonly reason: string;
  readonly sqlstate: string;
  readonly blocked?: readonly string[];
}

/**
 * A honeytoken the statement touched: what the audit trail records. The agent is answered as for
 * a table it may not read (see `disguise`), so that no agent-facing channel tells a trap apart.
 */
export interface Trip {
  readonly honeytokenId: string;
  /** `honeytoken.table`, `honeytoken.column` or `honeytoken.value`. */
  readonly rule: string;
  /** The operator's explanation, for the audit trail only. */
  readonly reason: string;
  /** The tables the disguise treats as not allowed. */
  readonly denied: readonly string[];
}

export const INSUFFICIENT_PRIVILEGE = '42501';
const FEATURE_NOT_SUPPORTED = '0A000';

const refuse = (rule: string, reason: string, extra: Partial<Refusal> = {}): Refusal => ({ rule, reason, sqlstate: INSUFFICIENT_PRIVILEGE, ...extra });

/** The first canary the statement touches, by name or, on the catalog snapshot, under another name (canary-reach.ts), or null. */
export function canaryCheck(analysis: StatementAnalysis, policy: PolicyRules, catalog?: UpstreamCatalog): Trip | null {
  for (const canary of policy.canaries) {
    const reached = canaryReach(analysis, canary, catalog);
    const denied = canaryHit(analysis, canary) ?? (reached === null ? null : [reached]);
    if (denied === null) continue;
    const rule = `honeytoken.${canary.kind}`;
    return { honeytokenId: canary.honeytoken_id, rule, reason: `the statement touched honeytoken ${canary.honeytoken_id} (${canary.kind} ${canary.target}) (rule ${rule}); the agent was answered as for a table it may not read.`, denied };
  }
  return null;
}

const readTables = (analysis: StatementAnalysis): string[] => [...new Set(analysis.relations.flatMap((use) => use.candidates.map(qualified)))];

/** The tables a touched canary's disguise denies (its table, or every table of the statement for a value), null when untouched. */
function canaryHit(analysis: StatementAnalysis, canary: Canary): readonly string[] | null {
  switch (canary.kind) {
    case 'table':
      return analysis.relations.some((use) => use.candidates.some((table) => qualified(table) === canary.target)) ? [canary.target] : null;
    case 'column': {
      const table = canary.target.slice(0, canary.target.lastIndexOf('.'));
      const touched =
        analysis.columns.some((use) => use.candidates.some((c) => `${qualified(c.table)}.${c.column}` === canary.target)) ||
        analysis.wholeRows.some((use) => use.tables.some((t) => qualified(t) === table));
      return touched ? [table] : null;
    }
    case 'value': {
      const needle = canary.target.toLowerCase();
      return analysis.literals.some((literal) => literal.toLowerCase().includes(needle)) ? readTables(analysis) : null;
    }
  }
}

const GUIDANCE: Readonly<Record<Effect['family'], string>> = {
  write: 'Only statements that read allowed tables run: SELECT, WITH without data-modifying parts, EXPLAIN without ANALYZE, SHOW.',
  ddl: 'Schema changes are not allowed; only statements that read allowed tables run.',
  lock: 'Drop the locking clause; plain reads need no locks.',
  transaction: 'BEGIN, COMMIT, ROLLBACK and savepoints are fine; transactions stay read-only.',
  setting: `Settings you may change: ${[...SETTABLE].join(', ')}.`,
  procedure: 'It runs server-side code the gateway cannot inspect; send the statements themselves.',
  notify: 'LISTEN and NOTIFY are not available through the gateway.',
  prepare: "Use your driver's prepared statements (the extended query protocol), which are checked statement by statement.",
  copy: 'Server files and programs are never reachable; use COPY ... TO STDOUT or FROM STDIN.',
};

/** Read-only refuses every effect; a write-capable policy refuses only the effects refused everywhere. */
export function effectCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  const effect = analysis.effects.find((candidate) => policy.read_only || candidate.always);
  if (!effect) return null;
  const rule = `${policy.read_only ? 'read_only' : 'statement'}.${effect.family}`;
  const why = policy.read_only ? "this credential's policy is read-only" : 'the gateway never runs it';
  return refuse(rule, `${effect.detail} is not allowed: ${why} (rule ${rule}). ${GUIDANCE[effect.family]}`);
}

export function unsupportedCheck(analysis: StatementAnalysis): Refusal | null {
  const what = analysis.unsupported[0];
  if (what === undefined) return null;
  const construct = describeConstruct(what);
  const instead =
    construct.instead ??
    (analysis.ddl
      ? 'Schema changes run as CREATE TABLE, ALTER TABLE (add, drop or alter a column, constraints), DROP TABLE, CREATE INDEX and RENAME of tables and columns.'
      : 'Rewrite the statement without it.');
  return {
    rule: 'parse.unsupported',
    reason: `the statement uses ${construct.sql}, which the policy analyzer does not understand, so it is refused (rule parse.unsupported). ${instead}`,
    sqlstate: FEATURE_NOT_SUPPORTED,
  };
}

export function functionCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  const fn = analysis.functions.find((use) => !use.vetted && !(policy.allow_catalog && use.describesCatalog === true));
  if (!fn) return null;
  const rule = policy.read_only ? 'read_only.function' : 'function.not_allowed';
  const subject = fn.kind === 'operator' ? `operator ${fn.name}` : fn.name.startsWith('operator ') ? fn.name : `function ${fn.name}`;
  const alternative = FUNCTION_ALTERNATIVES[fn.name.slice(fn.name.lastIndexOf('.') + 1)];
  const instead =
    fn.instead ??
    (fn.kind === 'operator'
      ? 'Use built-in operators (pg_catalog), unqualified or as OPERATOR(pg_catalog.op).'
      : alternative !== undefined
        ? `Use ${alternative} instead.`
        : 'Only side-effect-free built-in functions run: arithmetic, string, date/time, JSON, array, text search, aggregate and window functions.');
  return refuse(rule, `${subject} ${fn.why ?? 'is not on the vetted function list'} (rule ${rule}). ${instead}`);
}

/** Whether a table list (allowed_tables, denied_tables) names the table, or its schema with `*`; part by part, case-sensitively. */
export function listNames(entries: readonly string[], table: RelationName): boolean {
  return entries.some((entry) => {
    const dot = entry.indexOf('.');
    return entry.slice(0, dot) === table.schema && (entry.slice(dot + 1) === '*' || entry.slice(dot + 1) === table.name);
  });
}

/** Whether the policy lets statements name the table: on allowed_tables, and neither on denied_tables nor denied by a tripped canary. */
export function allowedByList(policy: Pick<PolicyRules, 'allowed_tables' | 'denied' | 'denied_tables'>, table: RelationName): boolean {
  if (policy.denied?.includes(qualified(table))) return false;
  if (policy.denied_tables && listNames(policy.denied_tables, table)) return false;
  return listNames(policy.allowed_tables, table);
}

/**
 * The allowlist as refusals quote it: without the tables planted as canaries, which an agent is
 * never told of, nor the tables a tripped canary's disguise denies (the refusal must not contradict itself).
 */
function allowedList(policy: PolicyRules): string {
  const planted = new Set([...policy.canaries.filter((canary) => canary.kind === 'table').map((canary) => canary.target), ...(policy.denied ?? [])]);
  const listed = policy.allowed_tables.filter((entry) => !planted.has(entry));
  const shown = listed.slice(0, 10).join(', ');
  if (listed.length === 0) return 'none';
  return listed.length > 10 ? `${shown}, ...` : shown;
}

/** Every relation a statement names, at every depth, must not be on denied_tables: it wins over allowed_tables. */
export function deniedTableCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  const denied = policy.denied_tables;
  if (!denied || denied.length === 0) return null;
  for (const use of analysis.relations) {
    const table = use.candidates.find((candidate) => listNames(denied, candidate));
    if (!table) continue;
    const name = qualified(table);
    const where = use.candidates.length > 1 ? ` (${use.text} may resolve to ${use.candidates.map(qualified).join(' or ')} on the search_path)` : '';
    const as = use.via === undefined ? '' : ` (named as ${use.via})`;
    return refuse('table.denied', `table ${name}${as} is on this credential's denied tables, whatever its allowed tables say (rule table.denied)${where}. Query other tables.`, { blocked: [name] });
  }
  return null;
}

const kindList = (kinds: readonly string[]): string => (kinds.length === 0 ? 'none' : kinds.join(', '));

/**
 * statement_deny refuses a statement running a denied kind anywhere in it; statement_allow, when
 * set, refuses one running any kind it does not list. Neither lifts another rule.
 */
export function statementKindCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  const deny = policy.statement_deny ?? [];
  const allow = policy.statement_allow ?? null;
  if (deny.length === 0 && allow === null) return null;
  const kinds = statementKinds(analysis.stmt);
  const runs = (kind: string): string =>
    kind === analysis.kind
      ? `is of kind ${kind}`
      : kind === 'update' && upserts(analysis.stmt)
        ? `(of kind ${analysis.kind}) runs an update as an INSERT ... ON CONFLICT DO UPDATE`
        : `(of kind ${analysis.kind}) runs a statement of kind ${kind}, in a data-modifying WITH query or as its operand`;
  const denied = kinds.find((kind) => deny.includes(kind));
  if (denied !== undefined) {
    return refuse('statement_kind.denied', `the statement ${runs(denied)}, and this credential's policy denies ${denied} statements (rule statement_kind.denied). Denied kinds: ${kindList(deny)}.`);
  }
  const outside = allow === null ? undefined : kinds.find((kind) => !allow.includes(kind));
  if (outside !== undefined) {
    return refuse('statement_kind.not_allowed', `the statement ${runs(outside)}, and this credential's policy allows no ${outside} statements (rule statement_kind.not_allowed). Allowed kinds: ${kindList(allow ?? [])}.`);
  }
  return null;
}

/** What a lock-heavy statement is told, or has flagged: what it does, what that locks, and what to run instead. */
export function migrationReason(findings: readonly MigrationFinding[], outcome: 'refused' | 'flagged'): string {
  const why = outcome === 'refused' ? "this credential's policy refuses lock-heavy schema changes, migration_safety block" : 'it ran under migration_safety warn';
  return findings
    .map((finding, index) => (index === 0 ? `${finding.what} ${finding.risk} (rule ${finding.rule}; ${why}). Instead, ${finding.instead}.` : `Also, ${finding.what} ${finding.risk}. Instead, ${finding.instead}.`))
    .join(' ');
}

/** Under migration_safety block, a lock-heavy schema change is refused with the safe alternative. */
export function migrationCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  if (policy.read_only || (policy.migration_safety ?? DEFAULT_MIGRATION_SAFETY) !== 'block') return null;
  const findings = migrationFindings(analysis.stmt);
  const first = findings[0];
  return first ? refuse(first.rule, migrationReason(findings, 'refused')) : null;
}

export function tableCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | null {
  for (const use of analysis.relations) {
    if (use.candidates.length === 0) {
      return refuse('allowed_tables.not_allowed', `table ${use.text} is on no schema of the search_path (rule allowed_tables.not_allowed); schema-qualify it.`, { blocked: [use.text] });
    }
    for (const table of use.candidates) {
      const name = qualified(table);
      if (isTempSchema(table.schema)) {
        return refuse('allowed_tables.temp', `temporary table ${use.text} is not allowed (rule allowed_tables.temp): temporary tables could shadow allowed ones.`, { blocked: [name] });
      }
      if (isCatalog(table)) {
        const never = NEVER_READABLE.has(name) || table.schema === 'pg_toast';
        if ((policy.allow_catalog || DRIVER_METADATA.has(name)) && !use.written && !never) continue;
        const why = never ? 'it is never readable through the gateway' : use.written ? 'catalogs are never written' : 'this credential may not read system catalogs';
        const via = use.via === undefined ? '' : ` read by ${use.via} (it looks names up in the catalog)`;
        return refuse('allowed_tables.catalog', `${name} is a system catalog${via} and ${why} (rule allowed_tables.catalog).${use.via === undefined ? '' : ' Compare names as text, or ask for a policy with allow_catalog.'}`, { blocked: [name] });
      }
      if (!allowedByList(policy, table)) {
        const where = use.candidates.length > 1 ? ` (${use.text} may resolve to ${use.candidates.map(qualified).join(' or ')} on the search_path; schema-qualify it)` : '';
        const as = use.via === undefined ? '' : ` (named as ${use.via}: only built-in types and allowed tables' row types may be used)`;
        return refuse('allowed_tables.not_allowed', `table ${name}${as} is not in the allowed tables (${allowedList(policy)}); query only those (rule allowed_tables.not_allowed)${where}.`, { blocked: [name] });
      }
    }
  }
  return null;
}

const WHOLE_ROW_FIX: Readonly<Record<WholeRowForm, string>> = {
  star: 'list the columns you need instead of *',
  row: 'select individual columns instead of the whole row (to_jsonb(t), row_to_json(t), t::text)',
  function_notation: 'write the column without the table qualifier, or pick another column: t.name can also mean name(t), the whole row',
  natural: 'join with ON instead of NATURAL JOIN',
  column_alias: 'alias columns in the select list instead of in FROM',
  copy: 'use COPY (SELECT the columns you need) TO STDOUT',
  rename: 'tables with masked columns cannot be renamed',
};

/** The masked columns of a table, `schema.table.column`. */
export function maskedColumnsOf(policy: PolicyRules, table: RelationName): string[] {
  const prefix = `${qualified(table)}.`;
  return Object.keys(policy.masked_columns).filter((key) => key.startsWith(prefix) && !key.slice(prefix.length).includes('.'));
}

/** Whole-row uses, unmaskable and ambiguous references refuse; every other masked reference becomes an edit. */
export function maskCheck(analysis: StatementAnalysis, policy: PolicyRules): Refusal | MaskEdit[] {
  for (const use of analysis.wholeRows) {
    const masked = use.tables.flatMap((table) => maskedColumnsOf(policy, table));
    if (masked.length > 0) {
      return refuse('masked_columns.whole_row', `${use.text} would expose masked column ${masked[0]} (rule masked_columns.whole_row); ${WHOLE_ROW_FIX[use.form]}.`);
    }
  }
  const edits: MaskEdit[] = [];
  for (const use of analysis.columns) {
    if (use.written) continue;
    const hits = use.candidates.flatMap((candidate) => {
      const column = `${qualified(candidate.table)}.${candidate.column}`;
      const mode = policy.masked_columns[column];
      return mode ? [{ column, mode }] : [];
    });
    const first = hits[0];
    if (!first) continue;
    if (!use.rewritable) {
      return refuse('masked_columns.unmaskable', `${use.text} uses masked column ${first.column} where no mask can be applied (rule masked_columns.unmaskable); compare or copy it in a select list or WHERE clause instead.`);
    }
    if (hits.some((hit) => hit.mode !== first.mode)) {
      return refuse('masked_columns.ambiguous', `${use.text} may denote masked columns ${hits.map((hit) => hit.column).join(', ')} with different masks (rule masked_columns.ambiguous); qualify it with its table.`);
    }
    const stand = first.mode === 'hash' ? use.shadowed?.find((candidate) => policy.masked_columns[`${qualified(candidate.table)}.${candidate.column}`] === 'hash') : undefined;
    if (stand) {
      return refuse(
        'masked_columns.ambiguous',
        `${use.text} may denote ${qualified(stand.table)}.${stand.column}, masked with hash, or a column of another FROM item as near to it, whose values the hash would then be computed on (rule masked_columns.ambiguous); qualify it with an alias no other FROM item of the statement uses.`,
      );
    }
    edits.push({ column: first.column, mode: first.mode, path: use.path, text: use.text });
  }
  return edits;
}
