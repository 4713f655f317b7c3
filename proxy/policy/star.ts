import { qualified, type RelationName } from './names.js';
import { tablesOf, type FromShape, type Level, type RangeEntry } from './scope.js';

/**
 * Part of what a select-list `*` stands for, as references PostgreSQL binds to the same columns
 * in the same order: `q.*` where that is exact, else the columns one by one.
 */
export interface StarPiece {
  /** The qualifier of `q.*`; null where the piece is only part of a relation's columns (beside a merged join). */
  readonly star: readonly string[] | null;
  /** Each column as a reference's fields; null when the gateway does not know the columns (then `unknown` says why). */
  readonly columns: readonly (readonly string[])[] | null;
  /** Base tables whose columns the piece may show: a masked one needs `columns`. */
  readonly tables: readonly RelationName[];
  readonly unknown?: string;
}

/** Pieces of a star, or why it cannot be written out. */
export type StarListing = readonly StarPiece[] | string;

interface Listing {
  /** Output names in order; null when not known. */
  readonly names: readonly string[] | null;
  readonly pieces: StarListing;
}

const NOT_IN_CATALOG = (tables: readonly RelationName[]): string =>
  `the gateway does not know the columns of ${tables.map(qualified).join(' or ')} (the upstream catalog has not been read, or does not list it)`;

/** How a reference at `level` names a table entry: its refname, schema-qualified when another entry of the level shares it. */
function qualifierOf(level: Level, entry: Extract<RangeEntry, { kind: 'table' }>): readonly string[] | string {
  const clash = level.entries.some((other) => other !== entry && other.refname === entry.refname);
  if (!clash) return [entry.refname];
  const table = entry.tables[0];
  return !entry.aliased && entry.tables.length === 1 && table ? [table.schema, table.name] : `${entry.refname} names two FROM items`;
}

function entryListing(level: Level, entry: RangeEntry, qualifier?: readonly string[]): Listing {
  if (entry.kind === 'join') return { names: null, pieces: `${entry.refname}.* over a join alias cannot be written out` };
  if (entry.kind === 'derived') {
    const q = qualifier ?? (entry.refname === null ? null : [entry.refname]);
    const columns = entry.columns ?? null;
    const pieces = q ? [{ star: q, columns: columns?.map((name) => [...q, name]) ?? null, tables: [] }] : 'a subquery or function in FROM has no alias; give it one';
    return { names: columns, pieces };
  }
  const q = qualifier ?? qualifierOf(level, entry);
  if (typeof q === 'string') return { names: null, pieces: q };
  const columns = entry.columns ?? null;
  const piece: StarPiece = { star: q, columns: columns?.map((name) => [...q, name]) ?? null, tables: entry.tables, ...(columns ? {} : { unknown: NOT_IN_CATALOG(entry.tables) }) };
  return { names: columns, pieces: [piece] };
}

/** The columns of a listing as pieces without `q.*`, less the `drop` names (a merged join's). */
function without(listing: Listing, drop: readonly string[]): StarPiece[] | string {
  if (typeof listing.pieces === 'string') return listing.pieces;
  const pieces: StarPiece[] = [];
  for (const piece of listing.pieces) {
    if (!piece.columns) return piece.unknown ?? 'a subquery beside a merged join column: list its columns';
    const columns = piece.columns.filter((fields) => !drop.includes(fields[fields.length - 1] ?? ''));
    if (columns.length > 0) pieces.push({ star: null, columns, tables: piece.tables });
  }
  return pieces;
}

function shapeListing(level: Level, shape: FromShape): Listing {
  if (shape.kind === 'item') return entryListing(level, shape.entry);
  const left = shapeListing(level, shape.left);
  const right = shapeListing(level, shape.right);
  if (shape.merged === null) return { names: null, pieces: 'the columns a NATURAL JOIN merges are not known to the gateway' };
  const merged = shape.merged;
  const names = left.names && right.names ? [...merged, ...left.names.filter((n) => !merged.includes(n)), ...right.names.filter((n) => !merged.includes(n))] : null;
  let pieces: StarListing;
  if (merged.length === 0) {
    pieces = typeof left.pieces === 'string' ? left.pieces : typeof right.pieces === 'string' ? right.pieces : [...left.pieces, ...right.pieces];
  } else {
    const sides = [without(left, merged), without(right, merged)];
    const failed = sides.find((side): side is string => typeof side === 'string');
    pieces = failed ?? [{ star: null, columns: merged.map((name) => [name]), tables: [] }, ...sides.flatMap((side) => (typeof side === 'string' ? [] : side))];
  }
  if (!shape.alias) return { names, pieces };
  const refname = shape.alias.entry.refname ?? '';
  const renamed = names?.map((name, index) => shape.alias?.columns[index] ?? name) ?? null;
  const unknown = !renamed ? `the columns of join ${refname} are not known to the gateway` : new Set(renamed).size !== renamed.length ? `join ${refname} has two columns of the same name` : undefined;
  const columns = unknown === undefined && renamed ? renamed.map((name) => [refname, name]) : null;
  return { names: renamed, pieces: [{ star: [refname], columns, tables: shapeTables(shape), ...(unknown === undefined ? {} : { unknown }) }] };
}

