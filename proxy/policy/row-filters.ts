import type { StatementAnalysis, TreeEdit } from './analysis.js';
import { analyzeStatement } from './analyze.js';
import { cloneTree, getAt, isObject, type Node } from './ast.js';
import { descendants } from './inheritance.js';
import { sameTree } from './mask.js';
import { qualified, type RelationName } from './names.js';
import { parseStatements } from './parser.js';
import { pushableConjuncts, scopeConjuncts } from './row-filter-pushdown.js';
import { functionCheck, INSUFFICIENT_PRIVILEGE, type PolicyRules, type Refusal } from './rules.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

/** The rule of an allowed statement whose rows a row filter limits (the audit record's decision_rule). */
export const ROW_FILTERED = 'row_filters.filtered';

/** The longest predicate a policy may hold. */
export const MAX_ROW_FILTER_CHARS = 4_000;

/**
 * Vetted functions a row filter still may not call: aggregates, window and set-returning functions
 * (PostgreSQL refuses them in WHERE), and volatile ones (a filter must give a row the same answer
 * wherever the statement reads it).
 */
const REFUSED_IN_FILTERS: ReadonlySet<string> = new Set(
  `count sum avg min max string_agg array_agg bool_and bool_or every bit_and bit_or bit_xor any_value stddev stddev_pop stddev_samp
  variance var_pop var_samp corr covar_pop covar_samp regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx
  regr_sxy regr_syy percentile_cont percentile_disc mode rank dense_rank percent_rank cume_dist json_agg jsonb_agg json_object_agg
  jsonb_object_agg json_agg_strict jsonb_agg_strict json_object_agg_strict jsonb_object_agg_strict json_object_agg_unique
  jsonb_object_agg_unique row_number ntile lag lead first_value last_value nth_value range_merge
  random random_normal clock_timestamp timeofday gen_random_uuid array_sample array_shuffle
  unnest generate_series generate_subscripts regexp_matches regexp_split_to_table string_to_table json_each jsonb_each json_each_text
  jsonb_each_text json_object_keys jsonb_object_keys json_array_elements jsonb_array_elements json_array_elements_text
  jsonb_array_elements_text jsonb_path_query json_to_recordset jsonb_to_recordset json_populate_recordset jsonb_populate_recordset`.split(/\s+/),
);

/**
 * The session values a predicate may name, each as a call of the reserved function
 * `pgward.<name>()`: the rewrite puts the value in its place as a string constant, so the call
 * never reaches the upstream database.
 */
export const SESSION_VALUES = ['credential_id', 'project_id'] as const;
export type SessionValueName = (typeof SESSION_VALUES)[number];
/** The values of the session a statement is decided for; a filter naming one that is absent refuses the statement. */
export type SessionValues = Readonly<Partial<Record<SessionValueName, string>>>;
const SESSION_SCHEMA = 'pgward';

/** A vetted predicate: its parse tree (column references unqualified), the columns it reads and the session values it names. */
interface ParsedFilter {
  readonly predicate: Node;
  readonly columns: readonly string[];
  readonly sessionValues: readonly SessionValueName[];
}

const isSessionValue = (name: string): name is SessionValueName => (SESSION_VALUES as readonly string[]).includes(name);

/** The call's name parts (`['pgward', 'credential_id']`). */
function callName(call: Node): string[] {
  const parts = Array.isArray(call.funcname) ? (call.funcname as Node[]) : [];
  return parts.map((part) => (isObject(part.String) ? String(part.String.sval) : ''));
}

