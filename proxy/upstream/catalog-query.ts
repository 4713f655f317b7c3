import { createHash } from 'node:crypto';
import type { RelationName } from '../policy/names.js';
import type { CatalogRelation, CatalogRelationKind, UpstreamCatalog } from '../policy/upstream-catalog.js';
import { cacheableBuiltin } from '../cache/cacheable.js';

/**
 * What the gateway reads of an upstream database's catalog, in one statement of catalog reads only
 * (never user data): every table, partitioned table, view, materialized view and foreign table
 * outside pg_toast and temporary schemas, with its columns in order and its plain-inheritance
 * children (partitions are not listed: a partitioned table's partitions count as the table), the
 * tables a write to it may change too (its partition tree, foreign keys that cascade from it) and
 * whether a write to it runs a trigger or rule of the database's, a view's or materialized view's own relations,
 * the functions a view calls other than immutable built-ins and stable built-in operators (from its
 * stored query tree, which names every function, operator, aggregate, window function and sampling
 * method it runs: the catalog records no dependency on a built-in), whether row-level security
 * policies apply to reads of it, the other members of its partition tree (ancestors and partitions),
 * its columns typed as a relation's rows, the columns a view's definition names (`*` for a
 * relation it reads whole: a whole-row Var, `:varattno 0` in its stored query tree, or no column
 * named) and its columns' type oids; for each function and operator name, the schemas
 * other than pg_catalog that define one; and the pg_catalog operators whose function is leakproof,
 * by name and operand type oids.
 * One row per item, each a JSON array: a row stays small whatever the size of the catalog, and
 * the rows' order is fixed, so the same catalog always reads as the same text.
 */
