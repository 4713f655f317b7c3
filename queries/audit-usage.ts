import type pg from 'pg';
import type { AuditEntryEvent } from '../src/audit/entry.js';
import { DROP_MARKERS_READ, outcomeOf, type DropMarker, type EntryGroup, type LatencyPercentiles } from '../src/audit/usage.js';
import { AuditEventKind } from '../src/events/audit.js';
import { inTransaction } from '../src/pg/transaction.js';

export interface UsageRows {
  readonly groups: EntryGroup[];
  readonly percentiles: Map<string | null, LatencyPercentiles>;
  readonly totalPercentiles: LatencyPercentiles | undefined;
  readonly markers: DropMarker[];
}

/** Entries whose latency is a measurement: the events of statements that ran. */
const ranEvents = AuditEventKind.options.filter((event) => outcomeOf(event).ran);

/** int8 arrives as bigint and numeric sums as strings (src/pg/pool.ts). */
const num = (value: bigint | string) => Number(value);

const inWindow = 'project_id = $1 and ts_at >= $2 and ts_at < $3';

/**
 * What the usage report of [start, end) needs, in one snapshot: the entries grouped by
 * credential, event, cache status and whether they carry a latency; nearest-rank latency
 * percentiles per credential and overall; and the oldest gap markers.
 */
export async function agentUsageRows(db: pg.Pool, projectId: string, start: Date, end: Date): Promise<UsageRows> {
  return inTransaction(db, async (client) => {
    await client.query('set transaction isolation level repeatable read, read only');
    const groups = await client.query<{ credential_id: string | null; event: AuditEntryEvent; cache_status: EntryGroup['cache_status']; timed: boolean; entries: bigint; rows_returned: string; bytes_out: string; latency_us: string; first_seen: Date; last_seen: Date }>(
      `select credential_id, event, cache_status, latency_us is not null as timed, count(*) as entries, sum(rows_returned) as rows_returned,
              sum(bytes_out) as bytes_out, coalesce(sum(latency_us), 0) as latency_us, min(ts_at) as first_seen, max(ts_at) as last_seen
         from rm.audit_entries where ${inWindow}
        group by credential_id, event, cache_status, latency_us is not null`,
      [projectId, start, end],
    );
    const percentiles = await client.query<{ total: boolean; credential_id: string | null; us: LatencyPercentiles | null }>(
      `select grouping(credential_id) = 1 as total, credential_id,
              (percentile_disc(array[0.5, 0.95, 0.99]) within group (order by latency_us))::float8[] as us
         from rm.audit_entries where ${inWindow} and event = any($4) and latency_us is not null
        group by grouping sets ((credential_id), ())`,
      [projectId, start, end, ranEvents],
    );
    const markers = await client.query<{ reason: string; count: number | null }>(
      `select reason, gap->'count' as count from rm.audit_entries where ${inWindow} and event = 'gap_marker' order by ts_at, seq limit $4`,
      [projectId, start, end, DROP_MARKERS_READ + 1],
    );
    return {
      groups: groups.rows.map((row) => ({
        ...row,
        entries: num(row.entries),
        rows_returned: num(row.rows_returned),
        bytes_out: num(row.bytes_out),
        latency_us: num(row.latency_us),
        first_seen: row.first_seen.toISOString(),
        last_seen: row.last_seen.toISOString(),
      })),
      percentiles: new Map(percentiles.rows.filter((row) => !row.total && row.us).map((row) => [row.credential_id, row.us!])),
      totalPercentiles: percentiles.rows.find((row) => row.total)?.us ?? undefined,
      markers: markers.rows.map((row) => ({ reason: row.reason, count: typeof row.count === 'number' ? row.count : null })),
    };
  });
}
