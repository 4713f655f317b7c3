import { constantText, names, nodeType, pathOf, Reader, stringValue, type At, type Node } from './ast.js';
import { CATALOG_DESCRIBING_FUNCTIONS } from './catalog.js';
import { finish, visit, type Ctx } from './context.js';
import { CONFIG_FIRST_FUNCTIONS, QUERY_TEXT_FUNCTIONS, VETTED_FUNCTIONS } from './functions.js';
import { implicitOperators, operatorName, qualifyFunction, typeNameAsText } from './resolution.js';
import { SHOWABLE } from './settings.js';
import { catalogLookup, isBuiltinConfig, REG_FUNCTIONS, typeUse } from './types.js';
import { bindColumnRef, lookupSteps, STAR, type Level, type RefPart } from './scope.js';
import { SETTABLE } from './settings.js';
import type { FunctionUse } from './analysis.js';

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

function columnRef(ctx: Ctx, level: Level, reader: Reader, at: At): void {
  const parts: RefPart[] = reader.list('fields').map((field) => (nodeType(field.node) === 'A_Star' ? STAR : (stringValue(field.node) ?? '')));
  reader.skip('location');
  const text = parts.map((part) => (part === STAR ? '*' : part)).join('.');
  ctx.out.bind(lookupSteps(level));
  const binding = bindColumnRef(level, parts);
  if (binding.columns.length > 0) {
    const shadowed = binding.shadowed.length > 0 ? { shadowed: binding.shadowed } : {};
    ctx.out.columns.push({ candidates: binding.columns, ...shadowed, path: pathOf(at.slot), rewritable: ctx.rewritable, written: false, text });
  }
  for (const { tables, form } of binding.wholeRows) ctx.out.wholeRows.push({ tables, form, text });
}

/**
 * A function is vetted when it is pg_catalog's and on the allowlist. An unqualified vetted name is
 * forwarded qualified (resolution.ts): PostgreSQL would otherwise pick the best-matching overload
 * of that name on the whole search path, a database-defined one included.
 */
function funcCall(ctx: Ctx, level: Level, reader: Reader, at: At): void {
  const parts = names(reader.list('funcname'));
  const name = parts[parts.length - 1] ?? '';
  const schema = parts.length === 2 ? parts[0] : parts.length === 1 ? 'pg_catalog' : undefined;
  const args = reader.list('args');
  const display = parts.join('.');
  if (schema === 'pg_catalog' && name === 'set_config') setConfig(ctx, args);
  else ctx.out.functions.push(describing(functionUse(ctx, schema === 'pg_catalog' ? name : undefined, display, args), schema === 'pg_catalog' && CATALOG_DESCRIBING_FUNCTIONS.has(name)));
  if (schema === 'pg_catalog' && parts.length === 1) qualifyFunction(ctx.out, at, name);
  exprs(ctx, level, args);
  for (const sort of reader.list('agg_order')) sortBy(ctx, level, sort);
  expr(ctx, level, reader.node('agg_filter'));
  struct(ctx, reader, 'over', 'WindowDef', (window) => windowDef(ctx, level, window));
  reader.skip('agg_within_group', 'agg_star', 'agg_distinct', 'func_variadic', 'funcformat', 'location');
  // After the edits below it (they are made first): the call becomes the argument of a cast.
  if (schema === 'pg_catalog' && name === 'pg_typeof') typeNameAsText(ctx.out, at);
}

/** Whether a call of pg_catalog's `name` (undefined: another schema's) is vetted, and if not, why and what to use instead. */
/** Marks a catalog-describing function of pg_catalog's (it runs under allow_catalog; unqualified calls run pg_catalog-qualified). */
function describing(use: FunctionUse, describesCatalog: boolean): FunctionUse {
  return describesCatalog ? { ...use, describesCatalog } : use;
}

