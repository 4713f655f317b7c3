import type pg from 'pg';
import { DAY_MS, HOUR_MS } from '../projections/audit-usage.js';
import type { AuditEntryEvent } from '../src/audit/entry.js';
import { histogramPercentiles, latencyBucketSql, OCTAVE_BUCKETS } from '../src/audit/latency-buckets.js';
import { DROP_MARKERS_READ, outcomeOf, type DropMarker, type EntryGroup, type LatencyPercentiles } from '../src/audit/usage.js';
import { AuditEventKind } from '../src/events/audit.js';
import { inTransaction } from '../src/pg/transaction.js';

export interface UsageRows {
  readonly groups: EntryGroup[];
  readonly percentiles: Map<string | null, LatencyPercentiles>;
  readonly totalPercentiles: LatencyPercentiles | undefined;
  readonly markers: DropMarker[];
}

/** Up to this many entries in the window, percentiles are exact (percentile_disc over the entries); above, they come from the latency histograms. */
export const EXACT_PERCENTILES_MAX_ENTRIES = 10_000;

/** Entries whose latency is a measurement: the events of statements that ran. */
const ranEvents = AuditEventKind.options.filter((event) => outcomeOf(event).ran);

/** int8 arrives as bigint and numeric sums as strings (src/pg/pool.ts). */
const num = (value: bigint | string) => Number(value);

/**
 * [start, end) cut at `unit` boundaries: the whole units inside it, [inner_start, inner_end), and
 * the partial edges [start, inner_start) and [inner_end, end). Without a whole unit, the inner
 * range is empty at `end` and the first edge is the whole window.
 */
export function splitWindow(start: Date, end: Date, unit: number): { innerStart: Date; innerEnd: Date } {
  const innerStart = Math.ceil(start.getTime() / unit) * unit;
  const innerEnd = Math.floor(end.getTime() / unit) * unit;
  return innerStart < innerEnd ? { innerStart: new Date(innerStart), innerEnd: new Date(innerEnd) } : { innerStart: end, innerEnd: end };
}

/** Entries of the window's edges: $1 project, [$2, $4) and [$5, $3). */
const atEdges = 'project_id = $1 and ((ts_at >= $2 and ts_at < $4) or (ts_at >= $5 and ts_at < $3))';

type Percentiles = Pick<UsageRows, 'percentiles' | 'totalPercentiles'>;

async function exactPercentiles(client: pg.ClientBase, projectId: string, start: Date, end: Date): Promise<Percentiles> {
  const { rows } = await client.query<{ total: boolean; credential_id: string | null; us: LatencyPercentiles | null }>(
    `select grouping(credential_id) = 1 as total, credential_id,
            (percentile_disc(array[0.5, 0.95, 0.99]) within group (order by latency_us))::float8[] as us
       from rm.audit_entries where project_id = $1 and ts_at >= $2 and ts_at < $3 and event = any($4) and latency_us is not null
      group by grouping sets ((credential_id), ())`,
    [projectId, start, end, ranEvents],
  );
  return {
    percentiles: new Map(rows.filter((row) => !row.total && row.us).map((row) => [row.credential_id, row.us!])),
    totalPercentiles: rows.find((row) => row.total)?.us ?? undefined,
  };
}

