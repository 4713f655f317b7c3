import type { StatementAnalysis, TreeEdit } from './analysis.js';
import { cloneTree, isObject, type Node } from './ast.js';
import { qualified } from './names.js';
import { parseOne } from './parser.js';
import { INSUFFICIENT_PRIVILEGE, type PolicyRules, type Refusal } from './rules.js';

/** How a catalog names the relation each of its rows describes: by oid columns, or by (schema, name) column pairs. */
type RelationKey = { readonly oids: readonly string[] } | { readonly names: readonly (readonly [string, string])[] };

const byOid = (...oids: string[]): RelationKey => ({ oids });
const byName = (...names: (readonly [string, string])[]): RelationKey => ({ names });
const TABLE = ['table_schema', 'table_name'] as const;
const SCHEMANAME_RELNAME = ['schemaname', 'relname'] as const;
const SCHEMANAME_TABLENAME = ['schemaname', 'tablename'] as const;

/**
 * System catalogs and views with one row per relation (or per column, index, constraint, ... of
 * one), and where each row names its relation. Under allow_catalog, a read of one of them sees
 * only the rows of relations the policy allows (by name or schema), of their indexes, and of the
 * system catalogs themselves: psql's `\dt` and `\d table`, information_schema and a driver's
 * introspection list no other relation. Catalogs not listed here are read whole.
 */
const RELATION_KEYED: Readonly<Record<string, RelationKey>> = {
  'pg_catalog.pg_class': byOid('oid'),
  'pg_catalog.pg_attribute': byOid('attrelid'),
  'pg_catalog.pg_attrdef': byOid('adrelid'),
  'pg_catalog.pg_index': byOid('indrelid'),
  'pg_catalog.pg_constraint': byOid('conrelid'),
  'pg_catalog.pg_inherits': byOid('inhrelid', 'inhparent'),
  'pg_catalog.pg_partitioned_table': byOid('partrelid'),
  'pg_catalog.pg_policy': byOid('polrelid'),
  'pg_catalog.pg_publication_rel': byOid('prrelid'),
  'pg_catalog.pg_rewrite': byOid('ev_class'),
  'pg_catalog.pg_sequence': byOid('seqrelid'),
  'pg_catalog.pg_statistic_ext': byOid('stxrelid'),
  'pg_catalog.pg_trigger': byOid('tgrelid'),
  'pg_catalog.pg_locks': byOid('relation'),
  'pg_catalog.pg_tables': byName(SCHEMANAME_TABLENAME),
  'pg_catalog.pg_indexes': byName(SCHEMANAME_TABLENAME),
  'pg_catalog.pg_policies': byName(SCHEMANAME_TABLENAME),
  'pg_catalog.pg_rules': byName(SCHEMANAME_TABLENAME),
  'pg_catalog.pg_views': byName(['schemaname', 'viewname']),
  'pg_catalog.pg_matviews': byName(['schemaname', 'matviewname']),
  'pg_catalog.pg_sequences': byName(['schemaname', 'sequencename']),
  ...Object.fromEntries(
    ['all', 'user', 'sys'].flatMap((which) => [
      [`pg_catalog.pg_stat_${which}_tables`, byName(SCHEMANAME_RELNAME)],
      [`pg_catalog.pg_stat_xact_${which}_tables`, byName(SCHEMANAME_RELNAME)],
      [`pg_catalog.pg_stat_${which}_indexes`, byName(SCHEMANAME_RELNAME)],
      [`pg_catalog.pg_statio_${which}_tables`, byName(SCHEMANAME_RELNAME)],
      [`pg_catalog.pg_statio_${which}_indexes`, byName(SCHEMANAME_RELNAME)],
      [`pg_catalog.pg_statio_${which}_sequences`, byName(SCHEMANAME_RELNAME)],
    ]),
  ),
  ...Object.fromEntries(
    ['tables', 'columns', 'views', 'table_constraints', 'key_column_usage', 'constraint_table_usage', 'constraint_column_usage', 'column_privileges',
      'table_privileges', 'role_table_grants', 'role_column_grants', 'column_udt_usage', 'column_domain_usage', 'column_column_usage', 'column_options',
      'view_column_usage'].map((view) => [`information_schema.${view}`, byName(TABLE)]),
  ),
  'information_schema.view_table_usage': byName(['view_schema', 'view_name'], TABLE),
  'information_schema.view_routine_usage': byName(TABLE),
  'information_schema.foreign_tables': byName(['foreign_table_schema', 'foreign_table_name']),
  'information_schema.foreign_table_options': byName(['foreign_table_schema', 'foreign_table_name']),
  'information_schema.triggers': byName(['event_object_schema', 'event_object_table']),
  'information_schema.triggered_update_columns': byName(['event_object_schema', 'event_object_table']),
};

const SYSTEM_SCHEMAS = ['pg_catalog', 'information_schema'];

const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;
const ident = (text: string): string => `"${text.replaceAll('"', '""')}"`;

