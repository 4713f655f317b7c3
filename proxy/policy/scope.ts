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

  *chain(): Generator<Level> {
    yield this;
    if (this.parent) yield* this.parent.chain();
  }

  hasCte(name: string): boolean {
    for (const level of this.chain()) if (level.ctes.has(name)) return true;
    return false;
  }
}

export interface Binding {
  readonly columns: readonly ColumnName[];
  readonly wholeRows: readonly { readonly tables: readonly RelationName[]; readonly form: WholeRowForm }[];
}

export const STAR = Symbol('*');
export type RefPart = string | typeof STAR;

export function tablesOf(entry: RangeEntry): RelationName[] {
  if (entry.kind === 'table') return [...entry.tables];
  if (entry.kind === 'join') return entry.members.flatMap(tablesOf);
  return [];
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
  for (const current of level.chain()) {
    for (const entry of current.entries) {
      if (entry.refname !== refname) continue;
      if (schema === undefined) found.push(entry);
      else if (entry.kind === 'table' && !entry.aliased) {
        const tables = entry.tables.filter((table) => table.schema === schema);
        if (tables.length > 0) found.push({ ...entry, tables });
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
    const tables = entries.flatMap(tablesOf);
    return { columns: [], wholeRows: tables.length > 0 ? [{ tables, form: 'star' }] : [] };
  }
  if (last === undefined) return { columns: [], wholeRows: [] };
  if (qualifier.length === 0) {
    const tables = [...level.chain()].flatMap((current) => current.entries.filter((entry) => entry.kind === 'table').flatMap(tablesOf));
    const rowTables = qualified(level, [last]).flatMap(tablesOf);
    return { columns: columnsOf(tables, last), wholeRows: rowTables.length > 0 ? [{ tables: rowTables, form: 'row' }] : [] };
  }
  const tables = qualified(level, qualifier).flatMap(tablesOf);
  const viaFunction = ROW_FUNCTION_NAMES.has(last) && tables.length > 0;
  return { columns: columnsOf(tables, last), wholeRows: viaFunction ? [{ tables, form: 'function_notation' }] : [] };
}
