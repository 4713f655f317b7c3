import type pg from 'pg';
import { DAY_MS } from '../projections/audit-usage.js';

/** Spec §2.12 DailyUsage: one UTC day's totals across every project of an organization (deleted ones included). */
export interface DailyUsage {
  /** The UTC day, `YYYY-MM-DD`. */
  readonly date: string;
  readonly bytes_transferred: number;
  readonly cache_hits: number;
  readonly cache_misses: number;
  readonly connection_seconds: number;
}

/** int8 arrives as bigint and numeric sums as strings (src/pg/pool.ts). */
const num = (value: bigint | string | null) => (value === null ? 0 : Number(value));

/**
 * The `days` UTC days ending with the one holding `now`, oldest first, every day listed. Bytes and
 * cache counts come from the hourly audit rollup (a `stale` answer was served from the cache: a hit);
 * connection seconds from the wire sessions' connections, each clipped to the day: opened to closed
 * as their proxies recorded them. One not (yet) recorded as closed counts to its last decision; a
 * session with decisions but no recorded connection (marks a proxy dropped, or recorded before
 * proxies sent them) from its first decision to its last.
 */
export async function dailyUsage(db: pg.Pool, orgId: string, days: number, now: Date): Promise<DailyUsage[]> {
  const last = Math.floor(now.getTime() / DAY_MS);
  const first = last - days + 1;
  const starts = Array.from({ length: days }, (_, i) => new Date((first + i) * DAY_MS).toISOString());
  const projects = `select project_id from rm.projects where org_id = $1`;
  const [traffic, connections] = await Promise.all([
    db.query<{ day: string; bytes: string; hits: string | null; misses: string | null }>(
      `select (floor(extract(epoch from hour) / 86400))::int8::text as day, sum(bytes_out) as bytes,
              sum(entries) filter (where cache_status in ('hit', 'stale')) as hits, sum(entries) filter (where cache_status = 'miss') as misses
         from rm.audit_usage_hourly where project_id in (${projects}) and hour >= $2 and hour < $3 group by 1`,
      [orgId, starts[0], new Date((last + 1) * DAY_MS)],
    ),
    db.query<{ day: Date; seconds: string | null }>(
      `with connections as (
         select coalesce(c.opened_at, s.first_at, c.closed_at) as first_at, coalesce(c.closed_at, greatest(c.opened_at, s.last_at)) as last_at
           from (select * from rm.wire_connections where project_id in (${projects}) and (closed_at is null or closed_at > $3)) c
           full join (select * from rm.session_spans where project_id in (${projects}) and last_at > $3) s using (project_id, session_id))
       select d.day, sum(extract(epoch from least(s.last_at, d.day + interval '24 hours') - greatest(s.first_at, d.day))) as seconds
         from unnest($2::timestamptz[]) as d(day)
         join connections s on s.first_at < d.day + interval '24 hours' and s.last_at > d.day
        group by d.day`,
      [orgId, starts, starts[0]],
    ),
  ]);
  const byDay = new Map(traffic.rows.map((row) => [Number(row.day), row]));
  const seconds = new Map(connections.rows.map((row) => [Math.floor(row.day.getTime() / DAY_MS), num(row.seconds)]));
  return starts.map((start, i) => {
    const row = byDay.get(first + i);
    return {
      date: start.slice(0, 10),
      bytes_transferred: row ? num(row.bytes) : 0,
      cache_hits: row ? num(row.hits) : 0,
      cache_misses: row ? num(row.misses) : 0,
      connection_seconds: seconds.get(first + i) ?? 0,
    };
  });
}

/** Spec §2.12 BillingHealthSummary entries: organizations counted by plan, billing provider and subscription status. */
export async function billingHealth(db: pg.Pool): Promise<{ plan: string; billing_provider: string; subscription_status: string; org_count: number }[]> {
  const { rows } = await db.query<{ plan: string; billing_provider: string; subscription_status: string; org_count: bigint }>(
    `select plan, billing_provider, subscription_status, count(*) as org_count from rm.organizations
      group by plan, billing_provider, subscription_status order by plan, billing_provider, subscription_status`,
  );
  return rows.map((row) => ({ ...row, org_count: Number(row.org_count) }));
}
