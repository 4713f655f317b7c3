import { below, names, nodeType, pathOf, Reader, stringValue, type At } from './ast.js';
import { finish, visit, type Ctx, type QueryOptions } from './context.js';
import { expr, exprs, sortBy, struct, typeName, windowDef } from './expressions.js';
import { inheritance, type Reach } from './inheritance.js';
import { implicitOperators } from './resolution.js';
import { resolveRelation } from './names.js';
import { Level, tablesOf, type RangeEntry } from './scope.js';

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
  targetList(ctx, level, reader.list('targetList'), options.observable);
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

/** A select list or RETURNING list: each `*` or `t.*` is a whole-row use unless the list is never evaluated. */
export function targetList(ctx: Ctx, level: Level, items: readonly At[], observable: boolean): void {
  for (const item of items) {
    if (nodeType(item.node) !== 'ResTarget') {
      ctx.out.unsupportedConstruct(nodeType(item.node));
      continue;
    }
    visit(ctx, item, (target) => {
      const value = target.node('val');
      if (!observable && value && isStar(value)) ctx.out.visited.add(value.node.ColumnRef as object);
      else expr(ctx, level, value);
      target.skip('name', 'location');
      if (target.list('indirection').length > 0) ctx.out.unsupportedConstruct('ResTarget.indirection');
    });
  }
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
  if (recursive) for (const cte of ctes) level.ctes.add(cteName(cte));
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
      for (const key of ['search_clause', 'cycle_clause']) if (body.has(key)) ctx.out.unsupportedConstruct(`WITH ... ${key.replace('_clause', '').toUpperCase()}`);
      body.skip('search_clause', 'cycle_clause');
    });
    level.ctes.add(cteName(cte));
  }
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
  const entry: RangeEntry = { kind: 'table', refname: alias?.string('aliasname') ?? relname, aliased: alias !== undefined, tables };
  if (alias) aliasColumns(ctx, alias, entry);
  return entry;
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
  const type = nodeType(at.node);
  const added: RangeEntry[] = [];
  const handler = fromHandlers[type];
  if (!handler) ctx.out.unsupportedConstruct(type || 'empty FROM item');
  else visit(ctx, at, (reader) => added.push(...handler(ctx, level, reader)));
  return added;
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
      return [{ kind: 'derived', refname: alias?.string('aliasname') ?? relname }];
    }
    return [relationUse(ctx, reader, false, 'only')];
  },
  RangeSubselect: (ctx, level, reader) => {
    const subquery = reader.node('subquery');
    if (subquery) ctx.query(ctx, level, subquery);
    reader.skip('lateral');
    return [{ kind: 'derived', refname: aliasName(reader) }];
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
  JoinExpr: (ctx, level, reader) => joinExpr(ctx, level, reader),
};

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

function joinExpr(ctx: Ctx, level: Level, reader: Reader): RangeEntry[] {
  const left = reader.node('larg');
  const right = reader.node('rarg');
  const leftEntries = left ? fromItem(ctx, level, left) : [];
  level.entries.push(...leftEntries);
  const rightEntries = right ? fromItem(ctx, level, right) : [];
  level.entries.push(...rightEntries);
  const members = [...leftEntries, ...rightEntries];
  expr(ctx, level, reader.node('quals'));
  const sides = [leftEntries.flatMap(tablesOf), rightEntries.flatMap(tablesOf)];
  for (const using of reader.list('usingClause')) {
    const column = stringValue(using.node) ?? '';
    const candidates = sides.flat().map((table) => ({ table, column }));
    if (candidates.length > 0) ctx.out.columns.push({ candidates, path: pathOf(using.slot), rewritable: false, written: false, text: `USING (${column})` });
  }
  if (reader.bool('isNatural') || reader.list('usingClause').length > 0) {
    implicitOperators(ctx.out, ['='], 'JOIN ... USING and NATURAL JOIN', 'Join with ON a.x OPERATOR(pg_catalog.=) b.x instead.');
  }
  if (reader.bool('isNatural') && sides.flat().length > 0) ctx.out.wholeRows.push({ tables: sides.flat(), form: 'natural', text: 'NATURAL JOIN' });
  reader.skip('jointype', 'rtindex');
  const added: RangeEntry[] = [];
  for (const key of ['alias', 'join_using_alias']) {
    const alias = reader.struct(key, 'Alias');
    if (!alias) continue;
    const entry: RangeEntry = { kind: 'join', refname: alias.string('aliasname') ?? '', members };
    aliasColumns(ctx, alias, entry);
    added.push(entry);
  }
  // The members were pushed as they were read; only the join's own names are new.
  level.entries.splice(level.entries.length - members.length, members.length);
  return [...members, ...added];
}
