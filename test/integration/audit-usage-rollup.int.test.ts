/**
 * The usage report from rollups (whole hours and days) plus exact edge scans equals the report a
 * naive scan of the window's entries gives, for random traffic and random windows, against the
 * real PostgreSQL read model the audit projection writes.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditProjection, auditStream } from '../../projections/audit.js';
import { rebuildAndVerify } from '../../projections/maintenance.js';
import { runProjection, type RunningProjection } from '../../projections/runner.js';
import { agentUsageRows, splitWindow } from '../../queries/audit-usage.js';
import { GAP_MARKER } from '../../src/audit/entry.js';
import { bucketFloor, latencyBucket } from '../../src/audit/latency-buckets.js';
import { agentUsageReport, outcomeOf, type AgentUsageReport, type DropMarker, type EntryGroup, type LatencyPercentiles } from '../../src/audit/usage.js';
import { AuditEventKind, AuditGapRecorded, CacheStatus, StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { plans } from '../../src/plans.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { placed } from '../support/decisions.js';

const HOUR = 3_600_000;
const ORIGIN = Date.parse('2026-03-01T00:00:00.000Z');
/** Traffic spans three days, so windows cover whole days, whole hours and partial edges. */
const SPAN = 3 * 24 * HOUR;

let database: TestDatabase;
let store: PostgresEventStore;
let pool: pg.Pool;
let runner: RunningProjection;

beforeAll(async () => {
  database = await freshDatabase('audit_usage_rollup');
  store = await createPostgresEventStore(database.url);
  pool = createPool(database.url);
  runner = runProjection({ store, pool, projection: auditProjection({ keys: new Map() }) });
  await runner.active;
});

afterAll(async () => {
  await runner?.stop();
  await store?.close();
  await pool?.end();
  await database?.drop();
});

/** One entry of generated traffic, as the report sees it. */
interface Sent {
  readonly ts: number;
  readonly credential: string | null;
  readonly event: AuditEventKind | typeof GAP_MARKER;
  readonly cache: CacheStatus;
  readonly rows: number;
  readonly bytes: number;
  readonly latencyUs: number | null;
  readonly gapCount: number | null;
}

/** Instants cluster on hour and day boundaries, where the rollups and the edges meet. */
const instant = fc.oneof(
  fc.integer({ min: 0, max: SPAN - 1 }),
  fc.integer({ min: 0, max: 72 }).chain((hour) => fc.integer({ min: -2, max: 2 }).map((ms) => Math.min(SPAN - 1, Math.max(0, hour * HOUR + ms)))),
);

const sent: fc.Arbitrary<Sent> = fc.record({
  ts: instant,
  credential: fc.constantFrom(null, 'agt_aaaaaaaaaaaaaaaaaaaaaaaa', 'agt_bbbbbbbbbbbbbbbbbbbbbbbb', 'agt_cccccccccccccccccccccccc'),
  event: fc.constantFrom(...AuditEventKind.options, GAP_MARKER),
  cache: fc.constantFrom(...CacheStatus.options),
  rows: fc.nat({ max: 1000 }),
  bytes: fc.nat({ max: 1_000_000 }),
  latencyUs: fc.option(fc.oneof(fc.nat({ max: 200 }), fc.integer({ min: 200, max: 30_000_000 })), { nil: null }),
  gapCount: fc.option(fc.nat({ max: 50 }), { nil: null }),
});

const window = fc.tuple(instant, instant).filter(([a, b]) => a !== b).map(([a, b]) => ({ start: Math.min(a, b), end: Math.max(a, b) }));

const iso = (ms: number) => new Date(ORIGIN + ms).toISOString();