/** The session value a `pgward.<name>()` call names, or why it names none; undefined when the call is not in the reserved schema. */
function sessionCall(call: Node): SessionValueName | { why: string } | undefined {
  const parts = callName(call);
  if (parts.length !== 2 || parts[0] !== SESSION_SCHEMA) return undefined;
  const name = parts[1]!;
  const spelled = `${SESSION_SCHEMA}.${name}()`;
  if (!isSessionValue(name)) return { why: `it calls ${SESSION_SCHEMA}.${name}, and the only session values are ${SESSION_VALUES.map((v) => `${SESSION_SCHEMA}.${v}()`).join(' and ')}` };
  const extra = call.args !== undefined || call.agg_star || call.agg_distinct || call.agg_filter !== undefined || call.agg_order !== undefined || call.agg_within_group || call.over !== undefined || call.func_variadic;
  return extra ? { why: `${spelled} takes no arguments` } : name;
}

/** A copy of `predicate` with each session value call replaced by `value(name)`, a constant node. */
function withSessionValues(predicate: Node, value: (name: SessionValueName) => Node): Node {
  const holder: Node = { root: cloneTree(predicate) };
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach((item, index) => {
        const name = isObject(item) && isObject(item.FuncCall) ? sessionCall(item.FuncCall) : undefined;
        if (typeof name === 'string') node[index] = value(name);
        else walk(item);
      });
    }
    if (!isObject(node)) return;
    for (const key of Object.keys(node)) {
      const child = node[key];
      const name = isObject(child) && isObject(child.FuncCall) ? sessionCall(child.FuncCall) : undefined;
      if (typeof name === 'string') node[key] = value(name);
      else walk(child);
    }
  };
  walk(holder);
  return holder.root as Node;
}

const stringConstant = (text: string): Node => ({ A_Const: { sval: { sval: text } } });

const ident = (text: string): string => `"${text.replaceAll('"', '""')}"`;

