import { below, names, nodeType, pathOf, Reader, stringValue, type At } from './ast.js';
import { finish, visit, type Ctx, type QueryOptions } from './context.js';
import { expr, exprs, sortBy, struct, typeName, windowDef } from './expressions.js';
import { inheritance, type Reach } from './inheritance.js';
import { resolveRelation, type RelationName } from './names.js';
import { implicitOperators } from './resolution.js';
import { bindColumnRef, Level, STAR, tablesOf, type FromShape, type RangeEntry, type RefPart } from './scope.js';
import { levelStar, outputNames, qualifiedStar, shapeColumns } from './star.js';
import type { CatalogRelation } from './upstream-catalog.js';

const LOCK_STRENGTH: Readonly<Record<string, string>> = {
  LCS_FORKEYSHARE: 'FOR KEY SHARE',
  LCS_FORSHARE: 'FOR SHARE',
  LCS_FORNOKEYUPDATE: 'FOR NO KEY UPDATE',
  LCS_FORUPDATE: 'FOR UPDATE',
};

/** SELECT, VALUES and set operations. */
export function selectQuery(ctx: Ctx, parent: Level | null, at: At, options: QueryOptions): void {
  visit(ctx, at, (reader) => selectStmt(ctx, parent, reader, options));
}

function selectStmt(ctx: Ctx, parent: Level | null, reader: Reader, options: QueryOptions): void {
  const level = new Level(parent);
  struct(ctx, reader, 'withClause', 'WithClause', (clause) => withClause(ctx, level, clause));
  const op = reader.string('op');
  if (op !== undefined && op !== 'SETOP_NONE') {
    for (const side of ['larg', 'rarg']) struct(ctx, reader, side, 'SelectStmt', (arm) => selectStmt(ctx, level, arm, options));
  }
  for (const item of reader.list('fromClause')) level.entries.push(...fromItem(ctx, level, item));
  for (const row of reader.list('valuesLists')) expr(ctx, level, row);
  targetList(ctx, level, reader.list('targetList'), options.observable, true);
  expr(ctx, level, reader.node('whereClause'));
  exprs(ctx, level, reader.list('groupClause'));
  expr(ctx, level, reader.node('havingClause'));
  for (const window of reader.list('windowClause')) windowClause(ctx, level, window);
  // Plain DISTINCT is a list holding one empty node; DISTINCT ON lists expressions.
  exprs(ctx, level, reader.list('distinctClause').filter((item) => nodeType(item.node) !== ''));
  for (const sort of reader.list('sortClause')) sortBy(ctx, level, sort);
  expr(ctx, level, reader.node('limitCount'));
  expr(ctx, level, reader.node('limitOffset'));
  for (const locking of reader.list('lockingClause')) lockingClause(ctx, locking);
  struct(ctx, reader, 'intoClause', 'IntoClause', (into) => intoClause(ctx, into));
  reader.skip('op', 'all', 'limitOption', 'groupDistinct');
}

/**
 * A select list or RETURNING list: each `*` or `t.*` is a whole-row use unless the list is never
 * evaluated. In a select list (`expandable`) it is also recorded with the columns it stands for.
 */
export function targetList(ctx: Ctx, level: Level, items: readonly At[], observable: boolean, expandable = false): void {
  for (const item of items) {
    if (nodeType(item.node) !== 'ResTarget') {
      ctx.out.unsupportedConstruct(nodeType(item.node));
      continue;
    }
    visit(ctx, item, (target) => {
      const value = target.node('val');
      if (!observable && value && isStar(value)) ctx.out.visited.add(value.node.ColumnRef as object);
      else expr(ctx, level, value);
      if (observable && expandable && value && isStar(value)) starExpansion(ctx, level, value, item);
      target.skip('name', 'location');
      if (target.list('indirection').length > 0) ctx.out.unsupportedConstruct('ResTarget.indirection');
    });
  }
}

function starExpansion(ctx: Ctx, level: Level, value: At, item: At): void {
  const fields = (value.node.ColumnRef as { fields?: At['node'][] }).fields ?? [];
  const parts: RefPart[] = fields.map((field) => (nodeType(field) === 'A_Star' ? STAR : (stringValue(field) ?? '')));
  const tables = bindColumnRef(level, parts).wholeRows[0]?.tables ?? [];
  if (tables.length === 0) return;
  const qualifier = parts.slice(0, -1).filter((part): part is string => part !== STAR);
  const listing = qualifier.length === 0 ? levelStar(level) : qualifiedStar(level, qualifier);
  ctx.out.expansions.push({ kind: 'star', path: pathOf(item.slot), text: [...qualifier, '*'].join('.'), tables, listing });
}