export const CATALOG_SQL = `select k, v from (
  select 'r' as k, pg_catalog.json_build_array(n.nspname, c.relname, c.relkind,
    coalesce((select pg_catalog.json_agg(a.attname order by a.attnum) from pg_catalog.pg_attribute a
      where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(cn.nspname, cc.relname) order by cn.nspname, cc.relname)
      from pg_catalog.pg_inherits i join pg_catalog.pg_class cc on cc.oid = i.inhrelid join pg_catalog.pg_namespace cn on cn.oid = cc.relnamespace
      where i.inhparent = c.oid and c.relkind <> 'p'), '[]'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(rn.nspname, rc.relname) order by rn.nspname, rc.relname)
      from (select a.relid from pg_catalog.pg_partition_ancestors(c.oid) a
        union select t.relid from pg_catalog.pg_partition_tree(c.oid) t
        union select f.conrelid from pg_catalog.pg_constraint f where f.contype = 'f' and f.confrelid = c.oid
          and (f.confdeltype in ('c', 'n', 'd') or f.confupdtype in ('c', 'n', 'd'))) reached
      join pg_catalog.pg_class rc on rc.oid = reached.relid join pg_catalog.pg_namespace rn on rn.oid = rc.relnamespace
      where reached.relid <> c.oid), '[]'),
    exists (select from pg_catalog.pg_trigger g where g.tgrelid = c.oid and not g.tgisinternal)
      or exists (select from pg_catalog.pg_rewrite w where w.ev_class = c.oid and w.rulename <> '_RETURN'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(vn.nspname, vc.relname) order by vn.nspname, vc.relname)
      from (select distinct d.refobjid from pg_catalog.pg_rewrite w join pg_catalog.pg_depend d on d.objid = w.oid
        where c.relkind in ('v', 'm') and w.ev_class = c.oid and w.rulename = '_RETURN' and d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
          and d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass and d.refobjid <> c.oid) used
      join pg_catalog.pg_class vc on vc.oid = used.refobjid join pg_catalog.pg_namespace vn on vn.oid = vc.relnamespace), '[]'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(fn.nspname, f.proname, f.provolatile) order by fn.nspname, f.proname, f.provolatile)
      from (select distinct m[1] = 'opfuncid' as op, m[2]::pg_catalog.oid as fid
        from pg_catalog.pg_rewrite w, pg_catalog.regexp_matches(w.ev_action::pg_catalog.text, ':(funcid|opfuncid|aggfnoid|winfnoid|tsmhandler) (\\d+)', 'g') m
        where c.relkind = 'v' and w.ev_class = c.oid and w.rulename = '_RETURN') called
      join pg_catalog.pg_proc f on f.oid = called.fid join pg_catalog.pg_namespace fn on fn.oid = f.pronamespace
      where fn.nspname <> 'pg_catalog' or f.provolatile = 'v' or (not called.op and f.provolatile <> 'i')), '[]'),
    c.relrowsecurity and exists (select from pg_catalog.pg_policy rp where rp.polrelid = c.oid),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(tn.nspname, tc.relname) order by tn.nspname, tc.relname)
      from (select a.relid from pg_catalog.pg_partition_ancestors(c.oid) a union select t.relid from pg_catalog.pg_partition_tree(c.oid) t) tree
      join pg_catalog.pg_class tc on tc.oid = tree.relid join pg_catalog.pg_namespace tn on tn.oid = tc.relnamespace
      where tree.relid <> c.oid), '[]'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(a.attname, en.nspname, ec.relname) order by a.attnum)
      from pg_catalog.pg_attribute a join pg_catalog.pg_type t on t.oid = a.atttypid
        join pg_catalog.pg_type b on b.oid = case when t.typtype = 'd' then t.typbasetype else t.oid end
        join pg_catalog.pg_type e on e.oid = case when b.typcategory = 'A' then b.typelem else b.oid end
        join pg_catalog.pg_class ec on ec.oid = e.typrelid join pg_catalog.pg_namespace en on en.oid = ec.relnamespace
      where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(un.nspname, uc.relname, used.col) order by un.nspname, uc.relname, used.col)
      from (select distinct d.refobjid, case when d.refobjsubid = 0 or w.whole then '*' else ua.attname::pg_catalog.text end as col
        from (select w.oid, w.ev_action::pg_catalog.text ~ ':varattno 0 ' as whole from pg_catalog.pg_rewrite w
          where c.relkind in ('v', 'm') and w.ev_class = c.oid and w.rulename = '_RETURN') w
        join pg_catalog.pg_depend d on d.objid = w.oid
          left join pg_catalog.pg_attribute ua on ua.attrelid = d.refobjid and ua.attnum = d.refobjsubid
        where d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass and d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass and d.refobjid <> c.oid) used
      join pg_catalog.pg_class uc on uc.oid = used.refobjid join pg_catalog.pg_namespace un on un.oid = uc.relnamespace), '[]'),
    coalesce((select pg_catalog.json_agg(a.atttypid::pg_catalog.int8 order by a.attnum) from pg_catalog.pg_attribute a
      where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]'))::text as v
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  where c.relkind in ('r', 'p', 'v', 'm', 'f') and n.nspname <> 'pg_toast' and n.nspname !~ '^pg_(toast_)?temp_'
  union all
  select 'f', pg_catalog.json_build_array(p.proname, pg_catalog.json_agg(distinct n.nspname order by n.nspname))::text
  from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
  where n.nspname <> 'pg_catalog' group by p.proname
  union all
  select 'o', pg_catalog.json_build_array(o.oprname, pg_catalog.json_agg(distinct n.nspname order by n.nspname))::text
  from pg_catalog.pg_operator o join pg_catalog.pg_namespace n on n.oid = o.oprnamespace
  where n.nspname <> 'pg_catalog' group by o.oprname
  union all
  select 'l', pg_catalog.json_build_array(o.oprname, o.oprleft::pg_catalog.int8, o.oprright::pg_catalog.int8)::text
  from pg_catalog.pg_operator o join pg_catalog.pg_proc p on p.oid = o.oprcode
  where o.oprnamespace = 'pg_catalog'::pg_catalog.regnamespace and p.proleakproof
) items order by k collate "C", v collate "C"`;

