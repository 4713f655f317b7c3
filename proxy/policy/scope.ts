import type { ColumnName, WholeRowForm } from './analysis.js';
import { ROW_FUNCTION_NAMES } from './functions.js';
import type { RelationName } from './names.js';

/**
 * A FROM item as name binding sees it. Derived items (subqueries, CTE references, function calls,
 * VALUES) never expose a base column directly: every base column inside them was bound, and
 * masked, at its own source.
 */
export type RangeEntry =
  | {
      readonly kind: 'table';
      readonly refname: string;
      readonly aliased: boolean;
      readonly tables: readonly RelationName[];
      /** Output names in attribute order (an alias list renames by position), from the upstream catalog; absent when it does not know the table. */
      readonly columns?: readonly string[];
      /** The catalog's names of the same columns. */
      readonly base?: readonly string[];
    }
  | {
      readonly kind: 'derived';
      readonly refname: string | null;
      /** Output names, when the query's select list names each column plainly (see outputNames). */
      readonly columns?: readonly string[];
    }
  | { readonly kind: 'join'; readonly refname: string; readonly members: readonly RangeEntry[] };

/**
 * A FROM item as `*` expands it: PostgreSQL lists a join's merged columns (USING, NATURAL) first,
 * then each side's other columns; an aliased join is referred to by its alias only.
 */
export type FromShape =
  | { readonly kind: 'item'; readonly entry: RangeEntry }
  | {
      readonly kind: 'join';
      readonly left: FromShape;
      readonly right: FromShape;
      /** USING columns, or NATURAL's common columns; null for a NATURAL JOIN of sides whose columns are not known. */
      readonly merged: readonly string[] | null;
      readonly alias: { readonly entry: RangeEntry; readonly columns: readonly string[] } | null;
    };

/** One query level: its FROM items and WITH names. Nested queries chain to their enclosing level. */
export class Level {
  readonly entries: RangeEntry[] = [];
  /** The top-level FROM items, in order (entries flattens them). */
  readonly from: FromShape[] = [];
  /** WITH names in scope, and their output names when known. */
  readonly ctes = new Map<string, readonly string[] | undefined>();

  constructor(readonly parent: Level | null) {}

  hasCte(name: string): boolean {
    return this.ctes.has(name) || (this.parent?.hasCte(name) ?? false);
  }

  /** The output names of the CTE `name` refers to here, when known. */
  cteColumns(name: string): readonly string[] | undefined {
    return this.ctes.has(name) ? this.ctes.get(name) : this.parent?.cteColumns(name);
  }
}

export interface Binding {
  readonly columns: readonly ColumnName[];
  /**
   * The candidates another FROM item may supply the name instead of, from their own query level or
   * a nearer one (PostgreSQL binds a name at the nearest level that has it): a mask on such a
   * candidate would be computed on whatever the other item holds.
   */
  readonly shadowed: readonly ColumnName[];
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

/** A FROM item found by a lookup, with the number of query levels between it and the reference. */
interface Found {
  readonly entry: RangeEntry;
  readonly depth: number;
}

/**
 * Entries a qualifier (`t`, `s.t`, `db.s.t`) may denote, at every level. Visibility is
 * over-approximated on purpose: a reference bound to more candidates is masked or refused more
 * often, never less.
 */
function qualifiedAt(level: Level, qualifier: readonly string[]): Found[] {
  const refname = qualifier[qualifier.length - 1];
  const schema = qualifier.length >= 2 ? qualifier[qualifier.length - 2] : undefined;
  const found: Found[] = [];
  let depth = 0;
  for (let current: Level | null = level; current !== null; current = current.parent, depth++) {
    for (const entry of current.entries) {
      if (entry.refname !== refname) continue;
      if (schema === undefined) found.push({ entry, depth });
      else if (entry.kind === 'table' && !entry.aliased) {
        const tables = entry.tables.filter((table) => table.schema === schema);
        if (tables.length > 0) found.push({ entry: { kind: 'table', refname: entry.refname, aliased: entry.aliased, tables }, depth });
      }
    }
  }
  return found;
}

function qualified(level: Level, qualifier: readonly string[]): RangeEntry[] {
  return qualifiedAt(level, qualifier).map((found) => found.entry);
}

/** Whether a FROM item may have a column of that name (it may, unless its columns are known and lack it). */
function mayHave(entry: RangeEntry, column: string): boolean {
  return entry.kind !== 'join' && (entry.columns === undefined || entry.columns.includes(column));
}

/** The candidates of `found`'s tables that one of `sources` other than their own, as near or nearer, may stand in for. */
function shadowedOf(found: readonly Found[], sources: readonly Found[], column: string): ColumnName[] {
  const shadowed: ColumnName[] = [];
  for (const { entry, depth } of found) {
    if (entry.kind !== 'table') continue;
    if (sources.some((other) => other.entry !== entry && other.depth <= depth)) shadowed.push(...columnsOf(entry.tables, column));
  }
  return shadowed;
}

/** One candidate per distinct table: a self-join repeated a thousand times binds a name to one column, not a thousand. */
function columnsOf(tables: readonly RelationName[], column: string): ColumnName[] {
  const seen = new Map<string, Set<string>>();
  const columns: ColumnName[] = [];
  for (const table of tables) {
    const names = seen.get(table.schema) ?? new Set<string>();
    if (names.has(table.name)) continue;
    seen.set(table.schema, names.add(table.name));
    columns.push({ table, column });
  }
  return columns;
}

/** Binds a ColumnRef's fields the way PostgreSQL's transformColumnRef does, over all candidates. */
export function bindColumnRef(level: Level, parts: readonly RefPart[]): Binding {
  const last = parts[parts.length - 1];
  const qualifier = parts.slice(0, -1).filter((part): part is string => part !== STAR);
  if (last === STAR) {
    const entries = qualifier.length === 0 ? level.entries.filter((entry) => entry.kind !== 'join') : qualified(level, qualifier);
    const tables = tablesOfAll(entries);
    return { columns: [], shadowed: [], wholeRows: tables.length > 0 ? [{ tables, form: 'star' }] : [] };
  }
  if (last === undefined) return { columns: [], shadowed: [], wholeRows: [] };
  if (qualifier.length === 0) {
    const tables: RelationName[] = [];
    const found: Found[] = [];
    let depth = 0;
    for (let current: Level | null = level; current !== null; current = current.parent, depth++) {
      for (const entry of current.entries) {
        if (entry.kind === 'table') addTables(tables, entry);
        found.push({ entry, depth });
      }
    }
    const sources = found.filter((item) => mayHave(item.entry, last));
    const rowTables = tablesOfAll(qualified(level, [last]));
    return { columns: columnsOf(tables, last), shadowed: shadowedOf(found, sources, last), wholeRows: rowTables.length > 0 ? [{ tables: rowTables, form: 'row' }] : [] };
  }
  const found = qualifiedAt(level, qualifier);
  const tables = tablesOfAll(found.map((item) => item.entry));
  const viaFunction = ROW_FUNCTION_NAMES.has(last) && tables.length > 0;
  return { columns: columnsOf(tables, last), shadowed: shadowedOf(found, found, last), wholeRows: viaFunction ? [{ tables, form: 'function_notation' }] : [] };
}

/** The work of a name lookup at `level`: the levels it climbs and the FROM items it scans, its own and every enclosing level's. */
export function lookupSteps(level: Level): number {
  let steps = 0;
  for (let current: Level | null = level; current !== null; current = current.parent) steps += 1 + current.entries.length;
  return steps;
}