function isStar(at: At): boolean {
  const fields = (at.node.ColumnRef as { fields?: unknown[] } | undefined)?.fields;
  const last = fields?.[fields.length - 1];
  return typeof last === 'object' && last !== null && 'A_Star' in last;
}

function windowClause(ctx: Ctx, level: Level, at: At): void {
  if (nodeType(at.node) !== 'WindowDef') ctx.out.unsupportedConstruct(nodeType(at.node));
  else visit(ctx, at, (reader) => windowDef(ctx, level, reader));
}

function lockingClause(ctx: Ctx, at: At): void {
  visit(ctx, at, (reader) => {
    ctx.out.effect('lock', `SELECT ... ${LOCK_STRENGTH[reader.string('strength') ?? ''] ?? 'FOR UPDATE'}`);
    // The locked names are FROM-item names, not new relations.
    for (const rel of reader.list('lockedRels')) ctx.out.visited.add(rel.node.RangeVar as object);
    reader.skip('waitPolicy');
  });
}

function intoClause(ctx: Ctx, reader: Reader): void {
  ctx.out.effect('write', 'SELECT ... INTO (creates a table)');
  ctx.out.unsupportedConstruct('SELECT ... INTO');
  const rel = reader.struct('rel', 'RangeVar');
  if (rel) relationUse(ctx, rel, true, 'self');
  reader.skip('colNames', 'options', 'onCommit', 'accessMethod', 'tableSpaceName', 'viewQuery', 'skipData');
}

/**
 * WITH: a CTE name shadows tables for the rest of its WITH list (all of it when RECURSIVE) and
 * for the query body, including nested subqueries.
 */
export function withClause(ctx: Ctx, level: Level, reader: Reader): void {
  const ctes = reader.list('ctes');
  const recursive = reader.bool('recursive');
  reader.skip('location');
  if (recursive) for (const cte of ctes) level.ctes.set(cteName(cte), cteColumns(cte));
  for (const cte of ctes) {
    if (nodeType(cte.node) !== 'CommonTableExpr') {
      ctx.out.unsupportedConstruct(nodeType(cte.node));
      continue;
    }
    visit(ctx, cte, (body) => {
      const inner = body.node('ctequery');
      const kind = inner ? nodeType(inner.node) : '';
      if (kind !== 'SelectStmt') ctx.out.effect('write', `a data-modifying WITH query (${kind.replace(/Stmt$/, '').toUpperCase()})`);
      if (inner) ctx.query(ctx, level, inner);
      body.skip('ctename', 'aliascolnames', 'ctematerialized', 'location', 'cterecursive', 'cterefcount');
      struct(ctx, body, 'search_clause', 'CTESearchClause', (search) => search.skip('search_col_list', 'search_breadth_first', 'search_seq_column', 'location'));
      struct(ctx, body, 'cycle_clause', 'CTECycleClause', (cycle) => cycleClause(ctx, level, cycle));
    });
    level.ctes.set(cteName(cte), cteColumns(cte));
  }
}

/** A CTE's output names: its column list over its query's own names. */
function cteColumns(cte: At): readonly string[] | undefined {
  const fields = cte.node.CommonTableExpr as { aliascolnames?: At['node'][]; ctequery?: At['node'] } | undefined;
  return renamed(fields?.ctequery ? outputNames(fields.ctequery) : undefined, (fields?.aliascolnames ?? []).map((node) => stringValue(node) ?? ''));
}

/**
 * SEARCH and CYCLE name the CTE's own output columns (masked, if at all, inside its body) and new
 * columns; CYCLE's mark values are constants, walked as expressions all the same.
 */
function cycleClause(ctx: Ctx, level: Level, cycle: Reader): void {
  cycle.skip('cycle_col_list', 'cycle_mark_column', 'cycle_path_column', 'location', 'cycle_mark_type', 'cycle_mark_typmod', 'cycle_mark_collation', 'cycle_mark_neop');
  expr(ctx, level, cycle.node('cycle_mark_value'));
  expr(ctx, level, cycle.node('cycle_mark_default'));
}

function cteName(cte: At): string {
  const fields = cte.node.CommonTableExpr as { ctename?: string } | undefined;
  return fields?.ctename ?? '';
}