/**
 * Whether a function a view calls, as CATALOG_SQL lists it (`[schema, name, provolatile]`: never an
 * immutable built-in), leaves its result fixed by the view's relations, as the result cache needs:
 * a stable built-in the cache accepts in a statement, nothing volatile, nothing of the database's.
 */
function cacheableCall([schema, name, volatility]: readonly string[]): boolean {
  return schema === 'pg_catalog' && volatility !== 'v' && name !== undefined && cacheableBuiltin(name);
}

const KINDS: Readonly<Record<string, CatalogRelationKind>> = { r: 'table', p: 'partitioned', v: 'view', m: 'matview', f: 'foreign' };

/** The rows of CATALOG_SQL did not have the shape it gives. */
export class CatalogShapeError extends Error {
  override readonly name = 'CatalogShapeError';
}

const key = (schema: string, name: string): string => `${schema}\u0000${name}`;
const operatorKey = (name: string, left: number, right: number): string => `${name}\u0000${left}\u0000${right}`;

function strings(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw new CatalogShapeError(`${what} is not a list of names`);
  return value as string[];
}

/** `[schema, name]` pairs as relation names; `what` names one of them in the error. */
function relationNames(pairs: readonly unknown[], what: string): RelationName[] {
  return pairs.map((pair) => {
    const [schema, name] = strings(pair, what);
    if (schema === undefined || name === undefined) throw new CatalogShapeError(`${what} without its name`);
    return { schema, name };
  });
}

/** `[schema, table, column]` as a table's column; `what` names one of them in the error. */
function tableColumn(triple: unknown, what: string): { table: RelationName; column: string } {
  const [schema, name, column] = strings(triple, what);
  if (schema === undefined || name === undefined || column === undefined) throw new CatalogShapeError(`${what} without its table or name`);
  return { table: { schema, name }, column };
}

class Snapshot implements UpstreamCatalog {
  constructor(
    readonly version: string,
    private readonly relations: ReadonlyMap<string, CatalogRelation>,
    private readonly functions: ReadonlyMap<string, readonly string[]>,
    private readonly operators: ReadonlyMap<string, readonly string[]>,
    private readonly leakproof: ReadonlySet<string>,
  ) {}

  relation(name: RelationName): CatalogRelation | undefined {
    return this.relations.get(key(name.schema, name.name));
  }

  functionSchemas(name: string): readonly string[] {
    return this.functions.get(name) ?? [];
  }

  operatorSchemas(name: string): readonly string[] {
    return this.operators.get(name) ?? [];
  }

  leakproofOperator(name: string, left: number, right: number): boolean {
    // An operator of the same name elsewhere on the search path could be the one PostgreSQL picks.
    return this.operatorSchemas(name).length === 0 && this.leakproof.has(operatorKey(name, left, right));
  }
}

/**
 * The catalog from the rows of CATALOG_SQL (`[kind, json]` text pairs, in the order read). Its
 * version is a digest of the rows: two reads of an unchanged catalog give the same version, so
 * the decisions cached under it stay valid across refreshes.
 */
