/**
 * The audit pipeline as `pgward serve`'s pipeline worker runs it, alone (`npm run bench:pipeline`):
 * ingest, the audit projection and anomaly_windows in this process, on an embedded PostgreSQL
 * (or PGWARD_BENCH_PG_URL), fed pgbench-like decisions of 5 credentials on the in-process bus in
 * messages of 200, as the proxy sends them at 10,000 a second. It prints the CPU a decision of
 * this process and of the state PostgreSQL (process CPU time moves less with the machine's load
 * than throughput does), and how long until both read models held every decision.
 * PGWARD_BENCH_PIPELINE_DECISIONS (default 60,000) and PGWARD_BENCH_PIPELINE_OFFERED (10,000/s)
 * change the run; PGWARD_BENCH_PIPELINE_RUNS (3) repeats it, each on a fresh database.
 * PGWARD_BENCH_PIPELINE_LINGER_MS sets ingest's append linger (APPEND_LINGER_MS unless given).
 */
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { pino } from 'pino';
import type pg from 'pg';
import { anomalyWindowsProjection } from '../../projections/anomaly-windows.js';
import { AUDIT_STREAM_PREFIX, auditProjection } from '../../projections/audit.js';
import { readCheckpoint, runProjection } from '../../projections/runner.js';
import { PreparedEntries } from '../../src/audit/prepared-entries.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import type { StatementDecided } from '../../src/events/audit.js';
import { startIngest } from '../../src/ingest/ingest.js';
import { createPool } from '../../src/pg/pool.js';
import { CategoryFeeds } from '../../src/store/category-feeds.js';
import { createPostgresEventStore } from '../../src/store/postgres.js';
import { CpuMeter } from './e2e-cpu.js';
import { withBenchServer } from './server.js';
import { placed } from '../support/decisions.js';

const DECISIONS = Number(process.env.PGWARD_BENCH_PIPELINE_DECISIONS ?? 60_000);
const OFFERED_PER_S = Number(process.env.PGWARD_BENCH_PIPELINE_OFFERED ?? 10_000);
const RUNS = Number(process.env.PGWARD_BENCH_PIPELINE_RUNS ?? 3);
/** PGWARD_BENCH_PIPELINE_FEED=audit: only the audit projection takes ingest's appends (the wiring before anomaly_windows took them too). */
const LINGER_MS = process.env.PGWARD_BENCH_PIPELINE_LINGER_MS === undefined ? undefined : Number(process.env.PGWARD_BENCH_PIPELINE_LINGER_MS);
const AUDIT_ONLY_FEED = process.env.PGWARD_BENCH_PIPELINE_FEED === 'audit';
const PER_MESSAGE = 200;
const PROJECT = 'prj_benchpipeline000000000000';
const CREDENTIALS = ['agt_aaaaaaaaaaaaaaaaaaaaaaaa', 'agt_bbbbbbbbbbbbbbbbbbbbbbbb', 'agt_cccccccccccccccccccccccc', 'agt_dddddddddddddddddddddddd', 'agt_eeeeeeeeeeeeeeeeeeeeeeee'];
const T0 = Date.parse('2026-11-26T10:00:00.000Z');
const anchor = loadAnchorKey(generateAnchorKey());
const decimal = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

function decision(n: number): StatementDecided {
  return placed({
    event: 'query', project_id: PROJECT, credential_id: CREDENTIALS[n % CREDENTIALS.length]!, session_id: `prx_1.1700000000.${n % 10}`, source: 'wire', region: 'local',
    client_ip: '127.0.0.1', ts: new Date(T0 + Math.floor(n / 10)).toISOString(), sql: `SELECT abalance FROM pgbench_accounts WHERE aid = $1`,
    normalized_sql: 'SELECT abalance FROM pgbench_accounts WHERE aid = $1', query_hash: '0123456789abcdef', statement_kind: 'select', decision_rule: '', reason: '',
    cache_status: 'bypass', rows_returned: '1', bytes_out: '90', latency_us: 100 + (n % 400), tables_read: ['public.pgbench_accounts'], tables_written: [], tables_blocked: [],
    parsed: true, proxy_id: 'prx_1', boot_epoch: 1, seq: String(n + 1), approval_id: null,
  });
}

