import { cloneTree, getAt, isObject, type Node, type Path } from './ast.js';

/**
 * Which of a statement's own predicates may run inside a row filter's stand-in subquery, before
 * the filter has hidden anything: as PostgreSQL does for security_barrier views and row-level
 * security, only those that cannot tell of the rows they see (leakproof). A conjunct qualifies when
 * it reads columns of the one filtered relation only, through constants, column references, AND,
 * OR, NOT, IS [NOT] NULL, [NOT] IN lists of constants and operators whose function the upstream marks leakproof for exactly the
 * operand types PostgreSQL resolves (an exact match, so no cast runs on a column). Anything else
 * (a function call, a cast, a subquery, a masked column, a parameter, whose declared type the
 * decision does not know) keeps the conjunct outside the subquery only.
 */

/** The filtered relation as one FROM item sees it, and what the upstream says of its types and operators. */
export interface PushdownTarget {
  /** The name the statement reads it by: its alias, else its table name. */
  readonly rangeName: string;
  /** The name the copied columns are qualified by inside the stand-in (the table's name). */
  readonly innerName: string;
  readonly columns: readonly string[];
  /** Its masked columns: a copy reading one would compare the value the mask hides. */
  readonly masked: ReadonlySet<string>;
  /** Each column's type oid, in the order of columns; absent: nothing is pushed. */
  readonly types: readonly number[] | undefined;
  /** Whether it is its SELECT's only FROM item, so that a bare column name can bind nowhere else. */
  readonly soleItem: boolean;
  /** Whether the pg_catalog operator `name(left, right)` exists, no other schema defines `name`, and its function is leakproof. */
  leakproof(name: string, left: number, right: number): boolean;
}

const BOOL = 16;
const INT4 = 23;
/** An untyped literal ('text'), which PostgreSQL resolves to the other operand's type. */
const UNKNOWN = 0;

const fieldNames = (ref: Node): string[] | undefined => {
  const fields = Array.isArray(ref.fields) ? (ref.fields as Node[]) : [];
  const names = fields.map((field) => (isObject(field.String) && typeof field.String.sval === 'string' ? field.String.sval : undefined));
  return names.every((name) => name !== undefined) ? (names as string[]) : undefined;
};

/** The column of the target a reference names, or undefined when it may name anything else. */
function targetColumn(ref: Node, target: PushdownTarget): string | undefined {
  const names = fieldNames(ref);
  if (!names) return undefined;
  const column = names.length === 2 && names[0] === target.rangeName ? names[1] : names.length === 1 && target.soleItem ? names[0] : undefined;
  return column !== undefined && target.columns.includes(column) && !target.masked.has(column) ? column : undefined;
}

/** The type oid of an operand (UNKNOWN for an untyped literal), or undefined when it is neither a target column nor a plain constant. */
function operandType(node: unknown, target: PushdownTarget): number | undefined {
  if (!isObject(node)) return undefined;
  if (isObject(node.ColumnRef)) {
    const column = targetColumn(node.ColumnRef, target);
    return column === undefined ? undefined : target.types?.[target.columns.indexOf(column)];
  }
  const constant = node.A_Const;
  if (!isObject(constant)) return undefined;
  if (constant.isnull === true || isObject(constant.sval)) return UNKNOWN;
  if (isObject(constant.ival)) return INT4;
  if (isObject(constant.boolval)) return BOOL;
  return undefined;
}

const isColumn = (node: unknown): boolean => isObject(node) && isObject(node.ColumnRef);

/** Whether `node` is a boolean expression of the kinds above over the target's columns. */
function leakproofExpression(node: unknown, target: PushdownTarget): boolean {
  if (!isObject(node)) return false;
  const bool = node.BoolExpr;
  if (isObject(bool)) return Array.isArray(bool.args) && bool.args.length > 0 && bool.args.every((arg) => leakproofExpression(arg, target));
  const test = node.NullTest;
  if (isObject(test)) return isColumn(test.arg) && operandType(test.arg, target) !== undefined;
  if (isColumn(node)) return operandType(node, target) === BOOL;
  const expr = node.A_Expr;
  const operator = isObject(expr) && Array.isArray(expr.name) && expr.name.length === 1 && isObject((expr.name[0] as Node).String) ? (expr.name[0] as { String: Node }).String.sval : undefined;
  if (!isObject(expr) || typeof operator !== 'string') return false;
  if (expr.kind === 'AEXPR_IN') return leakproofIn(operator, expr, target);
  if (expr.kind !== 'AEXPR_OP' || !(isColumn(expr.lexpr) || isColumn(expr.rexpr))) return false;
  const left = operandType(expr.lexpr, target);
  const right = operandType(expr.rexpr, target);
  if (left === undefined || right === undefined || (left === UNKNOWN && right === UNKNOWN)) return false;
  // PostgreSQL takes an untyped literal to be of the other operand's type when that finds an exact match.
  return target.leakproof(operator, left === UNKNOWN ? right : left, right === UNKNOWN ? left : right);
}

