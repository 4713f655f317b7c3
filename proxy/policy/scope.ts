import type { ColumnName, WholeRowForm } from './analysis.js';
import { ROW_FUNCTION_NAMES } from './functions.js';
import type { RelationName } from './names.js';

/**
 * A FROM item as name binding sees it. Derived items (subqueries, CTE references, function calls,
 * VALUES) never expose a base column directly: every base column inside them was bound, and
 * masked, at its own source.
 */
export type RangeEntry =
  | { readonly kind: 'table'; readonly refname: string; readonly aliased: boolean; readonly tables: readonly RelationName[] }
  | { readonly kind: 'derived'; readonly refname: string | null }
  | { readonly kind: 'join'; readonly refname: string; readonly members: readonly RangeEntry[] };

/** One query level: its FROM items and WITH names. Nested queries chain to their enclosing level. */
export class Level {
  readonly entries: RangeEntry[] = [];
  readonly ctes = new Set<string>();

  constructor(readonly parent: Level | null) {}

  hasCte(name: string): boolean {
    return this.ctes.has(name) || (this.parent?.hasCte(name) ?? false);
  }
}

export interface Binding {
  readonly columns: readonly ColumnName[];
  readonly wholeRows: readonly { readonly tables: readonly RelationName[]; readonly form: WholeRowForm }[];
}

export const STAR = Symbol('*');
export type RefPart = string | typeof STAR;

export function tablesOf(entry: RangeEntry): RelationName[] {
  return tablesOfAll([entry]);
}

/** The base tables of the entries, in order. */
function tablesOfAll(entries: readonly RangeEntry[]): RelationName[] {
  const tables: RelationName[] = [];
  for (const entry of entries) addTables(tables, entry);
  return tables;
}

function addTables(tables: RelationName[], entry: RangeEntry): void {
  if (entry.kind === 'table') tables.push(...entry.tables);
  else if (entry.kind === 'join') for (const member of entry.members) addTables(tables, member);
}

/**
 * Entries a qualifier (`t`, `s.t`, `db.s.t`) may denote, at every level. Visibility is
 * over-approximated on purpose: a reference bound to more candidates is masked or refused more
 * often, never less.
 */
function qualified(level: Level, qualifier: readonly string[]): RangeEntry[] {
  const refname = qualifier[qualifier.length - 1];
  const schema = qualifier.length >= 2 ? qualifier[qualifier.length - 2] : undefined;
  const found: RangeEntry[] = [];
  for (let current: Level | null = level; current !== null; current = current.parent) {
    for (const entry of current.entries) {
      if (entry.refname !== refname) continue;
      if (schema === undefined) found.push(entry);
      else if (entry.kind === 'table' && !entry.aliased) {
        const tables = entry.tables.filter((table) => table.schema === schema);
        if (tables.length > 0) found.push({ kind: 'table', refname: entry.refname, aliased: entry.aliased, tables });
      }
    }
  }
  return found;
}

function columnsOf(tables: readonly RelationName[], column: string): ColumnName[] {
  return tables.map((table) => ({ table, column }));
}

/** Binds a ColumnRef's fields the way PostgreSQL's transformColumnRef does, over all candidates. */
export function bindColumnRef(level: Level, parts: readonly RefPart[]): Binding {
  const last = parts[parts.length - 1];
  const qualifier = parts.slice(0, -1).filter((part): part is string => part !== STAR);
  if (last === STAR) {
    const entries = qualifier.length === 0 ? level.entries.filter((entry) => entry.kind !== 'join') : qualified(level, qualifier);
    const tables = tablesOfAll(entries);
    return { columns: [], wholeRows: tables.length > 0 ? [{ tables, form: 'star' }] : [] };
  }
  if (last === undefined) return { columns: [], wholeRows: [] };
  if (qualifier.length === 0) {
    const tables: RelationName[] = [];
    for (let current: Level | null = level; current !== null; current = current.parent) {
      for (const entry of current.entries) if (entry.kind === 'table') addTables(tables, entry);
    }
    const rowTables = tablesOfAll(qualified(level, [last]));
    return { columns: columnsOf(tables, last), wholeRows: rowTables.length > 0 ? [{ tables: rowTables, form: 'row' }] : [] };
  }
  const tables = tablesOfAll(qualified(level, qualifier));
  const viaFunction = ROW_FUNCTION_NAMES.has(last) && tables.length > 0;
  return { columns: columnsOf(tables, last), wholeRows: viaFunction ? [{ tables, form: 'function_notation' }] : [] };
}
