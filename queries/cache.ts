import type pg from 'pg';
import type { CacheControlsRow } from '../projections/cache-controls.js';
import { OCTAVE_BUCKETS } from '../src/audit/latency-buckets.js';

/** A database's cache counts over the audit trail: hits (fresh or stale) and misses. */
export async function cacheTotals(db: pg.Pool, projectId: string, databaseId: string): Promise<{ hits: number; misses: number }> {
  const { rows } = await db.query<{ hits: string; misses: string }>(
    `select coalesce(sum(u.entries) filter (where u.cache_status in ('hit', 'stale')), 0) as hits,
            coalesce(sum(u.entries) filter (where u.cache_status = 'miss'), 0) as misses
       from rm.audit_usage_hourly u join rm.credentials c on c.credential_id = u.credential
      where u.project_id = $1 and c.database_id = $2`,
    [projectId, databaseId],
  );
  return { hits: Number(rows[0]!.hits), misses: Number(rows[0]!.misses) };
}

/** A statement shape's figures summed over the database's credentials (projections/cache-shapes.ts); zeros for a shape only overridden. */
export interface ShapeStats {
  query_hash: string;
  normalized_sql: string;
  statement_kind: string;
  calls: number;
  timed: number;
  latency_us: number;
  bytes_out: number;
  refreshes: number;
  same_results: number;
  first_seen: string | null;
  last_seen: string | null;
  /** Latency bucket → entries. */
  histogram: Map<number, number>;
}

/**
 * The database's statement shapes in query_hash order after `after` (at most `limit`; only `only`
 * when given): those its credentials ran, and those it has an override for.
 */
export async function listShapeStats(db: pg.Pool, projectId: string, databaseId: string, page: { after?: string; limit: number; only?: string }): Promise<ShapeStats[]> {
  const { rows } = await db.query<Omit<ShapeStats, 'histogram'> & Record<'calls' | 'timed' | 'latency_us' | 'bytes_out' | 'refreshes' | 'same_results', string>>(
    `with stats as (
       select s.query_hash, min(s.normalized_sql) as normalized_sql, min(s.statement_kind) as statement_kind, sum(s.calls) as calls, sum(s.timed) as timed,
              sum(s.latency_us) as latency_us, sum(s.bytes_out) as bytes_out, sum(s.refreshes) as refreshes, sum(s.same_results) as same_results,
              min(s.first_seen) as first_seen, max(s.last_seen) as last_seen
         from rm.cache_shapes s join rm.credentials c on c.credential_id = s.credential
        where s.project_id = $1 and c.database_id = $2 and s.query_hash > $3 and ($5::text is null or s.query_hash = $5)
        group by s.query_hash),
     overridden as (
       select key as query_hash from rm.cache_controls cc, jsonb_object_keys(cc.rules) as key
        where cc.database_id = $2 and key > $3 and ($5::text is null or key = $5))
     select query_hash, coalesce(normalized_sql, '') as normalized_sql, coalesce(statement_kind, '') as statement_kind,
            coalesce(calls, 0) as calls, coalesce(timed, 0) as timed, coalesce(latency_us, 0) as latency_us, coalesce(bytes_out, 0) as bytes_out,
            coalesce(refreshes, 0) as refreshes, coalesce(same_results, 0) as same_results,
            to_char(first_seen at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as first_seen, to_char(last_seen at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as last_seen
       from stats full join overridden using (query_hash)
      order by query_hash limit $4`,
    [projectId, databaseId, page.after ?? '', page.limit, page.only ?? null],
  );
  const hashes = rows.map((row) => row.query_hash);
  const { rows: buckets } = await db.query<{ query_hash: string; bucket: number; entries: string }>(
    `select h.query_hash, (h.octave * ${OCTAVE_BUCKETS} + b.n - 1)::integer as bucket, sum(b.entries) as entries
       from rm.cache_shape_latency_octaves h join rm.credentials c on c.credential_id = h.credential, unnest(h.buckets) with ordinality as b (entries, n)
      where h.project_id = $1 and c.database_id = $2 and h.query_hash = any($3::text[]) and b.entries > 0
      group by h.query_hash, h.octave, b.n`,
    [projectId, databaseId, hashes],
  );
  const histograms = new Map(hashes.map((hash) => [hash, new Map<number, number>()]));
  for (const { query_hash, bucket, entries } of buckets) histograms.get(query_hash)!.set(bucket, Number(entries));
  return rows.map((row) => ({
    ...row,
    calls: Number(row.calls), timed: Number(row.timed), latency_us: Number(row.latency_us), bytes_out: Number(row.bytes_out),
    refreshes: Number(row.refreshes), same_results: Number(row.same_results), histogram: histograms.get(row.query_hash)!,
  }));
}

/** The database's cache controls (overrides, purges), or undefined when none were ever set. */
export async function findCacheControls(db: pg.Pool, databaseId: string): Promise<CacheControlsRow | undefined> {
  const { rows } = await db.query<{ row: CacheControlsRow }>(`select to_jsonb(r) as row from rm.cache_controls r where database_id = $1`, [databaseId]);
  return rows[0]?.row;
}