function relationOf(table: string): RelationName {
  const dot = table.indexOf('.');
  return { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

const standInText = (table: RelationName, predicate: string): string => `SELECT * FROM ONLY ${ident(table.schema)}.${ident(table.name)} WHERE ${predicate}`;

/** Why a predicate node may not filter rows, collecting the columns and session values it reads; undefined when it may. */
function vetNode(value: unknown, columns: Set<string>, sessionValues: Set<SessionValueName>): string | undefined {
  if (Array.isArray(value)) {
    for (const item of value) {
      const why = vetNode(item, columns, sessionValues);
      if (why) return why;
    }
    return undefined;
  }
  if (!isObject(value)) return undefined;
  if ('SubLink' in value) return 'it contains a subquery';
  if ('ParamRef' in value) return 'it contains a parameter ($n)';
  const ref = value.ColumnRef;
  if (isObject(ref)) {
    const fields = Array.isArray(ref.fields) ? (ref.fields as Node[]) : [];
    const name = fields.length === 1 && isObject(fields[0]?.String) ? fields[0].String.sval : undefined;
    if (typeof name !== 'string') return 'it names a column other than by its bare name (write tenant_id, not orders.tenant_id)';
    columns.add(name);
    return undefined;
  }
  const call = value.FuncCall;
  if (isObject(call)) {
    const session = sessionCall(call);
    if (typeof session === 'string') {
      sessionValues.add(session);
      return undefined;
    }
    if (session) return session.why;
    const name = callName(call).at(-1) ?? '';
    if (call.over !== undefined) return `it calls the window function ${name}`;
    if (call.agg_star || call.agg_distinct || call.agg_filter !== undefined || call.agg_order !== undefined || call.agg_within_group) return `it calls the aggregate ${name}`;
    if (REFUSED_IN_FILTERS.has(name)) return `it calls ${name}, an aggregate, window, set-returning or volatile function`;
  }
  for (const key of Object.keys(value)) {
    const why = vetNode(value[key], columns, sessionValues);
    if (why) return why;
  }
  return undefined;
}

/** Parses and vets one predicate for `table` (`schema.table`); a string says why it is refused. */
function parseFilter(table: string, predicate: string): ParsedFilter | string {
  if (predicate.length > MAX_ROW_FILTER_CHARS) return `it is longer than ${MAX_ROW_FILTER_CHARS} characters`;
  const relation = relationOf(table);
  const parsed = parseStatements(standInText(relation, predicate));
  const shell = parseStatements(standInText(relation, 'true'));
  if (!parsed.ok || !shell.ok) return 'it does not parse as a boolean expression';
  const statement = parsed.statements[0];
  const select = statement?.stmt.SelectStmt;
  if (parsed.statements.length !== 1 || !statement || !isObject(select) || select.whereClause === undefined) return 'it is not one boolean expression';
  // Whatever the text holds, the statement must be exactly the stand-in with some WHERE: no UNION, ORDER BY, LIMIT, ... smuggled in.
  const reshaped = cloneTree(statement.stmt) as { SelectStmt: Node };
  reshaped.SelectStmt.whereClause = (shell.statements[0]!.stmt.SelectStmt as Node).whereClause;
  if (!sameTree(reshaped, shell.statements[0]!.stmt)) return 'it is not one boolean expression';
  const columns = new Set<string>();
  const sessionValues = new Set<SessionValueName>();
  const why = vetNode(select.whereClause, columns, sessionValues);
  if (why) return why;
  // The rest is vetted as it will run: with each session value a string constant.
  const analysed = cloneTree(statement.stmt) as { SelectStmt: Node };
  analysed.SelectStmt.whereClause = withSessionValues(select.whereClause as Node, () => stringConstant(''));
  const analysis = analyzeStatement({ ...statement, stmt: analysed });
  if (analysis.unsupported.length > 0) return `it uses ${analysis.unsupported[0]}, which the gateway does not analyze`;
  if (analysis.effects.length > 0) return `it does more than compute a value (${analysis.effects[0]!.detail})`;
  const other = analysis.relations.find((use) => use.candidates.some((candidate) => qualified(candidate) !== table));
  if (other) return `it reaches ${other.text}, which is not the filtered table`;
  const refusal = functionCheck(analysis, { read_only: true, allowed_tables: [], masked_columns: {}, allow_catalog: false, canaries: [] });
  if (refusal) return refusal.reason.replace(/ \(rule [^)]*\)/, '');
  return { predicate: select.whereClause as Node, columns: [...columns], sessionValues: [...sessionValues] };
}

/** Why the policy may not hold this row filter (a sentence for a 400), or undefined when it may. */
export function rowFilterProblem(table: string, predicate: string): string | undefined {
  const parsed = parseFilter(table, predicate);
  return typeof parsed === 'string' ? `the row filter of ${table} is refused: ${parsed}` : undefined;
}

/** Whether any of `tables` (`schema.table`) has a row filter: then the text a statement runs as is not shown, since it holds the predicate. */
export function filtersAny(filters: Readonly<Record<string, string>> | undefined, tables: readonly string[]): boolean {
  return filters !== undefined && tables.some((table) => filters[table] !== undefined);
}

/**
 * Whether any of the filters names a session value (`only`: that one): then a statement's rewrite holds that session's
 * values, and a decision made for one credential must never serve another.
 */
export function filtersUseSessionValues(filters: Readonly<Record<string, string>> | undefined, only?: SessionValueName): boolean {
  if (filters === undefined) return false;
  return Object.entries(filters).some(([table, predicate]) => {
    const filter = filterOf(table, predicate);
    // A refused filter refuses every statement it applies to; counted as naming every value all the same (fail closed).
    return typeof filter === 'string' || (only === undefined ? filter.sessionValues.length > 0 : filter.sessionValues.includes(only));
  });
}

/** Vetted predicates by table and text; a few per policy. */
const parsedFilters = new Map<string, ParsedFilter | string>();
const MAX_PARSED = 1_000;

function filterOf(table: string, predicate: string): ParsedFilter | string {
  const key = `${table}\u0000${predicate}`;
  let parsed = parsedFilters.get(key);
  if (parsed === undefined) {
    if (parsedFilters.size >= MAX_PARSED) parsedFilters.clear();
    parsedFilters.set(key, (parsed = parseFilter(table, predicate)));
  }
  return parsed;
}

/**
 * The predicate with each column reference qualified by the range name it filters, so it can bind
 * nowhere else, and each session value a string constant.
 */
function qualify(predicate: Node, rangeName: string, values: SessionValues): Node {
  const copy = withSessionValues(predicate, (name) => stringConstant(values[name]!));
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) walk(item);
    if (!isObject(value)) return;
    const ref = value.ColumnRef;
    if (isObject(ref) && Array.isArray(ref.fields)) ref.fields = [{ String: { sval: rangeName } }, ...(ref.fields as Node[])];
    else for (const key of Object.keys(value)) walk(value[key]);
  };
  walk(copy);
  return copy;
}

