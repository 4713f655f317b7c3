import type { StatementAnalysis, TreeEdit } from './analysis.js';
import { cloneTree, isObject, type Node } from './ast.js';
import { qualified } from './names.js';
import { parseOne } from './parser.js';
import { INSUFFICIENT_PRIVILEGE, type PolicyRules, type Refusal } from './rules.js';

/**
 * System catalogs with one row per relation (or per column, index, constraint... of one), and the
 * columns holding the relation's oid. Under allow_catalog, a read of one of them sees only the rows
 * of relations the policy allows (by name or schema), of their indexes, and of the system
 * catalogs themselves: psql's `\dt`, `\d table` and a driver's introspection list no other table.
 */
const RELATION_KEYED: Readonly<Record<string, readonly string[]>> = {
  pg_class: ['oid'],
  pg_attribute: ['attrelid'],
  pg_attrdef: ['adrelid'],
  pg_index: ['indrelid'],
  pg_constraint: ['conrelid'],
  pg_inherits: ['inhrelid', 'inhparent'],
  pg_partitioned_table: ['partrelid'],
  pg_policy: ['polrelid'],
  pg_publication_rel: ['prrelid'],
  pg_rewrite: ['ev_class'],
  pg_sequence: ['seqrelid'],
  pg_statistic_ext: ['stxrelid'],
  pg_trigger: ['tgrelid'],
};

const SYSTEM_SCHEMAS = ['pg_catalog', 'information_schema'];

const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;
const ident = (text: string): string => `"${text.replaceAll('"', '""')}"`;

/** SQL true when the relation oid `column` is one the policy lets the agent see (a domain constraint's conrelid 0 too). */
function visible(policy: PolicyRules, column: string): string {
  const named = policy.allowed_tables.filter((entry) => !entry.endsWith('.*'));
  const schemas = [...SYSTEM_SCHEMAS, ...policy.allowed_tables.filter((entry) => entry.endsWith('.*')).map((entry) => entry.slice(0, -2))];
  const oids = `ARRAY[${named.map((entry) => {
    const dot = entry.indexOf('.');
    return `pg_catalog.to_regclass(${literal(`${ident(entry.slice(0, dot))}.${ident(entry.slice(dot + 1))}`)})::pg_catalog.oid`;
  }).join(', ')}]::pg_catalog.oid[]`;
  return `(${column} = 0 OR ${column} = ANY (${oids})
    OR ${column} IN (SELECT i.indexrelid FROM pg_catalog.pg_index i WHERE i.indrelid = ANY (${oids}))
    OR ${column} IN (SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN (${schemas.map(literal).join(', ')})))`;
}

/** The filtered stand-ins already parsed, by allowed_tables and catalog; a few per policy. */
const standIns = new Map<string, Node>();
const MAX_STAND_INS = 1_000;

function standIn(policy: PolicyRules, catalog: string): Node | undefined {
  const key = `${JSON.stringify(policy.allowed_tables)}\u0000${catalog}`;
  const cached = standIns.get(key);
  if (cached) return cached;
  const where = (RELATION_KEYED[catalog] ?? []).map((column) => visible(policy, column)).join(' AND ');
  const parsed = parseOne(`SELECT * FROM pg_catalog.${catalog} WHERE ${where}`);
  if (!parsed) return undefined;
  if (standIns.size >= MAX_STAND_INS) standIns.clear();
  standIns.set(key, parsed);
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
    if (use.written || table?.schema !== 'pg_catalog' || !RELATION_KEYED[table.name]) continue;
    const path = use.path;
    if (!path || path[path.length - 1] !== 'RangeVar') {
      return {
        rule: 'allowed_tables.catalog',
        reason: `${qualified(table)} is read here as a whole, but the gateway shows its rows of allowed relations only (rule allowed_tables.catalog); read it with SELECT ... FROM ${qualified(table)}.`,
        sqlstate: INSUFFICIENT_PRIVILEGE,
        blocked: [qualified(table)],
      };
    }
    const query = standIn(policy, table.name);
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
