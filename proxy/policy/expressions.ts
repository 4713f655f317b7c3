import { constantText, names, nodeType, pathOf, Reader, stringValue, type At } from './ast.js';
import { finish, visit, type Ctx } from './context.js';
import { QUERY_TEXT_FUNCTIONS, VETTED_FUNCTIONS } from './functions.js';
import { bindColumnRef, STAR, type Level, type RefPart } from './scope.js';
import { SETTABLE } from './settings.js';

type Handler = (ctx: Ctx, level: Level, reader: Reader, at: At) => void;

/** Walks one expression. Node types without a handler are refused. */
export function expr(ctx: Ctx, level: Level, at: At | undefined): void {
  if (!at) return;
  const type = nodeType(at.node);
  const handler = handlers[type];
  if (!handler) {
    ctx.out.unsupportedConstruct(type || 'empty expression');
    return;
  }
  visit(ctx, at, (reader) => handler(ctx, level, reader, at));
}

export function exprs(ctx: Ctx, level: Level, list: readonly At[]): void {
  for (const item of list) expr(ctx, level, item);
}

/** Reads a struct-typed field (WindowDef, TypeName) with the same fail-closed rule. */
export function struct(ctx: Ctx, parent: Reader, key: string, type: string, body: (reader: Reader) => void): void {
  const reader = parent.struct(key, type);
  if (!reader) return;
  body(reader);
  finish(ctx, reader);
}

/** An operator name: a schema other than pg_catalog could run any function. */
function operator(ctx: Ctx, parts: readonly string[]): void {
  if (parts.length > 1 && parts[0] !== 'pg_catalog') ctx.out.functions.push({ name: `OPERATOR(${parts.join('.')})`, vetted: false });
}

function columnRef(ctx: Ctx, level: Level, reader: Reader, at: At): void {
  const parts: RefPart[] = reader.list('fields').map((field) => (nodeType(field.node) === 'A_Star' ? STAR : (stringValue(field.node) ?? '')));
  reader.skip('location');
  const text = parts.map((part) => (part === STAR ? '*' : part)).join('.');
  const binding = bindColumnRef(level, parts);
  if (binding.columns.length > 0) {
    ctx.out.columns.push({ candidates: binding.columns, path: pathOf(at.slot), rewritable: ctx.rewritable, written: false, text });
  }
  for (const { tables, form } of binding.wholeRows) ctx.out.wholeRows.push({ tables, form, text });
}

/**
 * A function is vetted when it resolves to pg_catalog and is on the allowlist. An unqualified name
 * resolves to pg_catalog only when pg_catalog is searched first; otherwise a listed schema could
 * shadow it, so it is not vetted.
 */
function funcCall(ctx: Ctx, level: Level, reader: Reader): void {
  const parts = names(reader.list('funcname'));
  const name = parts[parts.length - 1] ?? '';
  const schema = parts.length === 2 ? parts[0] : parts.length === 1 && ctx.out.searchPath.catalogFirst ? 'pg_catalog' : undefined;
  const args = reader.list('args');
  const display = parts.join('.');
  if (schema === 'pg_catalog' && name === 'set_config') setConfig(ctx, args);
  else ctx.out.functions.push({ name: QUERY_TEXT_FUNCTIONS.has(name) ? `${display} (runs query text)` : display, vetted: schema === 'pg_catalog' && VETTED_FUNCTIONS.has(name) });
  exprs(ctx, level, args);
  for (const sort of reader.list('agg_order')) sortBy(ctx, level, sort);
  expr(ctx, level, reader.node('agg_filter'));
  struct(ctx, reader, 'over', 'WindowDef', (window) => windowDef(ctx, level, window));
  reader.skip('agg_within_group', 'agg_star', 'agg_distinct', 'func_variadic', 'funcformat', 'location');
}

/** set_config(name, value, is_local) is SET by another name: the same allowlist applies. */
function setConfig(ctx: Ctx, args: readonly At[]): void {
  const first = args[0];
  const setting = first ? constantText(first.node)?.toLowerCase() : undefined;
  if (setting === undefined || !SETTABLE.has(setting)) ctx.out.effect('setting', `set_config('${setting ?? '?'}', ...)`, true);
}

export function sortBy(ctx: Ctx, level: Level, at: At): void {
  if (nodeType(at.node) !== 'SortBy') {
    ctx.out.unsupportedConstruct(nodeType(at.node));
    return;
  }
  visit(ctx, at, (reader) => {
    expr(ctx, level, reader.node('node'));
    operator(ctx, names(reader.list('useOp')));
    reader.skip('sortby_dir', 'sortby_nulls', 'location');
  });
}

