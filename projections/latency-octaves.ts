/**
 * Latency histograms stored a row an octave (latency-buckets.ts OCTAVE_BUCKETS): the audit
 * projection's per day and credential (projections/audit-usage.ts) and per statement shape
 * (projections/cache-shapes.ts). Each row holds the counts of one octave's 64 buckets; a batch
 * updates, in place, the rows its latencies fell in, and adds rows for octaves it is the first in.
 */
import { OCTAVE_BUCKETS, octavesOf } from '../src/audit/latency-buckets.js';
import { ROLLUP_FILLFACTOR, type ReadModelTable } from './projection.js';
import type { Upsert } from './upserts.js';

/** A key column of a histogram: its name and type. */
export type KeyColumn = readonly [name: string, type: string];

/** Where an earlier version kept the same histograms: a table of a row a bucket, then a bigint[] of every bucket in a column. */
export interface EarlierLayouts {
  readonly rowsTable: string;
  readonly arrays: { readonly table: string; readonly column: string; readonly tableStays: boolean };
}

/** `c = ` the element-wise sum of the stored and the new row's counts: the same row however the entries were batched. */
const summedBuckets = (column: string): string =>
  `${column} = array(select coalesce(x, 0) + coalesce(y, 0) from unnest(t.${column}, excluded.${column}) with ordinality as u (x, y, i) order by i)`;

/**
 * Adds the histograms of `buckets` (a query of rows of the `keys`, bucket and entries: a row a bucket
 * of each key, as earlier layouts are read) to the rows of `into`, merged with the rows there by `merge`.
 */
function addOctaveRows(into: string, keys: readonly string[], buckets: string, merge: string): string {
  const of = (alias: string) => keys.map((key) => `${alias}.${key}`).join(', ');
  return `insert into ${into} as t (${keys.join(', ')}, octave, buckets)
    with b as (${buckets}), o as (select distinct ${keys.join(', ')}, bucket / ${OCTAVE_BUCKETS} as octave from b where entries > 0)
    select ${of('o')}, o.octave, array_agg(coalesce(b.entries, 0) order by g.i)
      from o cross join generate_series(0, ${OCTAVE_BUCKETS - 1}) as g (i)
      left join b on ${keys.map((key) => `b.${key} = o.${key}`).join(' and ')} and b.bucket = o.octave * ${OCTAVE_BUCKETS} + g.i
     group by ${of('o')}, o.octave
    on conflict ${merge}`;
}

/** A table of histograms and the upsert that adds a batch's to it. */
export interface OctaveHistograms {
  readonly table: ReadModelTable;
  /** Adds `histograms` (each of the table's key columns and `buckets`, countBucket's dense counts). */
  upsert(histograms: readonly { readonly buckets: readonly number[] }[]): Upsert;
}

/** The table `name` of histograms keyed by `keys`, made of the rows of its earlier layouts where a store has them. */
export function octaveHistograms(name: string, keys: readonly KeyColumn[], earlier: EarlierLayouts): OctaveHistograms {
  const keyNames = keys.map(([key]) => key);
  const names = keyNames.join(', ');
  // A row's key already there: its counts and the new ones summed, bucket by bucket.
  const merge = `(${names}, octave) do update set ${summedBuckets('buckets')}`;
  const fromArrays = (from: string) => `select ${keyNames.map((key) => `h.${key}`).join(', ')}, b.n - 1 as bucket, b.entries
    from ${from} h, unnest(h.${earlier.arrays.column}) with ordinality as b (entries, n)`;
  return {
    table: {
      name,
      fillfactor: ROLLUP_FILLFACTOR,
      columns: `${keys.map(([key, type]) => `${key} ${type} not null`).join(', ')}, octave integer not null, buckets bigint[] not null, primary key (${names}, octave)`,
      orderBy: `${names}, octave`,
      absorbs: [
        { table: earlier.rowsTable, copy: (into, from) => addOctaveRows(into, keyNames, `select ${names}, bucket, entries from ${from}`, merge) },
        { table: earlier.arrays.table, ...(earlier.arrays.tableStays ? { column: earlier.arrays.column } : {}), copy: (into, from) => addOctaveRows(into, keyNames, fromArrays(from), merge) },
      ],
    },
    upsert: (histograms) => ({
      table: name,
      rows: histograms.flatMap(({ buckets, ...key }) => octavesOf(buckets).map((row) => ({ ...key, ...row }))),
      onConflict: merge,
    }),
  };
}