/** Records a relation read or written, and what reaching its inheritance children takes (see Reach); returns its range entry. */
export function relationUse(ctx: Ctx, reader: Reader, written: boolean, reach: Reach): RangeEntry {
  ctx.out.visited.add(reader.fields);
  const schema = reader.string('schemaname');
  const relname = reader.string('relname') ?? '';
  const alias = reader.struct('alias', 'Alias');
  reader.skip('catalogname', 'inh', 'location');
  const persistence = reader.string('relpersistence');
  const tables = resolveRelation(schema, relname, ctx.out.searchPath);
  const text = schema ? `${schema}.${relname}` : relname;
  if (persistence === 't') ctx.out.relations.push({ candidates: [{ schema: 'pg_temp', name: relname }], written, text });
  else {
    ctx.out.relations.push(reader.slot === null ? { candidates: tables, written, text } : { candidates: tables, written, text, path: pathOf(reader.slot) });
    inheritance(ctx.out, reader, tables, text, reach);
  }
  const known = catalogRelation(ctx, tables);
  const renames = alias ? names(alias.list('colnames')) : [];
  const columns = known?.columns.map((column, index) => renames[index] ?? column);
  const entry: RangeEntry = {
    kind: 'table', refname: alias?.string('aliasname') ?? relname, aliased: alias !== undefined, tables, ...(known && columns ? { columns, base: known.columns } : {}),
  };
  if (alias) aliasColumns(ctx, alias, entry);
  return entry;
}

/** The relation a name denotes as the upstream catalog lists it: the first candidate it knows, as PostgreSQL searches. */
function catalogRelation(ctx: Ctx, tables: readonly RelationName[]): CatalogRelation | undefined {
  for (const table of tables) {
    const relation = ctx.out.catalog?.relation(table);
    if (relation) return relation;
  }
  return undefined;
}

/**
 * `t AS a(x, y)` renames the table's first columns: recorded as a whole-row use (a column
 * honeytoken of the table trips), and, when the catalog knows the columns, as an expansion into a
 * subquery naming them, made when the table has masked columns.
 */
function aliasExpansion(ctx: Ctx, item: At, entry: RangeEntry): void {
  if (entry.kind !== 'table' || !entry.aliased) return;
  const alias = (item.node.RangeVar ?? (item.node.RangeTableSample as { relation?: At['node'] } | undefined)?.relation?.RangeVar) as { alias?: { colnames?: unknown[] } } | undefined;
  if (!alias?.alias?.colnames?.length) return;
  const known = catalogRelation(ctx, entry.tables);
  if (!known) return;
  const text = `${entry.refname}(${names((alias.alias.colnames as At['node'][]).map((node) => ({ node, slot: null }))).join(', ')})`;
  ctx.out.expansions.push({ kind: 'alias', path: pathOf(item.slot), text, tables: entry.tables, columns: known.columns });
}

/** `AS t(a, b, c)` renames columns by position: on a table that could put a masked column under any name. */
function aliasColumns(ctx: Ctx, alias: Reader, entry: RangeEntry): void {
  alias.skip('aliasname');
  const columns = alias.list('colnames');
  const tables = tablesOf(entry);
  if (columns.length > 0 && tables.length > 0) ctx.out.wholeRows.push({ tables, form: 'column_alias', text: `${entry.refname ?? ''}(${names(columns).join(', ')})` });
  finish(ctx, alias);
}

/** One FROM item, in order; returns the entries it adds to the level (LATERAL items see the earlier ones). */
export function fromItem(ctx: Ctx, level: Level, at: At): RangeEntry[] {
  const { entries, shape } = fromShape(ctx, level, at);
  if (shape) level.from.push(shape);
  return entries;
}

/** A FROM item's entries, and its shape for `*` (none when it was refused). */
function fromShape(ctx: Ctx, level: Level, at: At): { entries: RangeEntry[]; shape: FromShape | undefined } {
  const type = nodeType(at.node);
  let found: { entries: RangeEntry[]; shape: FromShape | undefined } = { entries: [], shape: undefined };
  if (type === 'JoinExpr') {
    visit(ctx, at, (reader) => (found = joinExpr(ctx, level, reader)));
    return found;
  }
  const handler = fromHandlers[type];
  if (!handler) ctx.out.unsupportedConstruct(type || 'empty FROM item');
  else visit(ctx, at, (reader) => (found = { entries: handler(ctx, level, reader), shape: undefined }));
  const entry = found.entries[0];
  if (entry) aliasExpansion(ctx, at, entry);
  return { entries: found.entries, shape: entry && found.entries.length === 1 ? { kind: 'item', entry } : undefined };
}

type FromHandler = (ctx: Ctx, level: Level, reader: Reader) => RangeEntry[];

