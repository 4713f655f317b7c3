/**
 * Benchmark of the audit trail (`npm run bench:audit`): decisions ingested and chained end to end
 * (published on the in-process bus → ingest → event store → audit read model), chain verification
 * rate, and the agent usage report over 1,000,000 entries (by default). A measurement, not a test: figures
 * below target print BELOW; only errors exit non-zero.
 */
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import type pg from 'pg';
import { AUDIT_STREAM_PREFIX, auditProjection, auditStream } from '../../projections/audit.js';
import { runProjection } from '../../projections/runner.js';
import { agentUsageRows } from '../../queries/audit-usage.js';
import { auditCheckpoints, auditEntries, auditEntryPages } from '../../queries/audit.js';
import { agentUsageReport } from '../../src/audit/usage.js';
import { verifyChain, verifyChainPages, verifyChainParallel } from '../../src/audit/verify.js';
import { PreparedEntries } from '../../src/audit/prepared-entries.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { startIngest } from '../../src/ingest/ingest.js';
import { plans } from '../../src/plans.js';
import { createPool } from '../../src/pg/pool.js';
import { CommittedFeed } from '../../src/store/committed-feed.js';
import { createPostgresEventStore } from '../../src/store/postgres.js';
import { CpuMeter } from './e2e-cpu.js';
import { withBenchServer } from './server.js';
import { placed } from '../support/decisions.js';

const PROJECT = 'prj_benchaudit0000000000000000';
/** Smaller runs (for profiling) via PGWARD_BENCH_AUDIT_DECISIONS and PGWARD_BENCH_AUDIT_ENTRIES. */
const E2E_DECISIONS = Number(process.env.PGWARD_BENCH_AUDIT_DECISIONS ?? 100_000);
const TOTAL_ENTRIES = Math.max(E2E_DECISIONS, Number(process.env.PGWARD_BENCH_AUDIT_ENTRIES ?? 1_000_000));
/** Offered load of the end-to-end phase, above the 10,000/s target; PGWARD_BENCH_AUDIT_OFFERED to probe headroom. */
const OFFERED_PER_S = Number(process.env.PGWARD_BENCH_AUDIT_OFFERED ?? 12_000);
/** Decisions per bus record: the proxy sends what came in its 5 ms linger, about 10–20 at a few thousand statements a second; PGWARD_BENCH_AUDIT_BUS_BATCH to change. */
const BUS_BATCH = Number(process.env.PGWARD_BENCH_AUDIT_BUS_BATCH ?? 256);
const SEED_BATCH = 1_000;
const VERIFY_ENTRIES = Math.min(200_000, TOTAL_ENTRIES);
const USAGE_RUNS = 5;
const PHASE_TIMEOUT_MS = 300_000;
const SAMPLE_MS = 100;
/** The entries spread evenly over 30 days. */
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const SPACING_MS = (30 * 86_400_000) / TOTAL_ENTRIES;
const CREDENTIALS = ['agt_aaaaaaaaaaaaaaaaaaaaaaaa', 'agt_bbbbbbbbbbbbbbbbbbbbbbbb', 'agt_cccccccccccccccccccccccc', 'agt_dddddddddddddddddddddddd', 'agt_eeeeeeeeeeeeeeeeeeeeeeee'];
const EVENTS = ['query', 'query', 'query', 'query', 'query', 'query', 'masked', 'truncated', 'blocked', 'approval_requested'] as const;
const CACHE = ['hit', 'miss', 'miss', 'bypass', 'stale'] as const;

const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

function log(line: string): void {
  console.log(`[bench:audit] ${line}`);
}