export function windowDef(ctx: Ctx, level: Level, reader: Reader): void {
  exprs(ctx, level, reader.list('partitionClause'));
  for (const sort of reader.list('orderClause')) sortBy(ctx, level, sort);
  expr(ctx, level, reader.node('startOffset'));
  expr(ctx, level, reader.node('endOffset'));
  reader.skip('name', 'refname', 'frameOptions', 'location');
}

export function typeName(ctx: Ctx, level: Level, reader: Reader): void {
  exprs(ctx, level, reader.list('typmods'));
  reader.skip('names', 'typeOid', 'typemod', 'arrayBounds', 'location');
  if (reader.bool('setof') || reader.bool('pct_type')) ctx.out.unsupportedConstruct('TypeName.setof');
}

function subLink(ctx: Ctx, level: Level, reader: Reader): void {
  const kind = reader.string('subLinkType');
  expr(ctx, level, reader.node('testexpr'));
  operator(ctx, names(reader.list('operName')));
  const subselect = reader.node('subselect');
  if (subselect) ctx.query(ctx, level, subselect, { observable: kind !== 'EXISTS_SUBLINK' });
  reader.skip('location', 'xpr', 'subLinkId');
}

const handlers: Readonly<Record<string, Handler>> = {
  ColumnRef: columnRef,
  FuncCall: (ctx, level, reader) => funcCall(ctx, level, reader),
  SubLink: (ctx, level, reader) => subLink(ctx, level, reader),
  A_Const: (_ctx, _level, reader) => reader.skip('ival', 'fval', 'boolval', 'sval', 'bsval', 'isnull', 'location'),
  ParamRef: (_ctx, _level, reader) => reader.skip('number', 'location'),
  SQLValueFunction: (_ctx, _level, reader) => reader.skip('op', 'typmod', 'type', 'xpr', 'location'),
  SetToDefault: (_ctx, _level, reader) => reader.skip('location', 'xpr', 'typeId', 'typeMod', 'collation'),
  A_Expr: (ctx, level, reader) => {
    operator(ctx, names(reader.list('name')));
    expr(ctx, level, reader.node('lexpr'));
    expr(ctx, level, reader.node('rexpr'));
    reader.skip('kind', 'location');
  },
  List: (ctx, level, reader) => exprs(ctx, level, reader.list('items')),
  BoolExpr: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('args'));
    reader.skip('boolop', 'location', 'xpr');
  },
  NullTest: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    reader.skip('nulltesttype', 'argisrow', 'location', 'xpr');
  },
  BooleanTest: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    reader.skip('booltesttype', 'location', 'xpr');
  },
  TypeCast: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    struct(ctx, reader, 'typeName', 'TypeName', (type) => typeName(ctx, level, type));
    reader.skip('location');
  },
  CollateClause: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    reader.skip('collname', 'location');
  },
  CaseExpr: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    exprs(ctx, level, reader.list('args'));
    expr(ctx, level, reader.node('defresult'));
    reader.skip('location', 'xpr', 'casetype', 'casecollid');
  },
  CaseWhen: (ctx, level, reader) => {
    expr(ctx, level, reader.node('expr'));
    expr(ctx, level, reader.node('result'));
    reader.skip('location', 'xpr');
  },
  CoalesceExpr: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('args'));
    reader.skip('location', 'xpr', 'coalescetype', 'coalescecollid');
  },
  MinMaxExpr: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('args'));
    reader.skip('op', 'location', 'xpr', 'minmaxtype', 'minmaxcollid', 'inputcollid');
  },
  A_ArrayExpr: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('elements'));
    reader.skip('location');
  },
  RowExpr: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('args'));
    reader.skip('row_format', 'colnames', 'location', 'xpr', 'row_typeid');
  },
  A_Indirection: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    exprs(ctx, level, reader.list('indirection'));
  },
  A_Indices: (ctx, level, reader) => {
    expr(ctx, level, reader.node('lidx'));
    expr(ctx, level, reader.node('uidx'));
    reader.skip('is_slice');
  },
  A_Star: () => undefined,
  String: (_ctx, _level, reader) => reader.skip('sval'),
  GroupingFunc: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('args'));
    reader.skip('location', 'xpr', 'refs', 'agglevelsup');
  },
  GroupingSet: (ctx, level, reader) => {
    exprs(ctx, level, reader.list('content'));
    reader.skip('kind', 'location');
  },
  MultiAssignRef: (ctx, level, reader) => {
    expr(ctx, level, reader.node('source'));
    reader.skip('colno', 'ncolumns');
  },
};