const fromHandlers: Readonly<Record<string, FromHandler>> = {
  RangeVar: (ctx, level, reader) => {
    const schema = reader.has('schemaname');
    const relname = (reader.fields.relname as string | undefined) ?? '';
    if (!schema && level.hasCte(relname)) {
      const alias = reader.struct('alias', 'Alias');
      alias?.skip('aliasname', 'colnames');
      reader.skip('relname', 'inh', 'relpersistence', 'location');
      return [derived(alias?.string('aliasname') ?? relname, level.cteColumns(relname), alias)];
    }
    return [relationUse(ctx, reader, false, 'only')];
  },
  RangeSubselect: (ctx, level, reader) => {
    const subquery = reader.node('subquery');
    if (subquery) ctx.query(ctx, level, subquery);
    reader.skip('lateral');
    const alias = reader.struct('alias', 'Alias');
    alias?.skip('aliasname', 'colnames');
    return [derived(alias?.string('aliasname') ?? null, subquery ? outputNames(subquery.node) : undefined, alias)];
  },
  RangeFunction: (ctx, level, reader) => {
    for (const item of reader.list('functions')) {
      const [call, columns] = (item.node.List as { items?: unknown[] } | undefined)?.items ?? [];
      ctx.out.visited.add(item.node);
      expr(ctx, level, call ? { node: call as At['node'], slot: below(item.slot, 'List', 'items', 0) } : undefined);
      if (Array.isArray((columns as { List?: { items?: unknown[] } } | undefined)?.List?.items)) ctx.out.unsupportedConstruct('ROWS FROM column definitions');
    }
    for (const column of reader.list('coldeflist')) columnDefinition(ctx, level, column);
    reader.skip('lateral', 'ordinality', 'is_rowsfrom');
    return [{ kind: 'derived', refname: aliasName(reader) }];
  },
  RangeTableSample: (ctx, level, reader) => tableSample(ctx, level, reader),
};

const SAMPLE_METHODS: ReadonlySet<string> = new Set(['system', 'bernoulli']);

/**
 * TABLESAMPLE SYSTEM or BERNOULLI, pg_catalog's sampling methods, over a table: the percentage and
 * REPEATABLE seed must be constants (a subquery or function there is refused, after being walked
 * like any expression).
 */
function tableSample(ctx: Ctx, level: Level, reader: Reader): RangeEntry[] {
  const relation = reader.node('relation');
  const entries: RangeEntry[] = [];
  const table = fromHandlers.RangeVar;
  if (relation && table && nodeType(relation.node) === 'RangeVar') visit(ctx, relation, (inner) => entries.push(...table(ctx, level, inner)));
  else ctx.out.unsupportedConstruct('TABLESAMPLE over something other than a table');
  const method = names(reader.list('method'));
  const name = method[method.length - 1] ?? '';
  const inCatalog = method.length === 1 ? ctx.out.searchPath.catalogFirst : method[0] === 'pg_catalog';
  if (!SAMPLE_METHODS.has(name) || method.length > 2 || !inCatalog) ctx.out.unsupportedConstruct(`TABLESAMPLE method ${method.join('.')} (only SYSTEM and BERNOULLI are supported)`);
  const args = [...reader.list('args'), ...[reader.node('repeatable')].filter((arg): arg is At => arg !== undefined)];
  for (const arg of args) {
    expr(ctx, level, arg);
    if (!isConstant(arg.node)) ctx.out.unsupportedConstruct('a TABLESAMPLE argument that is not a constant (write the percentage and REPEATABLE seed as numbers)');
  }
  reader.skip('location');
  return entries;
}

/** A number, string or parameter, possibly cast: what a sampling argument may be. */
function isConstant(node: At['node']): boolean {
  const type = nodeType(node);
  if (type === 'A_Const' || type === 'ParamRef') return true;
  const cast = node.TypeCast as { arg?: At['node'] } | undefined;
  return type === 'TypeCast' && cast?.arg !== undefined && isConstant(cast.arg);
}

/** A subquery or CTE reference: its output names (renamed by an alias list) when known and distinct. */
function derived(refname: string | null, columns: readonly string[] | undefined, alias: Reader | undefined): RangeEntry {
  const fields = alias?.fields.colnames;
  const names = renamed(columns, Array.isArray(fields) ? fields.map((node) => stringValue(node as At['node']) ?? '') : []);
  return names ? { kind: 'derived', refname, columns: names } : { kind: 'derived', refname };
}

/** Names renamed by position; undefined when unknown, or when two are the same (a reference to either is ambiguous). */
function renamed(columns: readonly string[] | undefined, aliases: readonly string[]): readonly string[] | undefined {
  const names = columns?.map((name, index) => aliases[index] ?? name);
  return names && new Set(names).size === names.length ? names : undefined;
}

