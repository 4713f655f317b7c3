import type { Collector } from './analysis.js';
import { constantText, isObject, type Node, type Slot } from './ast.js';
import { BUILTIN_TEXT_SEARCH_CONFIGS } from './functions.js';
import { resolveRelation } from './names.js';

/**
 * Type names in casts, column definitions and DDL. A cast runs the target type's input function,
 * and a domain's CHECK constraints can call any function, so a type is trusted only when it is
 * one of PostgreSQL 17's built-in pg_catalog types below (their I/O and casts are built-in C
 * code; a cast between built-in types can only be redefined by a superuser). Any other name is a
 * table's row type at best: it is recorded as a use of that relation, which the allowed-tables
 * rule then checks (`null::orders` for jsonb_populate_record is fine when orders is allowed;
 * enums, domains and user types are refused).
 *
 * The reg* types turn names into catalog lookups (`'public.secrets'::regclass` says whether a
 * table exists, `1259::regclass` names one): a cast to one is a read of the catalog it looks in.
 */
export const BUILTIN_TYPES: ReadonlySet<string> = new Set(
  `bit bool box bpchar bytea char cidr circle date datemultirange daterange float4 float8 inet int2 int4 int4multirange int4range
  int8 int8multirange int8range interval json jsonb jsonpath line lseg macaddr macaddr8 money name numeric nummultirange numrange
  oid path pg_lsn point polygon text time timestamp timestamptz timetz tsmultirange tsquery tsrange tstzmultirange tstzrange
  tsvector uuid varbit varchar xml record smallserial serial bigserial serial2 serial4 serial8`.split(/\s+/),
);

/** Each reg* type and the catalog its input and output functions read. */
export const REG_TYPES: Readonly<Record<string, string>> = {
  regclass: 'pg_class',
  regproc: 'pg_proc',
  regprocedure: 'pg_proc',
  regoper: 'pg_operator',
  regoperator: 'pg_operator',
  regtype: 'pg_type',
  regnamespace: 'pg_namespace',
  regrole: 'pg_roles',
  regconfig: 'pg_ts_config',
  regdictionary: 'pg_ts_dict',
  regcollation: 'pg_collation',
};

/** The to_reg* lookup functions and the catalog each reads. */
export const REG_FUNCTIONS: Readonly<Record<string, string>> = {
  to_regclass: 'pg_class',
  to_regproc: 'pg_proc',
  to_regprocedure: 'pg_proc',
  to_regoper: 'pg_operator',
  to_regoperator: 'pg_operator',
  to_regtype: 'pg_type',
  to_regtypemod: 'pg_type',
  to_regnamespace: 'pg_namespace',
  to_regrole: 'pg_roles',
  to_regcollation: 'pg_collation',
};

/** A read of `pg_catalog.<catalog>` by a name lookup the statement makes (`a cast to regclass`). */
export function catalogLookup(out: Collector, catalog: string, via: string): void {
  out.relations.push({ candidates: [{ schema: 'pg_catalog', name: catalog }], written: false, text: via, via });
}

/** Whether `node` is a constant naming a built-in text search configuration (`'english'`, `'pg_catalog.english'`). */
export function isBuiltinConfig(node: Node | undefined): boolean {
  const text = node ? constantText(node) : undefined;
  if (text === undefined) return false;
  return BUILTIN_TEXT_SEARCH_CONFIGS.has(text.startsWith('pg_catalog.') ? text.slice('pg_catalog.'.length) : text);
}

/**
 * Checks one TypeName's `names` (its fields object at `slot`). `castArg` is the value cast to it,
 * when it is a cast: a constant naming a built-in text search configuration may become regconfig.
 */
export function typeUse(out: Collector, parts: readonly string[], slot: Slot | null, castArg?: Node): void {
  const name = parts[parts.length - 1] ?? '';
  const schema = parts.length >= 2 ? parts[parts.length - 2] : undefined;
  const display = parts.join('.');
  if (parts.length > 2) {
    out.unsupportedConstruct(`the type name ${display} (a type name with a database name)`);
    return;
  }
  const inCatalog = schema === 'pg_catalog' || (schema === undefined && out.searchPath.catalogFirst);
  const reg = REG_TYPES[name];
  if ((schema === undefined || schema === 'pg_catalog') && reg !== undefined) {
    if (name === 'regconfig' && isBuiltinConfig(castArg)) return;
    catalogLookup(out, reg, `a cast to ${name}`);
    return;
  }
  if (BUILTIN_TYPES.has(name) && (schema === undefined || schema === 'pg_catalog')) {
    if (!inCatalog) out.unsupportedConstruct(`the type name ${name} while the search_path lists a schema before pg_catalog (write pg_catalog.${name})`);
    return;
  }
  out.relations.push({ candidates: resolveRelation(schema, name, out.searchPath), written: false, text: display, via: `the type name ${display}` });
}

/** Built-in pg_catalog type names, reg* types included: `pg_catalog.X` and `X` are one type while pg_catalog is searched first. */
const CATALOG_TYPES: ReadonlySet<string> = new Set([...BUILTIN_TYPES, ...Object.keys(REG_TYPES)]);

function unqualifyType(fields: unknown): void {
  if (!isObject(fields) || !Array.isArray(fields.names) || fields.names.length !== 2) return;
  const [schema, name] = fields.names as Node[];
  const type = name && isObject(name.String) ? name.String.sval : undefined;
  if (schema && isObject(schema.String) && schema.String.sval === 'pg_catalog' && typeof type === 'string' && CATALOG_TYPES.has(type)) fields.names = [name];
}

/**
 * Writes every built-in type name of a parse tree unqualified, in place. The deparser prints
 * `pg_catalog.text` as `text`: with pg_catalog searched first the two are the same type, so a
 * rewrite's round trip is compared on trees made canonical this way (mask.ts).
 */
export function unqualifyBuiltinTypes(tree: unknown): void {
  if (Array.isArray(tree)) {
    for (const item of tree) unqualifyBuiltinTypes(item);
    return;
  }
  if (!isObject(tree)) return;
  for (const key of Object.keys(tree)) {
    const value = tree[key];
    if (key === 'typeName' || key === 'TypeName') unqualifyType(value);
    unqualifyBuiltinTypes(value);
  }
}