function split(entry: string): [string, string] {
  const dot = entry.indexOf('.');
  return [entry.slice(0, dot), entry.slice(dot + 1)];
}

/** The schemas whose every relation is visible: the system ones and those the policy allows with `*`. */
function openSchemas(policy: PolicyRules): string {
  return [...SYSTEM_SCHEMAS, ...policy.allowed_tables.filter((entry) => entry.endsWith('.*')).map((entry) => entry.slice(0, -2))].map(literal).join(', ');
}

const named = (policy: PolicyRules): [string, string][] => policy.allowed_tables.filter((entry) => !entry.endsWith('.*')).map(split);

/** SQL true when the relation oid `column` is one the policy lets the agent see (a domain constraint's conrelid 0 too). */
function visibleOid(policy: PolicyRules, column: string): string {
  const oids = `ARRAY[${named(policy).map(([schema, name]) => `pg_catalog.to_regclass(${literal(`${ident(schema)}.${ident(name)}`)})::pg_catalog.oid`).join(', ')}]::pg_catalog.oid[]`;
  return `(${column} = 0 OR ${column} = ANY (${oids})
    OR ${column} IN (SELECT i.indexrelid FROM pg_catalog.pg_index i WHERE i.indrelid = ANY (${oids}))
    OR ${column} IN (SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN (${openSchemas(policy)})))`;
}

/** SQL true when the relation named by the columns `schema` and `name` is one the policy lets the agent see. */
function visibleName(policy: PolicyRules, [schema, name]: readonly [string, string]): string {
  const exact = named(policy).map(([s, n]) => `(${schema} = ${literal(s)} AND ${name} = ${literal(n)})`);
  return `(${schema} IN (${openSchemas(policy)})${exact.map((test) => ` OR ${test}`).join('')})`;
}

function predicate(policy: PolicyRules, key: RelationKey): string {
  return 'oids' in key ? key.oids.map((column) => visibleOid(policy, column)).join(' AND ') : key.names.map((pair) => visibleName(policy, pair)).join(' AND ');
}

/** The filtered stand-ins already parsed, by allowed_tables and catalog; a few per policy. */
const standIns = new Map<string, Node>();
const MAX_STAND_INS = 1_000;

function standIn(policy: PolicyRules, catalog: string): Node | undefined {
  const cacheKey = `${JSON.stringify(policy.allowed_tables)}\u0000${catalog}`;
  const cached = standIns.get(cacheKey);
  if (cached) return cached;
  const key = RELATION_KEYED[catalog];
  const parsed = key ? parseOne(`SELECT * FROM ${catalog} WHERE ${predicate(policy, key)}`) : null;
  if (!parsed) return undefined;
  if (standIns.size >= MAX_STAND_INS) standIns.clear();
  standIns.set(cacheKey, parsed);
  return parsed;
}

/**
 * Edits that make each read of a relation-keyed catalog read its rows of visible relations only
 * (`pg_class c` becomes `(SELECT * FROM pg_catalog.pg_class WHERE ...) c`); a refusal when one is
 * read where no subquery can stand in for it (COPY). Only under allow_catalog: otherwise the
 * catalogs are refused whole.
 */
export function catalogRowFilters(analysis: StatementAnalysis, policy: PolicyRules): TreeEdit[] | Refusal {
  if (!policy.allow_catalog) return [];
  const edits: TreeEdit[] = [];
  for (const use of analysis.relations) {
    const table = use.candidates.length === 1 ? use.candidates[0] : undefined;
    if (use.written || !table || !RELATION_KEYED[qualified(table)]) continue;
    const path = use.path;
    // A use without a slot names the relation without reading its rows (a DROP's name list, a lookup by name).
    if (!path) continue;
    if (path[path.length - 1] !== 'RangeVar') {
      return {
        rule: 'allowed_tables.catalog',
        reason: `${qualified(table)} is read here as a whole, but the gateway shows its rows of allowed relations only (rule allowed_tables.catalog); read it with SELECT ... FROM ${qualified(table)}.`,
        sqlstate: INSUFFICIENT_PRIVILEGE,
        blocked: [qualified(table)],
      };
    }
    const query = standIn(policy, qualified(table));
    if (!query) return { rule: 'allowed_tables.catalog', reason: `the rows of ${qualified(table)} could not be restricted to allowed relations (rule allowed_tables.catalog).`, sqlstate: INSUFFICIENT_PRIVILEGE };
    const name = table.name;
    edits.push({
      path: path.slice(0, -1),
      what: `the rows of ${qualified(table)} restricted to allowed relations`,
      apply(node) {
        const rangeVar = node.RangeVar;
        if (!isObject(rangeVar) || rangeVar.relname !== name) return `${qualified(table)} is not where the analysis found it`;
        const alias = isObject(rangeVar.alias) ? rangeVar.alias : { aliasname: name };
        delete node.RangeVar;
        node.RangeSubselect = { subquery: cloneTree(query), alias };
        return undefined;
      },
    });
  }
  return edits;
}
