/**
 * What the result cache's recommendations are made of (docs/cache.md, "Rules and
 * recommendations"): per project, credential and statement shape (query_hash), the entries that
 * ran, their latencies, bytes and how often a run upstream returned what the shape's previous run
 * had. The audit projection writes them from the entries it chains, in the same transaction, as it
 * writes the usage rollups (projections/audit-usage.ts). A database's rules sum its credentials' rows.
 *
 * A run upstream is an entry that ran and was not answered from the cache (`miss`, `bypass`); a
 * refresh is a run upstream after an earlier one of the same credential and shape, and it returned
 * the same result when it returned as many rows and bytes. The entries of one project come in its
 * stream's order however they are batched, so the counts are the same in a rebuild.
 */
import { countBucket, latencyBucket } from '../src/audit/latency-buckets.js';
import { outcomeOf } from '../src/audit/usage.js';
import type { AuditEntryContent } from '../src/audit/entry.js';
import { add, type Sum } from './audit-usage.js';
import { ROLLUP_FILLFACTOR, type ReadModelTable } from './projection.js';
import { octaveHistograms } from './latency-octaves.js';
import { added, type Upsert } from './upserts.js';

interface ShapeRow {
  project_id: string;
  credential: string;
  query_hash: string;
  normalized_sql: string;
  statement_kind: string;
  calls: number;
  timed: number;
  latency_us: Sum;
  bytes_out: Sum;
  runs: number;
  refreshes: number;
  same_results: number;
  /** The first and the last run upstream of the batch (of the shape, after merging): rows and bytes. */
  first_rows: number | null;
  first_bytes: number | null;
  last_rows: number | null;
  last_bytes: number | null;
  first_seen: string;
  last_seen: string;
  /** The batch's histogram of the latencies: the count of latency bucket n at index n (latency-buckets.ts countBucket), stored in cache_shape_latency_octaves. */
  latency_buckets: number[];
}

const FROM_CACHE: ReadonlySet<string> = new Set(['hit', 'stale']);

/** The shapes' rows of a batch of entries (in their streams' order). */
export function shapeRollup(entries: readonly AuditEntryContent[]): ShapeRow[] {
  const shapes = new Map<string, ShapeRow>();
  for (const entry of entries) {
    if (entry.query_hash === '' || !outcomeOf(entry.event).ran) continue;
    const credential = entry.credential_id ?? '';
    // Query hashes are hex, credential ids hold no space: the three make one key.
    const key = `${entry.query_hash} ${credential} ${entry.project_id}`;
    let row = shapes.get(key);
    if (!row) {
      row = {
        project_id: entry.project_id, credential, query_hash: entry.query_hash, normalized_sql: entry.normalized_sql, statement_kind: entry.statement_kind,
        calls: 0, timed: 0, latency_us: 0, bytes_out: 0, runs: 0, refreshes: 0, same_results: 0,
        first_rows: null, first_bytes: null, last_rows: null, last_bytes: null, first_seen: entry.ts, last_seen: entry.ts, latency_buckets: [],
      };
      shapes.set(key, row);
    }
    row.calls += 1;
    row.bytes_out = add(row.bytes_out, entry.bytes_out);
    if (entry.ts < row.first_seen) row.first_seen = entry.ts;
    if (entry.ts > row.last_seen) row.last_seen = entry.ts;
    if (entry.latency_us !== null) {
      row.timed += 1;
      row.latency_us = add(row.latency_us, entry.latency_us);
      countBucket(row.latency_buckets, latencyBucket(entry.latency_us));
    }
    if (FROM_CACHE.has(entry.cache_status)) continue;
    if (row.runs === 0) {
      row.first_rows = entry.rows_returned;
      row.first_bytes = entry.bytes_out;
    } else {
      row.refreshes += 1;
      if (entry.rows_returned === row.last_rows && entry.bytes_out === row.last_bytes) row.same_results += 1;
    }
    row.runs += 1;
    row.last_rows = entry.rows_returned;
    row.last_bytes = entry.bytes_out;
  }
  return [...shapes.values()];
}

/** Each shape's histogram of latencies (a column of cache_shapes before). */
const latencyOctaves = octaveHistograms(
  'cache_shape_latency_octaves',
  [['project_id', 'text'], ['credential', 'text'], ['query_hash', 'text']],
  { rowsTable: 'cache_shape_latency', arrays: { table: 'cache_shapes', column: 'latency_buckets', tableStays: true } },
);

export const cacheShapeTables: readonly ReadModelTable[] = [
  {
    name: 'cache_shapes',
    fillfactor: ROLLUP_FILLFACTOR,
    columns: `project_id text not null, credential text not null, query_hash text not null, normalized_sql text not null, statement_kind text not null,
      calls bigint not null, timed bigint not null, latency_us bigint not null, bytes_out bigint not null, runs bigint not null, refreshes bigint not null,
      same_results bigint not null, first_rows bigint, first_bytes bigint, last_rows bigint, last_bytes bigint,
      first_seen timestamptz not null, last_seen timestamptz not null, primary key (project_id, credential, query_hash)`,
    orderBy: 'project_id, credential, query_hash',
  },
  latencyOctaves.table,
];

/** A batch's first run upstream follows the stored last one: one more refresh, the same result when both match. */
const BRIDGE = 'excluded.runs > 0 and t.runs > 0';
const SAME = `${BRIDGE} and t.last_rows = excluded.first_rows and t.last_bytes = excluded.first_bytes`;

/** The upserts that add the entries (in their streams' order) to cacheShapeTables. */
export function cacheShapeUpserts(entries: readonly AuditEntryContent[]): Upsert[] {
  const shapes = shapeRollup(entries);
  const lastOf = (column: string) => `${column} = case when excluded.runs > 0 then excluded.${column} else t.${column} end`;
  const firstOf = (column: string) => `${column} = case when t.runs > 0 then t.${column} else excluded.${column} end`;
  return [
    {
      table: 'cache_shapes',
      rows: shapes.map(({ latency_buckets: _, ...row }) => row),
      onConflict: `(project_id, credential, query_hash) do update set ${added(['calls', 'timed', 'latency_us', 'bytes_out'])},
        refreshes = t.refreshes + excluded.refreshes + (case when ${BRIDGE} then 1 else 0 end),
        same_results = t.same_results + excluded.same_results + (case when ${SAME} then 1 else 0 end),
        ${firstOf('first_rows')}, ${firstOf('first_bytes')}, ${lastOf('last_rows')}, ${lastOf('last_bytes')}, runs = t.runs + excluded.runs,
        first_seen = least(t.first_seen, excluded.first_seen), last_seen = greatest(t.last_seen, excluded.last_seen)`,
    },
    latencyOctaves.upsert(shapes.map(({ project_id, credential, query_hash, latency_buckets }) => ({ project_id, credential, query_hash, buckets: latency_buckets }))),
  ];
}