async function checkpoints(pool: pg.Pool): Promise<bigint[]> {
  return [await readCheckpoint(pool, 'audit_entries'), await readCheckpoint(pool, anomalyWindowsProjection.name)];
}

/** Milliseconds this process's main thread spent in garbage collection pauses while `measure` was on. */
const gcPauses = { on: false, ms: 0 };
new PerformanceObserver((list) => {
  if (gcPauses.on) for (const entry of list.getEntries()) gcPauses.ms += entry.duration;
}).observe({ entryTypes: ['gc'] });

async function run(url: string, pids: () => Promise<number[]>): Promise<{ pipeline: number; state: number; gc: number; seconds: number; batches: number[] }> {
  const messages: Buffer[] = [];
  for (let n = 0; n < DECISIONS; n += PER_MESSAGE) {
    messages.push(Buffer.from(JSON.stringify({ kind: 'batch', decisions: Array.from({ length: Math.min(PER_MESSAGE, DECISIONS - n) }, (_, i) => decision(n + i)) })));
  }
  const store = await createPostgresEventStore(url, { poolSize: 10 });
  const pool = createPool(url, { max: 12 });
  const bus = createMemoryBus();
  const keys = { keys: new Map() };
  // As src/main.ts wires the pipeline worker.
  const handed = new PreparedEntries();
  const feeds = new CategoryFeeds(AUDIT_STREAM_PREFIX, store);
  const fed = (prefixes: readonly string[]) => (AUDIT_ONLY_FEED && prefixes.length > 1 ? undefined : feeds.feedFor(prefixes));
  const batches = [0, 0];
  const runners = [auditProjection(keys, handed), anomalyWindowsProjection].map((projection, i) =>
    runProjection({ store, pool, projection, feed: fed(projection.streamPrefixes), hooks: { onBatch: () => void (batches[i]! += 1) } }),
  );
  await Promise.all(runners.map((runner) => runner.active));
  const ingest = await startIngest({ store, bus, logger: pino({ level: 'silent' }), checkpoints: { every: 1000, keys, anchor: { keyId: 'bench-anchor', privateKey: anchor.privateKey }, handOn: handed }, feed: feeds, appendLingerMs: LINGER_MS });
  const meter = new CpuMeter({ state: pids });
  try {
    await meter.begin();
    const cpuStart = process.cpuUsage();
    gcPauses.ms = 0;
    gcPauses.on = true;
    const start = performance.now();
    for (const [i, data] of messages.entries()) {
      const wait = start + ((i * PER_MESSAGE) / OFFERED_PER_S) * 1000 - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      await bus.publish({ id: `bench-${i}`, data });
    }
    const head = async () => (await pool.query<{ head: bigint }>(`select max(position) as head from pgward.events where stream like 'audit-%'`)).rows[0]!.head;
    for (;;) {
      const target = await head();
      if (target !== null && (await checkpoints(pool)).every((position) => position >= target) && (await pool.query(`select 1 from rm.audit_entries where seq = $1`, [DECISIONS])).rowCount === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const seconds = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpuStart);
    gcPauses.on = false;
    return { pipeline: cpu.user + cpu.system, state: (await meter.end()).state!, gc: gcPauses.ms * 1000, seconds, batches };
  } finally {
    meter.stop();
    await ingest.stop();
    await Promise.all(runners.map((runner) => runner.stop()));
    await bus.close();
    await store.close();
    await pool.end();
  }
}

for (let i = 1; i <= RUNS; i++) {
  const result = await withBenchServer((server) => run(server.url, server.pids));
  console.log(
    `[bench:pipeline] run ${i}: ${DECISIONS} decisions offered at ${OFFERED_PER_S}/s, both read models complete after ${decimal.format(result.seconds)} s; ` +
      `CPU µs a decision: pipeline (this process) ${decimal.format(result.pipeline / DECISIONS)} (GC pauses ${decimal.format(result.gc / DECISIONS)}), state PG ${decimal.format(result.state / DECISIONS)}; ` +
      `batches: audit_entries ${result.batches[0]}, anomaly_windows ${result.batches[1]}`,
  );
}