function aliasName(reader: Reader): string | null {
  const alias = reader.struct('alias', 'Alias');
  alias?.skip('aliasname', 'colnames');
  return alias?.string('aliasname') ?? null;
}

/** A column definition list of a record-returning function: names and types only. */
function columnDefinition(ctx: Ctx, level: Level, at: At): void {
  if (nodeType(at.node) !== 'ColumnDef') ctx.out.unsupportedConstruct(nodeType(at.node));
  else
    visit(ctx, at, (reader) => {
      struct(ctx, reader, 'typeName', 'TypeName', (type) => typeName(ctx, level, type));
      reader.skip('colname', 'is_local', 'location');
    });
}

function joinExpr(ctx: Ctx, level: Level, reader: Reader): { entries: RangeEntry[]; shape: FromShape | undefined } {
  const left = reader.node('larg');
  const right = reader.node('rarg');
  // Both sides are FROM items: fromShape refuses what it does not know.
  const leftSide = left ? fromShape(ctx, level, left) : { entries: [], shape: undefined };
  level.entries.push(...leftSide.entries);
  const rightSide = right ? fromShape(ctx, level, right) : { entries: [], shape: undefined };
  level.entries.push(...rightSide.entries);
  const members = [...leftSide.entries, ...rightSide.entries];
  expr(ctx, level, reader.node('quals'));
  const sides = [leftSide.entries.flatMap(tablesOf), rightSide.entries.flatMap(tablesOf)];
  const usingNames: string[] = [];
  for (const using of reader.list('usingClause')) {
    const column = stringValue(using.node) ?? '';
    usingNames.push(column);
    const candidates = sides.flat().map((table) => ({ table, column }));
    if (candidates.length > 0) ctx.out.columns.push({ candidates, path: pathOf(using.slot), rewritable: false, written: false, text: `USING (${column})` });
  }
  const natural = reader.bool('isNatural');
  if (natural || usingNames.length > 0) {
    implicitOperators(ctx.out, ['='], 'JOIN ... USING and NATURAL JOIN', 'Join with ON a.x OPERATOR(pg_catalog.=) b.x instead.');
  }
  const common = natural && leftSide.shape && rightSide.shape ? commonColumns(level, leftSide.shape, rightSide.shape) : null;
  if (natural && sides.flat().length > 0) {
    ctx.out.wholeRows.push({ tables: sides.flat(), form: 'natural', text: 'NATURAL JOIN' });
    if (common) {
      const compared = common.flatMap((column) => sides.flat().map((table) => ({ table, column: baseName(members, table, column) })));
      ctx.out.expansions.push({ kind: 'natural', path: pathOf(reader.slot?.parent ?? null), text: 'NATURAL JOIN', tables: sides.flat(), using: common, compared });
    }
  }
  reader.skip('jointype', 'rtindex');
  const added: RangeEntry[] = [];
  let alias: { entry: RangeEntry; columns: string[] } | null = null;
  for (const key of ['alias', 'join_using_alias']) {
    const aliasReader = reader.struct(key, 'Alias');
    if (!aliasReader) continue;
    const entry: RangeEntry = { kind: 'join', refname: aliasReader.string('aliasname') ?? '', members };
    if (key === 'alias') alias = { entry, columns: names(aliasReader.list('colnames')) };
    aliasColumns(ctx, aliasReader, entry);
    added.push(entry);
  }
  // The members were pushed as they were read; only the join's own names are new.
  level.entries.splice(level.entries.length - members.length, members.length);
  const shape: FromShape | undefined =
    leftSide.shape && rightSide.shape ? { kind: 'join', left: leftSide.shape, right: rightSide.shape, merged: natural ? common : usingNames, alias } : undefined;
  return { entries: [...members, ...added], shape };
}

/** NATURAL JOIN's merged columns: the left side's output names the right side also has, in the left's order; null when either is not known. */
function commonColumns(level: Level, left: FromShape, right: FromShape): string[] | null {
  const leftNames = shapeColumns(level, left);
  const rightNames = shapeColumns(level, right);
  return leftNames && rightNames ? leftNames.filter((name) => rightNames.includes(name)) : null;
}

/** The table column a join column name denotes in `table`: an alias list renames by position. */
function baseName(members: readonly RangeEntry[], table: RelationName, name: string): string {
  for (const entry of members) {
    if (entry.kind !== 'table' || !entry.columns || !entry.tables.includes(table)) continue;
    const index = entry.columns.indexOf(name);
    if (index >= 0) return entry.base?.[index] ?? name;
  }
  return name;
}
