import type { MaskMode } from '../../src/events/policies.js';
import type { StatementAnalysis } from './analysis.js';
import { descendants } from './inheritance.js';
import { qualified, type RelationName } from './names.js';
import { relationOf, viewedRelations } from './reach.js';
import { INSUFFICIENT_PRIVILEGE, listNames, type PolicyRules, type Refusal } from './rules.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

type Masks = Readonly<Record<string, MaskMode>>;

/** When two masked tables hand one relation's column different modes: the one that shows least. */
const STRENGTH: readonly MaskMode[] = ['redact', 'null', 'hash', 'partial'];

function tableAndColumn(key: string): { table: RelationName; column: string } {
  const last = key.lastIndexOf('.');
  return { table: relationOf(key.slice(0, last)), column: key.slice(last + 1) };
}

/**
 * The relations PostgreSQL shows a table's rows through under another name, on the catalog
 * snapshot: its plain-inheritance descendants (their rows are the table's when it is read without
 * ONLY) and the other members of its partition tree (a partition's rows are its ancestors').
 */
export function sameRows(table: RelationName, catalog: UpstreamCatalog): RelationName[] {
  return [...(catalog.relation(table)?.partitionTree ?? []), ...descendants(catalog, [table])];
}

function stricter(a: MaskMode | undefined, b: MaskMode): MaskMode {
  return a === undefined || STRENGTH.indexOf(b) < STRENGTH.indexOf(a) ? b : a;
}

function withCatalog(masked: Masks, catalog: UpstreamCatalog): Masks {
  const added: Record<string, MaskMode> = {};
  for (const [key, mode] of Object.entries(masked)) {
    const { table, column } = tableAndColumn(key);
    for (const relation of sameRows(table, catalog)) {
      if (!catalog.relation(relation)?.columns.includes(column)) continue;
      const name = `${qualified(relation)}.${column}`;
      if (masked[name] !== undefined) continue;
      added[name] = stricter(added[name], mode);
    }
  }
  return Object.keys(added).length === 0 ? masked : { ...masked, ...added };
}

const known = new WeakMap<UpstreamCatalog, WeakMap<Masks, Masks>>();

/**
 * A policy's masks as they hold on the upstream catalog: a masked column is masked, with the same
 * mode, in every relation that shows its table's rows under another name (a partition of a masked
 * partitioned table, the partitioned table of a masked partition, an inheritance child of a masked
 * table). A mask the policy names for that relation itself wins. Without a catalog, the policy's own.
 */
export function catalogMasks(masked: Masks, catalog: UpstreamCatalog | undefined): Masks {
  if (!catalog || Object.keys(masked).length === 0) return masked;
  let perCatalog = known.get(catalog);
  if (!perCatalog) known.set(catalog, (perCatalog = new WeakMap()));
  let masks = perCatalog.get(masked);
  if (!masks) perCatalog.set(masked, (masks = withCatalog(masked, catalog)));
  return masks;
}

/**
 * `masks` with the columns of the statement's relations whose type is a masked relation's row type
 * (a table of snapshots `c customers`, `cs customers[]`): each holds whole rows of it, so it is
 * masked with the strictest mode among that relation's masked columns. A mask the policy names
 * for the column itself wins.
 */
export function rowColumnMasks(masks: Masks, analysis: StatementAnalysis, catalog: UpstreamCatalog | undefined): Masks {
  if (!catalog || Object.keys(masks).length === 0) return masks;
  let added: Record<string, MaskMode> | undefined;
  for (const use of analysis.relations) {
    for (const table of use.candidates) {
      for (const { column, of } of catalog.relation(table)?.rowColumns ?? []) {
        const prefix = `${qualified(of)}.`;
        const name = `${qualified(table)}.${column}`;
        if (masks[name] !== undefined) continue;
        for (const [key, mode] of Object.entries(masks)) {
          if (key.startsWith(prefix) && !key.slice(prefix.length).includes('.')) (added ??= {})[name] = stricter(added[name], mode);
        }
      }
    }
  }
  return added ? { ...masks, ...added } : masks;
}

/**
 * Relations that would show a denied table, or a masked one's columns unmasked, under another
 * name, refused wherever the statement names them: a partition, inheritance child or partitioned
 * table of a denied table (`table.denied`); a view or materialized view whose definition reads, at
 * any depth of views, a denied table (`table.denied`) or a table with masked columns
 * (`masked_columns.view`: the gateway cannot tell which of its columns is which), unless
 * allowed_tables names the view itself (the operator's choice of what it shows, as a projection
 * that leaves those columns out), not through `schema.*`.
 */
export function viewCheck(analysis: StatementAnalysis, policy: Pick<PolicyRules, 'allowed_tables' | 'masked_columns' | 'denied_tables'>, catalog: UpstreamCatalog | undefined): Refusal | null {
  if (!catalog) return null;
  const maskedTables = new Set(Object.keys(policy.masked_columns).map((key) => qualified(tableAndColumn(key).table)));
  const denied = policy.denied_tables ?? [];
  if (maskedTables.size === 0 && denied.length === 0) return null;
  const deniedShown = deniedRows(denied, catalog);
  for (const use of analysis.relations) {
    for (const candidate of use.candidates) {
      const kind = catalog.relation(candidate)?.kind;
      const name = qualified(candidate);
      const rowsOf = deniedShown.get(name);
      if (rowsOf !== undefined) {
        return refusal('table.denied', `${name} shows rows of ${rowsOf}, which is on this credential's denied tables, as its partition or inheritance child, or its partitioned table (rule table.denied); query other tables.`, name);
      }
      if ((kind !== 'view' && kind !== 'matview') || policy.allowed_tables.includes(name)) continue;
      const reach = viewedRelations([name], catalog).filter((table) => table !== name);
      const what = `${kind === 'view' ? 'view' : 'materialized view'} ${name}`;
      const refused = reach.find((table) => listNames(denied, relationOf(table)));
      if (refused !== undefined) {
        return refusal('table.denied', `${what} reads ${refused}, which is on this credential's denied tables (rule table.denied); query other tables.`, name);
      }
      const reached = reach.find((table) => maskedTables.has(table));
      if (reached !== undefined) {
        return refusal(
          'masked_columns.view',
          `${what} reads ${reached}, whose columns this credential's policy masks, and would show them unmasked (rule masked_columns.view); query ${reached} itself, or ask for ${name} to be named in allowed_tables if it leaves the masked columns out.`,
          name,
        );
      }
    }
  }
  return null;
}

/** The relations that show a denied table's rows under another name (sameRows), each with the denied table. */
function deniedRows(denied: readonly string[], catalog: UpstreamCatalog): ReadonlyMap<string, string> {
  const shown = new Map<string, string>();
  for (const entry of denied) {
    if (entry.endsWith('.*')) continue;
    for (const relation of sameRows(relationOf(entry), catalog)) if (!listNames(denied, relation)) shown.set(qualified(relation), entry);
  }
  return shown;
}

const refusal = (rule: string, reason: string, view: string): Refusal => ({ rule, reason, sqlstate: INSUFFICIENT_PRIVILEGE, blocked: [view] });
