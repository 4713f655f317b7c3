import type { Collector } from './analysis.js';
import { isObject, pathOf, type At, type Node, type Slot } from './ast.js';

/**
 * What an unqualified function or operator name runs. PostgreSQL picks the best-matching
 * signature among every function (operator) of that name on the search path, so a database-defined
 * `public.md5(integer)` wins over `pg_catalog.md5(text)` for `md5(1)` whatever the order of the
 * path. A vetted call therefore runs schema-qualified (`pg_catalog.md5(1)`): the analysis records a
 * tree edit for it, made before the statement is forwarded.
 *
 * Operators resolve the same way, but qualifying them changes the syntax (`a OPERATOR(pg_catalog.=)
 * b`) and breaks operators of extension types, so they are qualified only where the upstream
 * catalog says the name is also defined outside pg_catalog on the search path; where the syntax
 * cannot carry a qualified operator, the statement is refused with what to write instead.
 */

const PG_CATALOG = 'pg_catalog';
const str = (sval: string): Node => ({ String: { sval } });

/** Records the edit that makes the FuncCall at `at` call `pg_catalog.<name>`. */
export function qualifyFunction(out: Collector, at: At, name: string): void {
  out.edits.push({
    path: pathOf(at.slot),
    what: `${name}()`,
    apply: (node) => {
      const call = node.FuncCall;
      if (!isObject(call) || !Array.isArray(call.funcname) || call.funcname.length !== 1) return `${name}() is not where the analysis found it`;
      call.funcname = [str(PG_CATALOG), str(name)];
      return undefined;
    },
  });
}

/** Schemas on the search path, other than pg_catalog, that define an operator named `name` (none without a catalog). */
function shadowing(out: Collector, name: string): readonly string[] {
  const catalog = out.catalog;
  if (!catalog) return [];
  return catalog.operatorSchemas(name).filter((schema) => out.searchPath.schemas.includes(schema));
}

function refuseOperator(out: Collector, name: string, schemas: readonly string[], construct: string, instead: string): void {
  out.functions.push({
    name: `operator ${name}`,
    vetted: false,
    why: `is also defined in schema ${schemas.join(', ')}, so ${construct} could run a database-defined operator instead of the built-in one`,
    instead,
  });
}

/**
 * An operator name written in the statement (A_Expr, SubLink operName), at `slot` (the fields
 * object holding it, under `key`): a schema other than pg_catalog could run any function; an
 * unqualified name that the catalog says is shadowed is qualified. `retype` also changes the
 * node's kind (LIKE to a plain operator: PostgreSQL transforms both alike).
 */
export function operatorName(out: Collector, parts: readonly string[], slot: Slot | null, key: string, retype?: { field: string; value: string }): void {
  if (parts.length > 1) {
    if (parts[0] !== PG_CATALOG) out.functions.push({ name: `OPERATOR(${parts.join('.')})`, vetted: false, kind: 'operator' });
    return;
  }
  const name = parts[0] ?? '=';
  if (shadowing(out, name).length === 0) return;
  out.edits.push({
    path: pathOf(slot),
    what: `operator ${name}`,
    apply: (fields) => {
      fields[key] = [str(PG_CATALOG), str(name)];
      if (retype) fields[retype.field] = retype.value;
      return undefined;
    },
  });
}

/**
 * A construct that looks up operators by name but has no syntax for a qualified one (IN lists,
 * BETWEEN, IS DISTINCT FROM, NULLIF, CASE x WHEN, JOIN USING, ORDER BY ... USING): refused when
 * the catalog says one of them is shadowed.
 */
export function implicitOperators(out: Collector, names: readonly string[], construct: string, instead: string): void {
  for (const name of names) {
    const schemas = shadowing(out, name);
    if (schemas.length > 0) {
      refuseOperator(out, name, schemas, construct, instead);
      return;
    }
  }
}

/**
 * pg_typeof returns regtype, and a regtype compared with a string constant looks the string up as
 * a type name (`pg_typeof(x) = 'private.t'` errors when there is no such type): the call runs as
 * `pg_typeof(x)::text`, whose output reads the same and compares as text. The node is changed in
 * place, so this edit must come after every edit whose path passes through it.
 */
export function typeNameAsText(out: Collector, at: At): void {
  out.edits.push({
    path: pathOf(at.slot),
    what: 'pg_typeof()',
    apply: (node) => {
      const call = node.FuncCall;
      if (!isObject(call)) return 'pg_typeof() is not where the analysis found it';
      delete node.FuncCall;
      node.TypeCast = { arg: { FuncCall: call }, typeName: { names: [str('text')], typemod: -1 } };
      return undefined;
    },
  });
}