function eventOf(projectId: string, s: Sent, n: number) {
  const meta = { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: iso(s.ts) };
  if (s.event === GAP_MARKER) {
    const gap = { project_id: projectId, proxy_id: 'px', boot_epoch: 1, from_seq: '1', to_seq: '2', count: s.gapCount === null ? null : String(s.gapCount), reason: `r${n % 3}`, ts: iso(s.ts) };
    return encodeEvent(AuditGapRecorded, gap, meta);
  }
  const decision: StatementDecided = placed({
    event: s.event, project_id: projectId, credential_id: s.credential, session_id: 'px.1.1', source: 'wire', region: 'local', client_ip: '', ts: iso(s.ts), sql: 'select 1',
    normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: s.cache, rows_returned: String(s.rows), bytes_out: String(s.bytes),
    latency_us: s.latencyUs, tables_read: [], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'px', boot_epoch: 1, seq: String(n + 1), approval_id: 'apr_aaaaaaaaaaaaaaaaaaaaaaaa',
  });
  return encodeEvent(StatementDecided, decision, meta);
}

async function appendTraffic(traffic: readonly Sent[]): Promise<string> {
  const projectId = `prj_${randomUUID().replace(/-/g, '').slice(0, 26)}`;
  await store.append(auditStream(projectId), traffic.map((s, n) => eventOf(projectId, s, n)), 'any');
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from rm.audit_entries where project_id = $1', [projectId]);
    if (rows[0]!.n === traffic.length) return projectId;
    if (Date.now() > deadline) throw new Error(`projected ${rows[0]!.n} of ${traffic.length} entries`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Nearest rank ⌈p·n⌉, as percentile_disc. */
function nearestRank(sorted: readonly number[]): LatencyPercentiles | undefined {
  if (sorted.length === 0) return undefined;
  const at = (p: number) => sorted[Math.max(1, Math.ceil(p * sorted.length)) - 1]!;
  return [at(0.5), at(0.95), at(0.99)];
}

/** The report's inputs from a scan of the generated traffic alone: no SQL. */
function naive(traffic: readonly Sent[], start: number, end: number) {
  const inWindow = traffic
    .map((s, n) => ({ ...s, n }))
    .filter((s) => s.ts >= start && s.ts < end)
    .map((s) => (s.event === GAP_MARKER ? { ...s, credential: null, cache: 'none' as const, latencyUs: null, rows: 0, bytes: 0 } : s));
  const groups = new Map<string, EntryGroup>();
  for (const s of inWindow) {
    const key = JSON.stringify([s.credential, s.event, s.cache, s.latencyUs !== null]);
    const group = groups.get(key);
    const ts = iso(s.ts);
    groups.set(key, {
      credential_id: s.credential, event: s.event, cache_status: s.cache, timed: s.latencyUs !== null,
      entries: (group?.entries ?? 0) + 1, rows_returned: (group?.rows_returned ?? 0) + s.rows, bytes_out: (group?.bytes_out ?? 0) + s.bytes, latency_us: (group?.latency_us ?? 0) + (s.latencyUs ?? 0),
      first_seen: group && group.first_seen < ts ? group.first_seen : ts, last_seen: group && group.last_seen > ts ? group.last_seen : ts,
    });
  }
  const measured = inWindow.filter((s) => s.event !== GAP_MARKER && outcomeOf(s.event).ran && s.latencyUs !== null);
  const latencies = (of: readonly Sent[]) => of.map((s) => s.latencyUs!).sort((a, b) => a - b);
  const percentiles = new Map<string | null, LatencyPercentiles>();
  for (const credential of new Set(measured.map((s) => s.credential))) percentiles.set(credential, nearestRank(latencies(measured.filter((s) => s.credential === credential)))!);
  const markers: DropMarker[] = inWindow
    .filter((s) => s.event === GAP_MARKER)
    .sort((a, b) => a.ts - b.ts || a.n - b.n)
    .map((s) => ({ reason: `r${s.n % 3}`, count: s.gapCount }));
  return { groups: [...groups.values()], percentiles, totalPercentiles: nearestRank(latencies(measured)), markers };
}

function report(projectId: string, start: number, end: number, rows: Omit<Parameters<typeof agentUsageReport>[0], 'projectId' | 'requestedStart' | 'requestedEnd' | 'plan' | 'terms'>): AgentUsageReport {
  return agentUsageReport({ projectId, requestedStart: iso(start), requestedEnd: iso(end), plan: 'pro', terms: plans.pro, ...rows });
}

/** A percentile as the histogram path reports it: the floor of the exact value's bucket. */
const floored = (line: AgentUsageReport['totals']) => ({
  ...line,
  latency_p50_ms: bucketFloor(latencyBucket(Math.round(line.latency_p50_ms * 1000))) / 1000,
  latency_p95_ms: bucketFloor(latencyBucket(Math.round(line.latency_p95_ms * 1000))) / 1000,
  latency_p99_ms: bucketFloor(latencyBucket(Math.round(line.latency_p99_ms * 1000))) / 1000,
});

describe('usage report from rollups and exact edges', () => {
  it('splits a window at unit boundaries into whole units and partial edges', () => {
    const at = (s: string) => new Date(s);
    expect(splitWindow(at('2026-03-01T00:30:00Z'), at('2026-03-01T03:00:00Z'), HOUR)).toEqual({ innerStart: at('2026-03-01T01:00:00Z'), innerEnd: at('2026-03-01T03:00:00Z') });
    expect(splitWindow(at('2026-03-01T00:00:00Z'), at('2026-03-01T00:59:59.999Z'), HOUR)).toEqual({ innerStart: at('2026-03-01T00:59:59.999Z'), innerEnd: at('2026-03-01T00:59:59.999Z') });
    expect(splitWindow(at('2026-03-01T00:10:00Z'), at('2026-03-01T00:50:00Z'), HOUR)).toEqual({ innerStart: at('2026-03-01T00:50:00Z'), innerEnd: at('2026-03-01T00:50:00Z') });
  });

  it('equals a naive scan for random traffic and random windows; percentiles exact, or bucket floors on the histogram path', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(sent, { minLength: 1, maxLength: 300 }), fc.array(window, { minLength: 1, maxLength: 4 }), async (traffic, windows) => {
        const projectId = await appendTraffic(traffic);
        for (const { start, end } of windows) {
          const expected = report(projectId, start, end, naive(traffic, start, end));
          const exact = report(projectId, start, end, await agentUsageRows(pool, projectId, new Date(ORIGIN + start), new Date(ORIGIN + end)));
          expect(exact).toEqual(expected);
          const histogram = report(projectId, start, end, await agentUsageRows(pool, projectId, new Date(ORIGIN + start), new Date(ORIGIN + end), 0));
          expect(histogram).toEqual({ ...expected, agents: expected.agents.map(floored), unattributed: floored(expected.unattributed), totals: floored(expected.totals) });
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe('rollup sums past 2^53 - 1', () => {
  it('are exact, so a rebuild that batches the entries otherwise gives the same rollups', async () => {
    const big: Sent = { ts: 0, credential: null, event: 'query', cache: 'miss', rows: Number.MAX_SAFE_INTEGER - 2, bytes: Number.MAX_SAFE_INTEGER, latencyUs: Number.MAX_SAFE_INTEGER - 8, gapCount: null };
    // Three appends, each projected alone (the sums add up in SQL), then one rebuild of the three in one batch (they add up in JS first).
    const projectId = await appendTraffic([big]);
    for (const n of [1, 2]) {
      await store.append(auditStream(projectId), [eventOf(projectId, big, n)], 'any');
      const deadline = Date.now() + 10_000;
      while ((await pool.query('select 1 from rm.audit_entries where project_id = $1', [projectId])).rowCount! <= n) {
        if (Date.now() > deadline) throw new Error('not projected');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const { rows } = await pool.query<{ rows_returned: string; bytes_out: string; latency_us: string }>(
      'select rows_returned::text, bytes_out::text, latency_us::text from rm.audit_usage_hourly where project_id = $1',
      [projectId],
    );
    const thrice = (n: number) => String(3n * BigInt(n));
    expect(rows).toEqual([{ rows_returned: thrice(big.rows), bytes_out: thrice(big.bytes), latency_us: thrice(big.latencyUs!) }]);
    expect(await rebuildAndVerify(store, pool, auditProjection({ keys: new Map() }))).toMatchObject({ identical: true });
  });
});