/** Decision n, deterministic: its timestamp places it in the 30 days, its fields vary like traffic does. */
function decision(n: number): StatementDecided {
  const event = EVENTS[n % EVENTS.length]!;
  const ran = event === 'query' || event === 'masked' || event === 'truncated';
  return placed({
    event, project_id: PROJECT, credential_id: n % 11 === 0 ? null : CREDENTIALS[n % CREDENTIALS.length]!, session_id: `px.1.${n % 97}`, source: 'wire', region: 'local',
    client_ip: '10.0.0.1', ts: new Date(T0 + Math.floor(n * SPACING_MS)).toISOString(), sql: `select * from orders where id = ${n}`, normalized_sql: 'select * from orders where id = $1',
    query_hash: '0123456789abcdef', statement_kind: 'select', decision_rule: ran ? '' : 'deny', reason: '', cache_status: ran ? CACHE[n % CACHE.length]! : 'none',
    rows_returned: ran ? String(n % 50) : '0', bytes_out: ran ? String((n % 50) * 120) : '0', latency_us: ran ? 200 + ((n * 7919) % 50_000) : null, tables_read: ['public.orders'],
    tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'bench-proxy', boot_epoch: 1, seq: String(n + 1), approval_id: event === 'approval_requested' ? 'apr_aaaaaaaaaaaaaaaaaaaaaaaa' : null,
  });
}

async function projectedCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('select coalesce(max(seq), 0)::int as n from rm.audit_entries where project_id = $1', [PROJECT]);
  return rows[0]!.n;
}

async function appendedCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('select coalesce(max(revision) + 1, 0)::int as n from pgward.events where stream = $1', [auditStream(PROJECT)]);
  return rows[0]!.n;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

interface Sample {
  readonly at: number;
  readonly published: number;
  readonly projected: number;
}

/** For each sample, how long until the read model held every decision published by then. */
function lags(samples: readonly Sample[]): number[] {
  return samples
    .filter((s) => s.published > 0)
    .map((s) => (samples.find((later) => later.at >= s.at && later.projected >= s.published)?.at ?? Number.NaN) - s.at)
    .sort((a, b) => a - b);
}

const anchor = loadAnchorKey(generateAnchorKey());