function shapeTables(shape: FromShape): RelationName[] {
  return shape.kind === 'item' ? tablesOf(shape.entry) : [...shapeTables(shape.left), ...shapeTables(shape.right)];
}

/**
 * A query's output names as PostgreSQL names them, when its select list names every column plainly
 * (an AS name, or a column reference's last name); undefined for anything else (`*`, expressions,
 * whose names PostgreSQL makes up). A set operation is named by its first arm, VALUES column1, ...
 */
export function outputNames(query: Record<string, unknown>): string[] | undefined {
  const select = query.SelectStmt as { op?: string; larg?: Record<string, unknown>; valuesLists?: unknown[]; targetList?: Record<string, unknown>[] } | undefined;
  if (!select) return undefined;
  if (select.op !== undefined && select.op !== 'SETOP_NONE') return select.larg ? outputNames({ SelectStmt: select.larg }) : undefined;
  const row = (select.valuesLists?.[0] as { List?: { items?: unknown[] } } | undefined)?.List?.items;
  if (row) return row.map((_, index) => `column${index + 1}`);
  const names: string[] = [];
  for (const item of select.targetList ?? []) {
    const target = item.ResTarget as { name?: string; val?: { ColumnRef?: { fields?: Record<string, unknown>[] } } } | undefined;
    const fields = target?.val?.ColumnRef?.fields;
    const last = fields?.[fields.length - 1]?.String as { sval?: string } | undefined;
    const name = target?.name ?? last?.sval;
    if (name === undefined) return undefined;
    names.push(name);
  }
  return names;
}

/** A FROM item's output column names, when the gateway knows them. */
export function shapeColumns(level: Level, shape: FromShape): readonly string[] | null {
  return shapeListing(level, shape).names;
}

/** The unqualified `*` of a level: every FROM item in order. Merged join columns are written unqualified, so they must be unambiguous. */
export function levelStar(level: Level): StarListing {
  const listings = level.from.map((shape) => shapeListing(level, shape));
  const pieces: StarPiece[] = [];
  for (const listing of listings) {
    if (typeof listing.pieces === 'string') return listing.pieces;
    pieces.push(...listing.pieces);
  }
  const bare = pieces.flatMap((piece) => (piece.columns ?? []).filter((fields) => fields.length === 1).map((fields) => fields[0] ?? ''));
  if (bare.length === 0) return pieces;
  const names = listings.flatMap((listing): readonly (string | null)[] => listing.names ?? [null]);
  if (names.includes(null)) return 'a merged join column beside a FROM item whose columns are not known could be ambiguous';
  const twice = bare.find((name) => names.filter((other) => other === name).length > 1);
  return twice === undefined ? pieces : `column ${twice} is ambiguous`;
}

/** `q.*` (or `s.t.*`): the nearest level with a FROM item of that name, as PostgreSQL looks it up. */
export function qualifiedStar(level: Level, qualifier: readonly string[]): StarListing {
  const refname = qualifier[qualifier.length - 1];
  const schema = qualifier.length >= 2 ? qualifier[qualifier.length - 2] : undefined;
  for (let current: Level | null = level; current !== null; current = current.parent) {
    const found = current.entries.filter(
      (entry) => entry.refname === refname && (schema === undefined || (entry.kind === 'table' && !entry.aliased && entry.tables.some((table) => table.schema === schema))),
    );
    const entry = found[0];
    if (!entry) continue;
    if (found.length > 1) return `${qualifier.join('.')} names two FROM items`;
    const join = entry.kind === 'join' ? findJoin(current.from, entry) : undefined;
    return join ? shapeListing(current, join).pieces : entryListing(current, entry, qualifier).pieces;
  }
  return `${qualifier.join('.')} names no FROM item`;
}

function findJoin(shapes: readonly FromShape[], entry: RangeEntry): FromShape | undefined {
  for (const shape of shapes) {
    if (shape.kind !== 'join') continue;
    if (shape.alias?.entry === entry) return shape;
    const inner = findJoin([shape.left, shape.right], entry);
    if (inner) return inner;
  }
  return undefined;
}