function functionUse(ctx: Ctx, name: string | undefined, display: string, args: readonly At[]): FunctionUse {
  if (name === undefined) return { name: display, vetted: false, why: 'is not a built-in (pg_catalog) function' };
  if (QUERY_TEXT_FUNCTIONS.has(name)) return { name: display, vetted: false, why: 'runs query text or reads a table by name' };
  const reg = REG_FUNCTIONS[name];
  if (reg !== undefined) {
    catalogLookup(ctx.out, reg, `${name}()`);
    return { name: display, vetted: true };
  }
  if (name === 'current_setting') return currentSetting(display, args);
  if (CONFIG_FIRST_FUNCTIONS.has(name) && args.length === 2 && !isBuiltinConfig(args[0]?.node) && !isRegconfigCast(args[0]?.node)) {
    return { name: display, vetted: false, why: 'takes a text search configuration first, which is looked up in the catalog by name', instead: `Pass a built-in configuration as a constant: ${name}('english', ...), or use the one-argument form.` };
  }
  return { name: display, vetted: VETTED_FUNCTIONS.has(name) };
}

/** A cast to regconfig is checked where it is (typeUse). */
function isRegconfigCast(node: Node | undefined): boolean {
  const cast = node?.TypeCast as { typeName?: { names?: Node[] } } | undefined;
  const typeNames = cast?.typeName?.names ?? [];
  const last = typeNames[typeNames.length - 1];
  return last !== undefined && stringValue(last) === 'regconfig';
}

/** current_setting('name') reads what SHOW may read: a constant name on that list, never custom parameters. */
function currentSetting(display: string, args: readonly At[]): FunctionUse {
  const first = args[0];
  const setting = first ? constantText(first.node)?.toLowerCase() : undefined;
  if (setting !== undefined && SHOWABLE.has(setting) && args.length <= 2) return { name: display, vetted: true };
  return {
    name: `${display}(${setting === undefined ? '...' : `'${setting}'`})`,
    vetted: false,
    why: 'reads only settings SHOW may read, named by a constant',
    instead: `Settings it may read: ${[...SHOWABLE].join(', ')}.`,
  };
}

/**
 * set_config(name, value, is_local) is SET by another name: the same allowlist applies, and unless
 * is_local is the constant true it changes the session (as SET does), whose connection is then pinned.
 */
function setConfig(ctx: Ctx, args: readonly At[]): void {
  const first = args[0];
  const setting = first ? constantText(first.node)?.toLowerCase() : undefined;
  const detail = `set_config('${setting ?? '?'}', ...)`;
  if (setting === undefined || !SETTABLE.has(setting)) ctx.out.effect('setting', detail, true);
  const local = args[2] ? constantText(args[2].node)?.toLowerCase() : undefined;
  if (!local || !['true', 't', 'on', 'yes', 'y', '1'].includes(local)) ctx.out.sessionChanges.push(detail);
}

