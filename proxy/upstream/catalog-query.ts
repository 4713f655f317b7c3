import { createHash } from 'node:crypto';
import type { RelationName } from '../policy/names.js';
import type { CatalogRelation, CatalogRelationKind, UpstreamCatalog } from '../policy/upstream-catalog.js';

/**
 * What the gateway reads of an upstream database's catalog, in one statement of catalog reads only
 * (never user data): every table, partitioned table, view, materialized view and foreign table
 * outside pg_toast and temporary schemas, with its columns in order and its plain-inheritance
 * children (partitions are not listed: a partitioned table's partitions count as the table); and
 * for each function and operator name, the schemas other than pg_catalog that define one.
 * One row per item, each a JSON array: a row stays small whatever the size of the catalog, and
 * the rows' order is fixed, so the same catalog always reads as the same text.
 */
export const CATALOG_SQL = `select k, v from (
  select 'r' as k, pg_catalog.json_build_array(n.nspname, c.relname, c.relkind,
    coalesce((select pg_catalog.json_agg(a.attname order by a.attnum) from pg_catalog.pg_attribute a
      where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]'),
    coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(cn.nspname, cc.relname) order by cn.nspname, cc.relname)
      from pg_catalog.pg_inherits i join pg_catalog.pg_class cc on cc.oid = i.inhrelid join pg_catalog.pg_namespace cn on cn.oid = cc.relnamespace
      where i.inhparent = c.oid and c.relkind <> 'p'), '[]'))::text as v
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
) items order by k collate "C", v collate "C"`;

const KINDS: Readonly<Record<string, CatalogRelationKind>> = { r: 'table', p: 'partitioned', v: 'view', m: 'matview', f: 'foreign' };

/** The rows of CATALOG_SQL did not have the shape it gives. */
export class CatalogShapeError extends Error {
  override readonly name = 'CatalogShapeError';
}

const key = (schema: string, name: string): string => `${schema}\u0000${name}`;

function strings(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw new CatalogShapeError(`${what} is not a list of names`);
  return value as string[];
}

class Snapshot implements UpstreamCatalog {
  constructor(
    readonly version: string,
    private readonly relations: ReadonlyMap<string, CatalogRelation>,
    private readonly functions: ReadonlyMap<string, readonly string[]>,
    private readonly operators: ReadonlyMap<string, readonly string[]>,
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
      const [schema, name, relkind, columns, inheritors] = item as unknown[];
      const relationKind = KINDS[String(relkind)];
      if (typeof schema !== 'string' || typeof name !== 'string' || !relationKind) throw new CatalogShapeError('a relation row without schema, name or kind');
      if (!Array.isArray(inheritors)) throw new CatalogShapeError(`the inheritors of ${schema}.${name} are not a list`);
      relations.set(key(schema, name), {
        kind: relationKind,
        columns: strings(columns, `the columns of ${schema}.${name}`),
        inheritors: inheritors.map((pair) => {
          const [childSchema, childName] = strings(pair, `an inheritor of ${schema}.${name}`);
          if (childSchema === undefined || childName === undefined) throw new CatalogShapeError(`an inheritor of ${schema}.${name} without its name`);
          return { schema: childSchema, name: childName };
        }),
      });
    } else if (kind === 'f' || kind === 'o') {
      const [name, schemas] = item as unknown[];
      if (typeof name !== 'string') throw new CatalogShapeError('a function or operator row without its name');
      (kind === 'f' ? functions : operators).set(name, strings(schemas, `the schemas of ${name}`).sort());
    } else throw new CatalogShapeError(`a catalog row of unknown kind ${JSON.stringify(kind)}`);
  }
  return new Snapshot(hash.digest('hex').slice(0, 32), relations, functions, operators);
}