/** Percentiles from the daily latency histograms of the whole days, plus the partial days' entries bucketed the same way. */
async function histogramPercentilesOf(client: pg.ClientBase, projectId: string, start: Date, end: Date): Promise<Percentiles> {
  const { innerStart, innerEnd } = splitWindow(start, end, DAY_MS);
  const { rows } = await client.query<{ credential: string; bucket: bigint; entries: string }>(
    `select credential, bucket, sum(entries) as entries from (
       select d.credential, d.octave * ${OCTAVE_BUCKETS} + b.n - 1 as bucket, b.entries from rm.audit_latency_octaves d, unnest(d.buckets) with ordinality as b (entries, n)
        where d.project_id = $1 and d.day >= $4 and d.day < $5 and b.entries > 0
       union all
       select coalesce(credential_id, ''), ${latencyBucketSql('latency_us')}, 1 from rm.audit_entries
        where ${atEdges} and event = any($6) and latency_us is not null
     ) h group by credential, bucket`,
    [projectId, start, end, innerStart, innerEnd, ranEvents],
  );
  const histograms = new Map<string | null, Map<number, number>>();
  const total = new Map<number, number>();
  for (const row of rows) {
    const credential = row.credential === '' ? null : row.credential;
    const histogram = histograms.get(credential) ?? new Map<number, number>();
    const bucket = Number(row.bucket);
    histograms.set(credential, histogram.set(bucket, num(row.entries)));
    total.set(bucket, (total.get(bucket) ?? 0) + num(row.entries));
  }
  return {
    percentiles: new Map([...histograms].map(([credential, histogram]) => [credential, histogramPercentiles(histogram)!])),
    totalPercentiles: histogramPercentiles(total),
  };
}

/**
 * What the usage report of [start, end) needs, in one snapshot: the entries grouped by credential,
 * event, cache status and whether they carry a latency (whole hours from the hourly rollup, the
 * partial hours at the edges from the entries); nearest-rank latency percentiles per credential and
 * overall; and the oldest gap markers.
 */
export async function agentUsageRows(db: pg.Pool, projectId: string, start: Date, end: Date, exactPercentilesMaxEntries = EXACT_PERCENTILES_MAX_ENTRIES): Promise<UsageRows> {
  return inTransaction(db, async (client) => {
    await client.query('set transaction isolation level repeatable read, read only');
    const { innerStart, innerEnd } = splitWindow(start, end, HOUR_MS);
    const grouped = await client.query<{ credential_id: string | null; event: AuditEntryEvent; cache_status: EntryGroup['cache_status']; timed: boolean; entries: string; rows_returned: string; bytes_out: string; latency_us: string; first_seen: Date; last_seen: Date }>(
      `select nullif(credential, '') as credential_id, event, cache_status, timed, sum(entries) as entries, sum(rows_returned) as rows_returned,
              sum(bytes_out) as bytes_out, sum(latency_us) as latency_us, min(first_seen) as first_seen, max(last_seen) as last_seen
         from (
           select credential, event, cache_status, timed, entries, rows_returned, bytes_out, latency_us, first_seen, last_seen
             from rm.audit_usage_hourly where project_id = $1 and hour >= $4 and hour < $5
           union all
           select coalesce(credential_id, ''), event, cache_status, latency_us is not null, 1, rows_returned, bytes_out, coalesce(latency_us, 0), ts_at, ts_at
             from rm.audit_entries where ${atEdges}
         ) g
        group by credential, event, cache_status, timed`,
      [projectId, start, end, innerStart, innerEnd],
    );
    const groups = grouped.rows.map((row) => ({
      ...row,
      entries: num(row.entries),
      rows_returned: num(row.rows_returned),
      bytes_out: num(row.bytes_out),
      latency_us: num(row.latency_us),
      first_seen: row.first_seen.toISOString(),
      last_seen: row.last_seen.toISOString(),
    }));
    const entries = groups.reduce((sum, group) => sum + group.entries, 0);
    const percentiles = entries <= exactPercentilesMaxEntries ? await exactPercentiles(client, projectId, start, end) : await histogramPercentilesOf(client, projectId, start, end);
    const markers = await client.query<{ reason: string; count: number | null }>(
      `select reason, gap->'count' as count from rm.audit_entries
        where project_id = $1 and event = 'gap_marker' and ts_at >= $2 and ts_at < $3 order by ts_at, seq limit $4`,
      [projectId, start, end, DROP_MARKERS_READ + 1],
    );
    return { groups, ...percentiles, markers: markers.rows.map((row) => ({ reason: row.reason, count: typeof row.count === 'number' ? row.count : null })) };
  });
}