export function sortBy(ctx: Ctx, level: Level, at: At): void {
  if (nodeType(at.node) !== 'SortBy') {
    ctx.out.unsupportedConstruct(nodeType(at.node));
    return;
  }
  visit(ctx, at, (reader) => {
    expr(ctx, level, reader.node('node'));
    const useOp = names(reader.list('useOp'));
    if (useOp.length > 1) operatorName(ctx.out, useOp, reader.slot, 'useOp');
    else if (useOp.length === 1) implicitOperators(ctx.out, useOp, 'ORDER BY ... USING', 'Use ASC or DESC instead of USING.');
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

/** A type name (types.ts); `castArg` is the value a cast converts to it. */
export function typeName(ctx: Ctx, level: Level, reader: Reader, castArg?: Node): void {
  typeUse(ctx.out, names(reader.list('names')), reader.slot, castArg);
  exprs(ctx, level, reader.list('typmods'));
  reader.skip('typeOid', 'typemod', 'arrayBounds', 'location');
  if (reader.bool('setof') || reader.bool('pct_type')) ctx.out.unsupportedConstruct('TypeName.setof');
}

const BETWEEN_OPERATORS: Readonly<Record<string, readonly string[]>> = {
  AEXPR_BETWEEN: ['>=', '<='],
  AEXPR_NOT_BETWEEN: ['<', '>'],
  AEXPR_BETWEEN_SYM: ['>=', '<='],
  AEXPR_NOT_BETWEEN_SYM: ['<', '>'],
};

/**
 * The operators an A_Expr looks up by name (resolution.ts). Plain, ANY/ALL and LIKE-family forms
 * can carry a qualified name (PostgreSQL transforms LIKE, ILIKE and SIMILAR TO exactly as their
 * operators); IN lists, BETWEEN, IS DISTINCT FROM and NULLIF cannot.
 */
function aExprOperators(ctx: Ctx, reader: Reader): void {
  const kind = reader.string('kind') ?? 'AEXPR_OP';
  const name = names(reader.list('name'));
  const display = name.join('.');
  switch (kind) {
    case 'AEXPR_OP':
    case 'AEXPR_OP_ANY':
    case 'AEXPR_OP_ALL':
      operatorName(ctx.out, name, reader.slot, 'name');
      return;
    case 'AEXPR_LIKE':
    case 'AEXPR_ILIKE':
    case 'AEXPR_SIMILAR':
      operatorName(ctx.out, name, reader.slot, 'name', { field: 'kind', value: 'AEXPR_OP' });
      return;
    case 'AEXPR_IN':
      implicitOperators(ctx.out, name, 'IN (...)', `Write x OPERATOR(pg_catalog.${display}) ANY (ARRAY[...]) instead.`);
      return;
    case 'AEXPR_DISTINCT':
    case 'AEXPR_NOT_DISTINCT':
      implicitOperators(ctx.out, name, 'IS DISTINCT FROM', 'Compare with OPERATOR(pg_catalog.=) and IS NULL instead.');
      return;
    case 'AEXPR_NULLIF':
      implicitOperators(ctx.out, name, 'NULLIF', 'Write CASE WHEN a OPERATOR(pg_catalog.=) b THEN NULL ELSE a END instead.');
      return;
    default: {
      const between = BETWEEN_OPERATORS[kind];
      if (between) {
        const [low, high] = between;
        const join = kind.startsWith('AEXPR_NOT') ? 'OR' : 'AND';
        implicitOperators(ctx.out, between, kind.startsWith('AEXPR_NOT') ? 'NOT BETWEEN' : 'BETWEEN', `Write x OPERATOR(pg_catalog.${low}) low ${join} x OPERATOR(pg_catalog.${high}) high instead.`);
      }
      else ctx.out.unsupportedConstruct('an operator expression the analyzer does not know');
    }
  }
}

function subLink(ctx: Ctx, level: Level, reader: Reader): void {
  const kind = reader.string('subLinkType');
  expr(ctx, level, reader.node('testexpr'));
  const operName = names(reader.list('operName'));
  // `x IN (SELECT ...)` has no operName and compares with `=`.
  if (kind === 'ANY_SUBLINK' || kind === 'ALL_SUBLINK' || kind === 'ROWCOMPARE_SUBLINK') operatorName(ctx.out, operName.length > 0 ? operName : ['='], reader.slot, 'operName');
  const subselect = reader.node('subselect');
  if (subselect) ctx.query(ctx, level, subselect, { observable: kind !== 'EXISTS_SUBLINK' });
  reader.skip('location', 'xpr', 'subLinkId');
}

const handlers: Readonly<Record<string, Handler>> = {
  ColumnRef: columnRef,
  FuncCall: funcCall,
  NamedArgExpr: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    reader.skip('name', 'argnumber', 'location', 'xpr');
  },
  SubLink: (ctx, level, reader) => subLink(ctx, level, reader),
  A_Const: (_ctx, _level, reader) => reader.skip('ival', 'fval', 'boolval', 'sval', 'bsval', 'isnull', 'location'),
  ParamRef: (_ctx, _level, reader) => reader.skip('number', 'location'),
  SQLValueFunction: (_ctx, _level, reader) => reader.skip('op', 'typmod', 'type', 'xpr', 'location'),
  SetToDefault: (_ctx, _level, reader) => reader.skip('location', 'xpr', 'typeId', 'typeMod', 'collation'),
  A_Expr: (ctx, level, reader) => {
    aExprOperators(ctx, reader);
    expr(ctx, level, reader.node('lexpr'));
    expr(ctx, level, reader.node('rexpr'));
    reader.skip('location');
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
    const arg = reader.node('arg');
    expr(ctx, level, arg);
    struct(ctx, reader, 'typeName', 'TypeName', (type) => typeName(ctx, level, type, arg?.node));
    reader.skip('location');
  },
  CollateClause: (ctx, level, reader) => {
    expr(ctx, level, reader.node('arg'));
    reader.skip('collname', 'location');
  },
  CaseExpr: (ctx, level, reader) => {
    const arg = reader.node('arg');
    if (arg) implicitOperators(ctx.out, ['='], 'CASE x WHEN', 'Write CASE WHEN x OPERATOR(pg_catalog.=) value THEN ...');
    expr(ctx, level, arg);
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