export function catalogFromRows(rows: readonly (readonly (string | null)[])[]): UpstreamCatalog {
  const hash = createHash('sha256');
  const relations = new Map<string, CatalogRelation>();
  const functions = new Map<string, readonly string[]>();
  const operators = new Map<string, readonly string[]>();
  const leakproof = new Set<string>();
  for (const [kind, text] of rows) {
    if (typeof kind !== 'string' || typeof text !== 'string') throw new CatalogShapeError('a catalog row without its kind or value');
    hash.update(kind).update('\u0000').update(text).update('\n');
    let item: unknown;
    try {
      item = JSON.parse(text);
    } catch {
      throw new CatalogShapeError('a catalog row that is not JSON');
    }
    if (!Array.isArray(item)) throw new CatalogShapeError('a catalog row that is not a list');
    if (kind === 'r') {
      const [schema, name, relkind, columns, inheritors, reach, runsCode, viewReads, viewCalls, rowSecurity, partitionTree, rowColumns, viewColumns, columnTypes] = item as unknown[];
      const relationKind = KINDS[String(relkind)];
      if (typeof schema !== 'string' || typeof name !== 'string' || !relationKind) throw new CatalogShapeError('a relation row without schema, name or kind');
      if (!Array.isArray(inheritors)) throw new CatalogShapeError(`the inheritors of ${schema}.${name} are not a list`);
      if (!Array.isArray(reach) || typeof runsCode !== 'boolean') throw new CatalogShapeError(`what a write to ${schema}.${name} reaches is not a list and a flag`);
      if (!Array.isArray(viewReads)) throw new CatalogShapeError(`the relations ${schema}.${name} reads are not a list`);
      if (!Array.isArray(viewCalls) || typeof rowSecurity !== 'boolean') throw new CatalogShapeError(`the functions ${schema}.${name} calls are not a list and a flag`);
      if (!Array.isArray(partitionTree)) throw new CatalogShapeError(`the partition tree of ${schema}.${name} is not a list`);
      if (!Array.isArray(rowColumns)) throw new CatalogShapeError(`the row-typed columns of ${schema}.${name} are not a list`);
      if (viewColumns !== undefined && !Array.isArray(viewColumns)) throw new CatalogShapeError(`the columns ${schema}.${name} reads are not a list`);
      if (columnTypes !== undefined && !(Array.isArray(columnTypes) && columnTypes.every(Number.isInteger))) throw new CatalogShapeError(`the column types of ${schema}.${name} are not a list of oids`);
      relations.set(key(schema, name), {
        kind: relationKind,
        columns: strings(columns, `the columns of ${schema}.${name}`),
        inheritors: relationNames(inheritors, `an inheritor of ${schema}.${name}`),
        writesReach: relationNames(reach, `a table a write to ${schema}.${name} reaches`),
        writesRunCode: runsCode,
        viewReads: relationNames(viewReads, `a relation ${schema}.${name} reads`),
        partitionTree: relationNames(partitionTree, `a member of the partition tree of ${schema}.${name}`),
        rowColumns: rowColumns.map((triple) => {
          const [column, ofSchema, ofName] = strings(triple, `a row-typed column of ${schema}.${name}`);
          if (column === undefined || ofSchema === undefined || ofName === undefined) throw new CatalogShapeError(`a row-typed column of ${schema}.${name} without its type's relation`);
          return { column, of: { schema: ofSchema, name: ofName } };
        }),
        readsRunCode: rowSecurity || viewCalls.some((call) => !cacheableCall(strings(call, `a function ${schema}.${name} calls`))),
        ...(viewColumns === undefined ? {} : { viewColumns: viewColumns.map((triple) => tableColumn(triple, `a column ${schema}.${name} reads`)) }),
        ...(columnTypes === undefined ? {} : { columnTypes: columnTypes as number[] }),
      });
    } else if (kind === 'f' || kind === 'o') {
      const [name, schemas] = item as unknown[];
      if (typeof name !== 'string') throw new CatalogShapeError('a function or operator row without its name');
      (kind === 'f' ? functions : operators).set(name, strings(schemas, `the schemas of ${name}`).sort());
    } else if (kind === 'l') {
      const [name, left, right] = item as unknown[];
      if (typeof name !== 'string' || !Number.isInteger(left) || !Number.isInteger(right)) throw new CatalogShapeError('a leakproof operator row without its name and operand types');
      leakproof.add(operatorKey(name, left as number, right as number));
    } else throw new CatalogShapeError(`a catalog row of unknown kind ${JSON.stringify(kind)}`);
  }
  return new Snapshot(hash.digest('hex').slice(0, 32), relations, functions, operators, leakproof);
}
