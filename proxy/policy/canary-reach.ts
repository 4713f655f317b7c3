import type { StatementAnalysis } from './analysis.js';
import { sameRows } from './mask-reach.js';
import { qualified, type RelationName } from './names.js';
import { relationOf, viewedRelations } from './reach.js';
import type { Canary } from './rules.js';
import type { CatalogRelation, UpstreamCatalog } from './upstream-catalog.js';

/**
 * The relation the statement names that shows a table or column canary's rows under another name,
 * on the catalog snapshot, as masks and denials follow them (mask-reach.ts): for a decoy table, a
 * view or materialized view reading it at any depth, or a member of its partition tree or an
 * inheritance child of it; for a canary column, the same column of a member of its table's
 * partition tree or of an inheritance child, read by name or as a whole row, a column typed as
 * those tables' rows, read by name or as a whole row, and a view or materialized view whose
 * definition names the column (showsColumn). Null when none does (or there is no snapshot); the
 * canary's own table named is canaryHit's.
 */
export function canaryReach(analysis: StatementAnalysis, canary: Canary, catalog: UpstreamCatalog | undefined): string | null {
  if (!catalog || canary.kind === 'value') return null;
  const table = canary.kind === 'table' ? canary.target : canary.target.slice(0, canary.target.lastIndexOf('.'));
  const shown = new Set(sameRows(relationOf(table), catalog).map(qualified));
  if (canary.kind === 'column') return columnReach(analysis, shown, new Set([...shown, table]), canary.target.slice(table.length + 1), catalog);
  for (const use of analysis.relations) {
    for (const candidate of use.candidates) {
      const name = qualified(candidate);
      if (name === table) continue;
      if (shown.has(name) || viewedRelations([name], catalog).includes(table)) return name;
    }
  }
  return null;
}

/**
 * The relation of the statement that shows the canary `column` otherwise than as its table's own
 * column: `shown` are the relations showing its table's rows, `tables` those and the table.
 */
function columnReach(analysis: StatementAnalysis, shown: ReadonlySet<string>, tables: ReadonlySet<string>, column: string, catalog: UpstreamCatalog): string | null {
  const relation = (name: RelationName): CatalogRelation | undefined => catalog.relation(name);
  const shows = (name: RelationName, read: string): boolean =>
    (shown.has(qualified(name)) && (read === '*' || read === column) && relation(name)?.columns.includes(column) === true) ||
    relation(name)?.rowColumns.some((row) => (read === '*' || row.column === read) && tables.has(qualified(row.of))) === true;
  for (const use of analysis.columns) for (const candidate of use.candidates) if (shows(candidate.table, candidate.column)) return qualified(candidate.table);
  for (const use of analysis.wholeRows) for (const whole of use.tables) if (shows(whole, '*')) return qualified(whole);
  for (const use of analysis.relations) for (const candidate of use.candidates) if (showsColumn(candidate, tables, column, catalog)) return qualified(candidate);
  return null;
}

/**
 * Whether `view`'s definition names `column` of one of `tables` (or reads one of them whole),
 * directly or through the views it reads at any depth: any column of a view that does is taken
 * to show it, since the catalog does not say which of a view's columns comes from which.
 */
function showsColumn(view: RelationName, tables: ReadonlySet<string>, column: string, catalog: UpstreamCatalog): boolean {
  const seen = new Set<string>();
  const queue = [view];
  for (let next = queue.shift(); next; next = queue.shift()) {
    const relation = catalog.relation(next);
    if (!relation || (relation.kind !== 'view' && relation.kind !== 'matview') || seen.has(qualified(next))) continue;
    seen.add(qualified(next));
    const named = relation.viewColumns ?? relation.viewReads.map((table) => ({ table, column: '*' }));
    for (const read of named) {
      if (tables.has(qualified(read.table)) && (read.column === '*' || read.column === column)) return true;
      if (catalog.relation(read.table)?.rowColumns.some((row) => tables.has(qualified(row.of)) && (read.column === '*' || read.column === row.column))) return true;
      queue.push(read.table);
    }
  }
  return false;
}