const andArgs = (node: Node): Node[] => {
  const bool = node.BoolExpr;
  return isObject(bool) && bool.boolop === 'AND_EXPR' && Array.isArray(bool.args) ? (bool.args as Node[]) : [node];
};

/**
 * Relations that may show another relation's rows, read whole while a policy has row filters: the
 * catalog snapshot says neither what a view reads nor which tables are a partitioned table's partitions.
 */
const INDIRECT_KINDS: ReadonlySet<string> = new Set(['view', 'matview', 'foreign', 'partitioned']);

const refuse = (rule: string, reason: string, blocked: string[]): Refusal => ({ rule, reason, sqlstate: INSUFFICIENT_PRIVILEGE, blocked });

/** Where a FROM item may be replaced by a subquery: in a FROM or USING list, or as one side of a JOIN. */
function replaceableFromItem(path: readonly (string | number)[]): boolean {
  const slot = path[path.length - 2];
  return typeof slot === 'number' || slot === 'larg' || slot === 'rarg';
}

/** The leakproof conjuncts of the statement's own that bound the FROM item at `path`, copied for its stand-in (row-filter-pushdown.ts). */
function pushedDown(stmt: Node, path: readonly (string | number)[], table: RelationName, policy: PolicyRules, catalog: UpstreamCatalog | undefined): Node[] {
  const rangeVar = getAt(stmt, path);
  const relation = catalog?.relation(table);
  if (!isObject(rangeVar) || !relation || catalog?.leakproofOperator === undefined) return [];
  const alias = isObject(rangeVar.alias) ? rangeVar.alias : undefined;
  // Column aliases rename the table's columns: what the statement's names bind to is not what the catalog says.
  if (alias !== undefined && Array.isArray(alias.colnames)) return [];
  const scope = scopeConjuncts(stmt, path);
  return pushableConjuncts(scope.conjuncts, {
    rangeName: typeof alias?.aliasname === 'string' ? alias.aliasname : table.name,
    innerName: table.name,
    columns: relation.columns,
    masked: new Set(relation.columns.filter((column) => policy.masked_columns[`${qualified(table)}.${column}`] !== undefined)),
    types: relation.columnTypes,
    soleItem: scope.soleItem,
    leakproof: (name, left, right) => catalog.leakproofOperator!(name, left, right),
  });
}

/**
 * The edit that makes a read of `table` read its filtered rows: `orders o` becomes
 * `(SELECT * FROM ONLY public.orders WHERE <filter> AND <pushed> OFFSET 0) o`, `pushed` the
 * statement's leakproof conjuncts on it (each stays in the statement too).
 */
