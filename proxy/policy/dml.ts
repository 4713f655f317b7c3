import { nodeType, pathOf, Reader, type At } from './ast.js';
import { visit, type Ctx } from './context.js';
import { expr, exprs, struct } from './expressions.js';
import { fromItem, relationUse, targetList, withClause } from './queries.js';
import { Level, tablesOf, type RangeEntry } from './scope.js';

const VERB: Readonly<Record<string, string>> = { InsertStmt: 'INSERT', UpdateStmt: 'UPDATE', DeleteStmt: 'DELETE' };

/** INSERT, UPDATE and DELETE, at top level or inside WITH. The target's columns read in expressions are masked like any read. */
export function dmlStatement(ctx: Ctx, parent: Level | null, at: At): void {
  const type = nodeType(at.node);
  ctx.out.effect('write', VERB[type] ?? type);
  visit(ctx, at, (reader) => {
    const level = new Level(parent);
    struct(ctx, reader, 'withClause', 'WithClause', (clause) => withClause(ctx, level, clause));
    const relation = reader.struct('relation', 'RangeVar');
    // An INSERT writes its target only; UPDATE and DELETE would reach its inheritance children.
    const target = relation ? relationUse(ctx, relation, true, type === 'InsertStmt' ? 'self' : 'only') : undefined;
    if (relation) relation.leftovers().forEach((key) => ctx.out.unsupportedConstruct(`RangeVar.${key}`));
    if (type === 'InsertStmt') insert(ctx, level, reader, target);
    else {
      if (target) level.entries.push(target);
      for (const item of reader.list(type === 'UpdateStmt' ? 'fromClause' : 'usingClause')) level.entries.push(...fromItem(ctx, level, item));
      if (type === 'UpdateStmt') assignments(ctx, level, reader.list('targetList'), target);
      expr(ctx, level, reader.node('whereClause'));
    }
    returning(ctx, level, reader, target);
  });
}

function insert(ctx: Ctx, level: Level, reader: Reader, target: RangeEntry | undefined): void {
  for (const column of reader.list('cols')) {
    assignedColumn(ctx, column, target);
    if (nodeType(column.node) === 'ResTarget') {
      visit(ctx, column, (assignment) => {
        exprs(ctx, level, assignment.list('indirection'));
        assignment.skip('name', 'location');
      });
    }
  }
  const source = reader.node('selectStmt');
  if (source) ctx.query(ctx, level, source);
  reader.skip('override');
  struct(ctx, reader, 'onConflictClause', 'OnConflictClause', (conflict) => {
    const scope = new Level(level);
    if (target) scope.entries.push(target, { kind: 'derived', refname: 'excluded' });
    struct(ctx, conflict, 'infer', 'InferClause', (infer) => {
      for (const element of infer.list('indexElems')) indexElement(ctx, scope, element, target);
      expr(ctx, scope, infer.node('whereClause'));
      infer.skip('conname', 'location');
    });
    assignments(ctx, scope, conflict.list('targetList'), target);
    expr(ctx, scope, conflict.node('whereClause'));
    conflict.skip('action', 'location');
  });
}

function returning(ctx: Ctx, level: Level, reader: Reader, target: RangeEntry | undefined): void {
  const items = reader.list('returningList');
  if (items.length === 0) return;
  // INSERT's source cannot see its target, RETURNING can; UPDATE and DELETE already have it in scope.
  const scope = target && !level.entries.includes(target) ? new Level(level) : level;
  if (scope !== level && target) scope.entries.push(target);
  targetList(ctx, scope, items, true);
}

/** UPDATE SET and ON CONFLICT DO UPDATE SET: target names are writes, values are reads. */
function assignments(ctx: Ctx, level: Level, items: readonly At[], target: RangeEntry | undefined): void {
  for (const item of items) {
    if (nodeType(item.node) !== 'ResTarget') {
      ctx.out.unsupportedConstruct(nodeType(item.node));
      continue;
    }
    assignedColumn(ctx, item, target);
    visit(ctx, item, (assignment) => {
      expr(ctx, level, assignment.node('val'));
      exprs(ctx, level, assignment.list('indirection'));
      assignment.skip('name', 'location');
    });
  }
}

/** A column written by INSERT or SET: matters for column honeytokens only. */
function assignedColumn(ctx: Ctx, at: At, target: RangeEntry | undefined): void {
  const column = (at.node.ResTarget as { name?: string } | undefined)?.name;
  if (nodeType(at.node) !== 'ResTarget' || column === undefined) {
    ctx.out.unsupportedConstruct('assignment target');
    return;
  }
  const candidates = (target ? tablesOf(target) : []).map((table) => ({ table, column }));
  if (candidates.length > 0) ctx.out.columns.push({ candidates, path: pathOf(at.slot), rewritable: false, written: true, text: column });
}

/** ON CONFLICT (column | (expression)): the arbiter compares raw values, so a masked column here cannot be rewritten. */
function indexElement(ctx: Ctx, level: Level, at: At, target: RangeEntry | undefined): void {
  if (nodeType(at.node) !== 'IndexElem') {
    ctx.out.unsupportedConstruct(nodeType(at.node));
    return;
  }
  visit(ctx, at, (element) => {
    const column = element.string('name');
    const candidates = column !== undefined && target ? tablesOf(target).map((table) => ({ table, column })) : [];
    if (candidates.length > 0) ctx.out.columns.push({ candidates, path: pathOf(at.slot), rewritable: false, written: false, text: column ?? '' });
    expr(ctx, level, element.node('expr'));
    element.skip('collation', 'opclass', 'ordering', 'nulls_ordering', 'indexcolname');
    if (element.list('opclassopts').length > 0) ctx.out.unsupportedConstruct('IndexElem.opclassopts');
  });
}