/** CPU time of this process in µs (user + system). */
function ownCpu(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/**
 * The WAL the server has written so far (pg_stat_wal, server-wide: on a shared server other
 * databases' writes count too), and the transactions committed in this database: unlike CPU time,
 * neither moves with the machine's load.
 */
async function stateWork(pool: pg.Pool): Promise<{ bytes: number; records: number; commits: number }> {
  const { rows } = await pool.query<{ bytes: string; records: string; commits: string }>(
    `select w.wal_bytes::text as bytes, w.wal_records::text as records, d.xact_commit::text as commits
       from pg_stat_wal w, pg_stat_database d where d.datname = current_database()`,
  );
  return { bytes: Number(rows[0]!.bytes), records: Number(rows[0]!.records), commits: Number(rows[0]!.commits) };
}

async function endToEnd(storeUrl: string, pool: pg.Pool, statePids: () => Promise<number[]>) {
  // Encoded before the clock starts, so this process's CPU time is ingest's and the projection's (and the sampler's few reads).
  const records: Buffer[] = [];
  for (let n = 0; n < E2E_DECISIONS; n += BUS_BATCH) {
    const decisions = Array.from({ length: Math.min(BUS_BATCH, E2E_DECISIONS - n) }, (_, i) => decision(n + i));
    records.push(Buffer.from(JSON.stringify({ kind: 'batch', decisions })));
  }
  const store = await createPostgresEventStore(storeUrl, { poolSize: 4 });
  const bus = createMemoryBus();
  const keys = { keys: new Map() };
  // As `pgward serve` wires them: ingest hands the projection the entries it prepared and the events it appended.
  const handed = new PreparedEntries();
  const feed = new CommittedFeed(AUDIT_STREAM_PREFIX);
  const projection = runProjection({ store, pool, projection: auditProjection(keys, handed), feed });
  await projection.active;
  const ingest = await startIngest({ store, bus, logger: pino({ level: 'silent' }), checkpoints: { every: 1000, keys, anchor: { keyId: 'bench-anchor', privateKey: anchor.privateKey }, handOn: handed }, feed });
  const samples: Sample[] = [];
  let published = 0;
  const meter = new CpuMeter({ state: statePids });
  await meter.begin();
  const workStart = await stateWork(pool);
  const cpuStart = ownCpu();
  const start = performance.now();
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  const sampler = setInterval(() => {
    void projectedCount(pool).then((projected) => samples.push({ at: performance.now(), published, projected }));
  }, SAMPLE_MS);
  try {
    for (let n = 0; n < E2E_DECISIONS; n += BUS_BATCH) {
      const due = start + (n / OFFERED_PER_S) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      await bus.publish({ id: `bench-${n}`, data: records[n / BUS_BATCH]! });
      published = Math.min(n + BUS_BATCH, E2E_DECISIONS);
    }
    const publishedIn = performance.now() - start;
    log(`end to end: published ${number.format(E2E_DECISIONS)} decisions in ${decimal.format(publishedIn / 1000)} s`);
    while ((await projectedCount(pool)) < E2E_DECISIONS) {
      if (Date.now() > deadline) throw new Error('end to end: not projected in time');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const seconds = (performance.now() - start) / 1000;
    const cpu = { pipeline: ownCpu() - cpuStart, state: (await meter.end()).state! };
    // pg_stat_database is a snapshot per transaction, and its counters reach it from the backends with a delay of up to a second.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const workEnd = await stateWork(pool);
    const work = { bytes: workEnd.bytes - workStart.bytes, records: workEnd.records - workStart.records, commits: workEnd.commits - workStart.commits };
    samples.push({ at: performance.now(), published, projected: E2E_DECISIONS });
    const checkpoints = await auditCheckpoints(store, PROJECT);
    return { seconds, lags: lags(samples), checkpoints: checkpoints.length, cpu, work };
  } finally {
    meter.stop();
    clearInterval(sampler);
    await ingest.stop();
    await projection.stop();
    await bus.close();
    await store.close();
  }
}

/** The rest of the TOTAL_ENTRIES entries, appended as ingest would (batches of 1,000), then projected. */
async function seed(storeUrl: string, pool: pg.Pool) {
  const store = await createPostgresEventStore(storeUrl, { poolSize: 4 });
  const from = await appendedCount(pool);
  const start = performance.now();
  for (let n = from; n < TOTAL_ENTRIES; n += SEED_BATCH) {
    const events = Array.from({ length: Math.min(SEED_BATCH, TOTAL_ENTRIES - n) }, (_, i) => {
      const d = decision(n + i);
      return encodeEvent(StatementDecided, d, { event_id: `00000000-0000-4000-8000-${String(n + i).padStart(12, '0')}`, correlation_id: 'bench', actor: 'ingest', at: d.ts });
    });
    await store.append(auditStream(PROJECT), events, 'any');
    if ((n - from) % 100_000 === 0) log(`seeding: ${number.format(n)} appended`);
  }
  const appendSeconds = (performance.now() - start) / 1000;
  const projection = runProjection({ store, pool, projection: auditProjection({ keys: new Map() }) });
  const caughtUpStart = performance.now();
  const deadline = Date.now() + PHASE_TIMEOUT_MS * 2;
  try {
    for (let last = 0; ; ) {
      const projected = await projectedCount(pool);
      if (projected >= TOTAL_ENTRIES) break;
      if (Date.now() > deadline) throw new Error('seeding: not projected in time');
      if (projected - last >= 100_000) log(`seeding: ${number.format((last = projected))} projected`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await projection.stop();
    await store.close();
  }
  await pool.query('analyze rm.audit_entries, rm.audit_usage_hourly, rm.audit_latency_octaves');
  return { appended: TOTAL_ENTRIES - from, appendSeconds, projectSeconds: (performance.now() - caughtUpStart) / 1000 };
}

async function verification(storeUrl: string, pool: pg.Pool) {
  const store = await createPostgresEventStore(storeUrl, { poolSize: 1 });
  try {
    const readStart = performance.now();
    const entries = await auditEntries(pool, PROJECT, 1, VERIFY_ENTRIES);
    const checkpoints = await auditCheckpoints(store, PROJECT);
    const readSeconds = (performance.now() - readStart) / 1000;
    const input = { projectId: PROJECT, entries, checkpoints, hmacKeys: new Map(), anchorPublicKey: anchor.publicKey, verifiedAt: new Date().toISOString(), toSeq: VERIFY_ENTRIES };
    // First in the process: the time includes starting the digest workers, which later verifications (the route's, the CLI's once it has read the entries) find running.
    const coldStart = performance.now();
    const cold = await verifyChainParallel(input);
    const coldSeconds = (performance.now() - coldStart) / 1000;
    if (!cold.ok || cold.verified_count !== VERIFY_ENTRIES) throw new Error(`verification with worker start-up: ${JSON.stringify(cold)}`);
    const verifyStart = performance.now();
    const result = await verifyChainParallel(input);
    const verifySeconds = (performance.now() - verifyStart) / 1000;
    if (!result.ok || result.verified_count !== VERIFY_ENTRIES) throw new Error(`verification: ${JSON.stringify(result)}`);
    const callingThreadStart = performance.now();
    const alone = verifyChain(input);
    const callingThreadSeconds = (performance.now() - callingThreadStart) / 1000;
    if (!alone.ok || alone.verified_count !== VERIFY_ENTRIES) throw new Error(`verification on the calling thread: ${JSON.stringify(alone)}`);
    const pagedStart = performance.now();
    const paged = await verifyChainPages({ projectId: PROJECT, checkpoints, hmacKeys: new Map(), anchorPublicKey: anchor.publicKey, verifiedAt: new Date().toISOString(), toSeq: VERIFY_ENTRIES }, auditEntryPages(pool, PROJECT, 1, VERIFY_ENTRIES));
    const pagedSeconds = (performance.now() - pagedStart) / 1000;
    if (!paged.ok || paged.verified_count !== VERIFY_ENTRIES) throw new Error(`paged verification: ${JSON.stringify(paged)}`);
    return { entries: entries.length, checkpoints: checkpoints.filter((c) => Number(c.size) <= VERIFY_ENTRIES).length, readSeconds, coldSeconds, verifySeconds, callingThreadSeconds, pagedSeconds };
  } finally {
    await store.close();
  }
}

async function usage(pool: pg.Pool) {
  const windows = [
    { name: '30 days, all entries, ragged edges', start: new Date(T0 - 1_234), end: new Date(T0 + 30 * 86_400_000 + 4_321) },
    { name: '30 days, whole hours', start: new Date(T0), end: new Date(T0 + 30 * 86_400_000) },
    { name: '7 days from mid-hour', start: new Date(T0 + 3 * 86_400_000 + 1_800_000), end: new Date(T0 + 10 * 86_400_000 + 1_799_999) },
  ];
  const results = [];
  for (const window of windows) {
    const times: number[] = [];
    let entries = 0;
    for (let run = 0; run < USAGE_RUNS; run++) {
      const began = performance.now();
      const rows = await agentUsageRows(pool, PROJECT, window.start, window.end);
      const report = agentUsageReport({ projectId: PROJECT, requestedStart: window.start.toISOString(), requestedEnd: window.end.toISOString(), ...rows, plan: 'pro', terms: plans.pro });
      times.push(performance.now() - began);
      entries = report.totals.entries;
    }
    times.sort((a, b) => a - b);
    results.push({ name: window.name, entries, median: quantile(times, 0.5), max: times.at(-1)! });
  }
  return results;
}

async function main(): Promise<void> {
  await withBenchServer(async (server) => {
    log(`server: ${server.label}`);
    const pool = createPool(server.url, { max: 6, applicationName: 'pgward-bench' });
    try {
      const e2e = await endToEnd(server.url, pool, server.pids);
      log(`end to end: ${number.format(E2E_DECISIONS)} decisions projected in ${decimal.format(e2e.seconds)} s, ${e2e.checkpoints} checkpoints signed`);
      const seeded = await seed(server.url, pool);
      log(`seeding: ${number.format(seeded.appended)} appended in ${decimal.format(seeded.appendSeconds)} s, projected in ${decimal.format(seeded.projectSeconds)} s`);
      const verified = await verification(server.url, pool);
      const reports = await usage(pool);
      const e2eRate = E2E_DECISIONS / e2e.seconds;
      const lagP50 = quantile(e2e.lags, 0.5) / 1000;
      const lagMax = e2e.lags.at(-1)! / 1000;
      const verifyRate = verified.entries / verified.verifySeconds;
      console.log('');
      console.log(`end to end (offered ${number.format(OFFERED_PER_S)}/s): ${number.format(e2eRate)} decisions/s; projection lag p50 ${decimal.format(lagP50)} s, p99 ${decimal.format(quantile(e2e.lags, 0.99) / 1000)} s, max ${decimal.format(lagMax)} s`);
      console.log(
        `CPU per decision, end to end: ingest and projection (this process) ${decimal.format(e2e.cpu.pipeline / E2E_DECISIONS)} µs, state PostgreSQL ${decimal.format(e2e.cpu.state / E2E_DECISIONS)} µs, together ${decimal.format((e2e.cpu.pipeline + e2e.cpu.state) / E2E_DECISIONS)} µs`,
      );
      console.log(
        `state PostgreSQL per decision, end to end: ${number.format(e2e.work.bytes / E2E_DECISIONS)} bytes of WAL in ${decimal.format(e2e.work.records / E2E_DECISIONS)} records; ${number.format(e2e.work.commits)} transactions committed (${decimal.format(E2E_DECISIONS / e2e.work.commits)} decisions each; the bench's own samples of the read model count too)`,
      );
      console.log(`projection catch-up: ${number.format(seeded.appended / seeded.projectSeconds)} entries/s (${number.format(seeded.appended)} entries)`);
      console.log(`verification: ${number.format(verifyRate)} entries/s (${number.format(verified.entries)} entries and ${verified.checkpoints} checkpoints in ${decimal.format(verified.verifySeconds)} s, digest workers running; reading them took ${decimal.format(verified.readSeconds)} s)`);
      console.log(`verification first in the process, digest worker start-up included: ${number.format(verified.entries / verified.coldSeconds)} entries/s (${decimal.format(verified.coldSeconds)} s)`);
      console.log(`verification on the calling thread alone (verifyChain): ${number.format(verified.entries / verified.callingThreadSeconds)} entries/s (${decimal.format(verified.callingThreadSeconds)} s)`);
      console.log(`verification read in pages, as the route does: ${number.format(verified.entries / verified.pagedSeconds)} entries/s, reading included (${decimal.format(verified.pagedSeconds)} s)`);
      for (const r of reports) console.log(`usage report, ${r.name}: ${number.format(r.entries)} entries, median ${decimal.format(r.median)} ms, max ${decimal.format(r.max)} ms (${USAGE_RUNS} runs)`);
      console.log('');
      const verdict = (pass: boolean) => (pass ? 'PASS' : 'BELOW');
      console.log(`target end to end >= 10,000 decisions/s with lag < 2 s: ${verdict(e2eRate >= 10_000 && lagMax < 2)}`);
      console.log(`target verification >= 100,000 entries/s: ${verdict(verifyRate >= 100_000)}`);
      console.log(`target usage report over ${number.format(TOTAL_ENTRIES)} entries <= 300 ms: ${verdict(reports[0]!.entries === TOTAL_ENTRIES && reports[0]!.median <= 300)}`);
    } finally {
      await pool.end();
    }
  });
}

main().catch((error: unknown) => {
  console.error('[bench:audit] failed:', error);
  process.exitCode = 1;
});