function standIn(use: { path: readonly (string | number)[] }, table: RelationName, filter: ParsedFilter, values: SessionValues, pushed: readonly Node[]): TreeEdit {
  const name = table.name;
  return {
    path: use.path.slice(0, -1),
    what: `the rows of ${qualified(table)} the row filter allows`,
    apply(node) {
      const rangeVar = node.RangeVar;
      if (!isObject(rangeVar) || rangeVar.relname !== name) return `${qualified(table)} is not where the analysis found it`;
      // OFFSET 0 keeps the subquery from being pulled up into the statement and its quals from
      // being pushed down into it: otherwise the planner orders the statement's own WHERE before a
      // costlier filter, and an error it raises on a filtered row (1/(id - 777)) tells of that row.
      // Only leakproof conjuncts are copied in, after the filter, so that indexes still serve them.
      const subquery = parseStatements(`${standInText(table, 'true')} OFFSET 0`);
      if (!subquery.ok) return `the row filter of ${qualified(table)} does not parse`;
      const stmt = subquery.statements[0]!.stmt;
      const predicate = qualify(filter.predicate, name, values);
      (stmt.SelectStmt as Node).whereClause = pushed.length === 0 ? predicate : { BoolExpr: { boolop: 'AND_EXPR', args: [...andArgs(predicate), ...pushed] } };
      const alias = isObject(rangeVar.alias) ? rangeVar.alias : { aliasname: name };
      delete node.RangeVar;
      node.RangeSubselect = { subquery: stmt, alias };
      return undefined;
    },
  };
}

/** The edit that ANDs the row filter into an UPDATE's or DELETE's WHERE, qualified by the target's range name. */
function targetFilter(path: readonly (string | number)[], table: RelationName, filter: ParsedFilter, values: SessionValues): TreeEdit {
  return {
    path: path.slice(0, -1),
    what: `the row filter of ${qualified(table)} on the rows it changes`,
    apply(node) {
      const relation = node.relation;
      if (!isObject(relation) || relation.relname !== table.name) return `${qualified(table)} is not where the analysis found it`;
      const rangeName = isObject(relation.alias) && typeof relation.alias.aliasname === 'string' ? relation.alias.aliasname : table.name;
      const where = node.whereClause as Node | undefined;
      if (where !== undefined && 'CurrentOfExpr' in where) return 'WHERE CURRENT OF cannot take a row filter';
      const args = [...andArgs(qualify(filter.predicate, rangeName, values)), ...(where === undefined ? [] : andArgs(where))];
      node.whereClause = args.length === 1 ? args[0] : { BoolExpr: { boolop: 'AND_EXPR', args } };
      return undefined;
    },
  };
}

/** The columns an UPDATE at `path` (the slot of its target) assigns. */
function assignedColumns(stmt: Node, path: readonly (string | number)[]): string[] {
  const update = getAt(stmt, path.slice(0, -1));
  const targets = isObject(update) && Array.isArray(update.targetList) ? (update.targetList as Node[]) : [];
  return targets.map((target) => (isObject(target.ResTarget) ? String(target.ResTarget.name) : ''));
}

export interface RowFiltering {
  readonly edits: readonly TreeEdit[];
  /** The filtered tables the statement reads or changes (`schema.table`), for the audit record. */
  readonly tables: readonly string[];
}

/**
 * The edits that put the policy's row filters on every read of a filtered table (a subquery stands
 * in for it, so outer joins filter it before joining) and on the rows an UPDATE or DELETE of one
 * changes; a refusal for everything else that would reach its rows unfiltered: INSERT, MERGE,
 * COPY, TRUNCATE or any other write of it, an UPDATE of a filter column, a view, partitioned
 * table or inheritance child that could show its rows, or a filter column missing upstream.
 */