/**
 * `column [NOT] IN (constants)`: when every constant is untyped or of the column's type, their
 * common type is the column's and each comparison its exact `operator(type, type)`.
 */
function leakproofIn(operator: string, expr: Node, target: PushdownTarget): boolean {
  const type = isColumn(expr.lexpr) ? operandType(expr.lexpr, target) : undefined;
  const list = isObject(expr.rexpr) && isObject(expr.rexpr.List) && Array.isArray(expr.rexpr.List.items) ? (expr.rexpr.List.items as unknown[]) : [];
  if (type === undefined || list.length === 0) return false;
  return list.every((item) => !isColumn(item) && [UNKNOWN, type].includes(operandType(item, target) ?? -1)) && target.leakproof(operator, type, type);
}

/** A copy of the conjunct with each column reference qualified by the stand-in's table name. */
function innerCopy(conjunct: Node, target: PushdownTarget): Node {
  const copy = cloneTree(conjunct);
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) walk(item);
    if (!isObject(value)) return;
    if (isObject(value.ColumnRef)) {
      const column = targetColumn(value.ColumnRef, target)!;
      value.ColumnRef.fields = [{ String: { sval: target.innerName } }, { String: { sval: column } }];
      return;
    }
    for (const key of Object.keys(value)) walk(value[key]);
  };
  walk(copy);
  return copy;
}

/** The conjuncts of `conjuncts` that may run before the filter, each a copy qualified for the stand-in. */
export function pushableConjuncts(conjuncts: readonly Node[], target: PushdownTarget): Node[] {
  if (target.types === undefined || target.types.length !== target.columns.length) return [];
  return conjuncts.filter((conjunct) => leakproofExpression(conjunct, target)).map((conjunct) => innerCopy(conjunct, target));
}

const conjunctsOf = (node: unknown): Node[] => {
  if (!isObject(node)) return [];
  const bool = node.BoolExpr;
  return isObject(bool) && bool.boolop === 'AND_EXPR' && Array.isArray(bool.args) ? (bool.args as Node[]) : [node];
};

/** The top-level conjuncts that bound a FROM item and its SELECT's view of it. */
export interface ScopeConjuncts {
  readonly conjuncts: readonly Node[];
  /** Whether it is its SELECT's only FROM item. */
  readonly soleItem: boolean;
}

/**
 * The conjuncts that filter the FROM item at `path` (the slot of its RangeVar) exactly as they would
 * filter its rows alone: the ON conditions of the inner joins it sits in and, when every join above
 * it is inner, its SELECT's WHERE. An outer join stops the walk (its conditions, and a WHERE over
 * its nullable side, do not filter that side's rows alone); a FROM item that is not a SELECT's
 * (UPDATE ... FROM, DELETE ... USING) gets none.
 */
export function scopeConjuncts(stmt: Node, path: Path): ScopeConjuncts {
  const conjuncts: Node[] = [];
  let at = path.slice(0, -1);
  for (;;) {
    const slot = at[at.length - 1];
    if (slot === 'larg' || slot === 'rarg') {
      const join = getAt(stmt, at.slice(0, -1));
      if (!isObject(join) || join.jointype !== 'JOIN_INNER') return { conjuncts, soleItem: false };
      conjuncts.push(...conjunctsOf(join.quals));
      at = at.slice(0, -2);
      continue;
    }
    // A SELECT's FROM list, the SELECT standing alone or as an arm of a set operation (a join's larg holds a FROM item, never a FROM list).
    const owner = at[at.length - 3];
    if (typeof slot !== 'number' || at[at.length - 2] !== 'fromClause' || (owner !== 'SelectStmt' && owner !== 'larg' && owner !== 'rarg')) return { conjuncts, soleItem: false };
    const select = getAt(stmt, at.slice(0, -2));
    if (!isObject(select)) return { conjuncts, soleItem: false };
    const from = Array.isArray(select.fromClause) ? select.fromClause : [];
    const soleItem = from.length === 1 && at.length === path.length - 1;
    return { conjuncts: [...conjuncts, ...conjunctsOf(select.whereClause)], soleItem };
  }
}