export function rowFilterEdits(analysis: StatementAnalysis, policy: PolicyRules, catalog: UpstreamCatalog | undefined): RowFiltering | Refusal {
  const filters = policy.row_filters ?? {};
  const filtered = Object.keys(filters);
  if (filtered.length === 0) return { edits: [], tables: [] };
  const children = catalog ? new Set(descendants(catalog, filtered.map(relationOf)).map(qualified)) : new Set<string>();
  const edits: TreeEdit[] = [];
  const tables = new Set<string>();
  for (const use of analysis.relations) {
    const names = use.candidates.map(qualified);
    const hit = names.filter((name) => filters[name] !== undefined);
    if (use.via !== undefined) continue;
    if (hit.length === 0) {
      const unfiltered = names.find((name) => children.has(name) || INDIRECT_KINDS.has(catalog?.relation(relationOf(name))?.kind ?? 'table'));
      if (unfiltered) {
        const rule = children.has(unfiltered) ? 'row_filters.child' : 'row_filters.indirect';
        const what = rule === 'row_filters.child' ? 'inherits from a table with a row filter' : 'is a view, materialized view, foreign table or partitioned table, which could show a filtered table\u2019s rows';
        return refuse(rule, `${unfiltered} ${what}, and the policy has row filters; read the tables themselves (rule ${rule}).`, [unfiltered]);
      }
      continue;
    }
    const name = hit[0]!;
    if (names.length > 1) return refuse('row_filters.unsupported', `${use.text} may name ${names.join(' or ')}; write it schema-qualified (rule row_filters.unsupported).`, [name]);
    if (catalog?.relation(relationOf(name))?.kind === 'partitioned') {
      return refuse('row_filters.unsupported', `${name} is a partitioned table, whose partitions could be read around its row filter (rule row_filters.unsupported); the policy must filter a plain table.`, [name]);
    }
    const filter = filterOf(name, filters[name]!);
    if (typeof filter === 'string') return refuse('row_filters.invalid', `the row filter of ${name} cannot be applied (rule row_filters.invalid); the policy must be fixed.`, [name]);
    const values = policy.session_values ?? {};
    const absent = filter.sessionValues.find((value) => values[value] === undefined);
    if (absent !== undefined) {
      return refuse('row_filters.session_value', `the row filter of ${name} names the session's ${absent}, which is not known here (rule row_filters.session_value).`, [name]);
    }
    const table = relationOf(name);
    const known = catalog?.relation(table)?.columns ?? [];
    const missing = filter.columns.find((column) => !known.includes(column));
    if (missing !== undefined) {
      return refuse('row_filters.column_missing', `${name} has a row filter on a column the upstream database does not show (rule row_filters.column_missing); the policy or the table must be fixed.`, [name]);
    }
    const path = use.path;
    const parent = path?.[path.length - 2];
    tables.add(name);
    if (use.written) {
      if (!path || path[path.length - 1] !== 'relation' || (parent !== 'UpdateStmt' && parent !== 'DeleteStmt')) {
        return refuse('row_filters.write', `${name} has a row filter: only UPDATE and DELETE may change it, never ${analysis.kind.toUpperCase()} or a write the filter cannot bound (rule row_filters.write).`, [name]);
      }
      const assigned = parent === 'UpdateStmt' ? assignedColumns(analysis.stmt, path).find((column) => filter.columns.includes(column)) : undefined;
      if (assigned !== undefined) return refuse('row_filters.write', `${name}.${assigned} is a column of its row filter: an UPDATE may not set it (rule row_filters.write).`, [name]);
      edits.push(targetFilter(path, table, filter, values));
      continue;
    }
    if (!path || path[path.length - 1] !== 'RangeVar' || !replaceableFromItem(path)) {
      return refuse('row_filters.unsupported', `${name} has a row filter and is read here where the gateway cannot filter it (rule row_filters.unsupported); read it in a FROM clause.`, [name]);
    }
    edits.push(standIn({ path }, table, filter, values, pushedDown(analysis.stmt, path, table, policy, catalog)));
  }
  // EXPLAIN would print the predicate the agent may not see.
  if (tables.size > 0 && analysis.kind === 'explain') {
    return refuse('row_filters.explain', `${[...tables].join(', ')} has a row filter, and EXPLAIN would show it (rule row_filters.explain); run the statement itself.`, [...tables]);
  }
  return { edits, tables: [...tables] };
}
