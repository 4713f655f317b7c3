/**
 * Benchmark of the anomaly detectors (`npm run bench:anomaly`): the anomaly_windows projection
 * catching up on a backlog of audit decisions in batches of 1,000, as its runner does under load.
 * Reports CPU per decision of this process (decoding, the fold, building the writes) and of
 * PostgreSQL, and the rate; for scale, the audit projection over the same decisions. A
 * measurement, not a test.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { anomalyWindowsProjection } from '../../projections/anomaly-windows.js';
import { auditProjection, auditStream } from '../../projections/audit.js';
import type { Projection } from '../../projections/projection.js';
import { applyBatch, ensureReadModel, LIVE_SCHEMA } from '../../projections/runner.js';
import { StatementDecided, type AuditEventKind } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { CpuMeter } from './e2e-cpu.js';
import { withBenchServer, type BenchServer } from './server.js';
import { placed } from '../support/decisions.js';

const PROJECT = 'prj_benchanomaly00000000000000';
const DECISIONS = Number(process.env.PGWARD_BENCH_ANOMALY_DECISIONS ?? 200_000);
const CREDENTIALS = Array.from({ length: 50 }, (_, i) => `agt_benchanomaly${String(i).padStart(10, '0')}`);
const BATCH = 1_000;
/** The decisions spread over 14 days, so hours close all along. */
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const SPACING_MS = (14 * 86_400_000) / DECISIONS;
const EVENTS: readonly AuditEventKind[] = ['query', 'query', 'query', 'query', 'query', 'query', 'masked', 'truncated', 'blocked', 'query'];

const log = (line: string) => console.log(`[bench:anomaly] ${line}`);

function decision(n: number): StatementDecided {
  const event = EVENTS[n % EVENTS.length]!;
  const ran = event !== 'blocked';
  const credential = CREDENTIALS[(n * 7919) % CREDENTIALS.length]!;
  // Each credential runs about 30 shapes, and now and then one it never ran.
  const shape = n % 997 === 0 ? n : (n % 30) + CREDENTIALS.indexOf(credential) * 10;
  return placed({
    event, project_id: PROJECT, credential_id: n % 11 === 0 ? null : credential, session_id: `px.1.${n % 97}`, source: 'wire', region: 'local',
    client_ip: '10.0.0.1', ts: new Date(T0 + Math.floor(n * SPACING_MS)).toISOString(), sql: `select * from orders where id = ${n}`, normalized_sql: 'select * from orders where id = $1',
    query_hash: shape.toString(16).padStart(16, '0'), statement_kind: 'select', decision_rule: ran ? '' : 'deny', reason: '', cache_status: ran ? 'miss' : 'none',
    rows_returned: ran ? String(n % 50) : '0', bytes_out: ran ? String((n % 50) * 120) : '0', latency_us: ran ? 200 + ((n * 7919) % 50_000) : null, tables_read: ['public.orders'],
    tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'bench-proxy', boot_epoch: 1, seq: String(n + 1), approval_id: null,
  });
}

async function seed(store: PostgresEventStore): Promise<void> {
  for (let start = 0; start < DECISIONS; start += BATCH) {
    const events = Array.from({ length: Math.min(BATCH, DECISIONS - start) }, (_, i) => {
      const d = decision(start + i);
      return encodeEvent(StatementDecided, d, { event_id: crypto.randomUUID(), correlation_id: 'bench', actor: 'ingest', at: d.ts });
    });
    await store.append(auditStream(PROJECT), events, 'any');
  }
}

interface Run {
  readonly decisions: number;
  readonly wallMs: number;
  readonly prepareUs: number;
  readonly applyUs: number;
  readonly postgresUs: number;
}

/** The projection over every decision from position 0, batch by batch: prepare (events only), then apply and checkpoint in one transaction. */
async function catchUp(store: PostgresEventStore, pool: pg.Pool, server: BenchServer, projection: Projection): Promise<Run> {
  await ensureReadModel(pool, projection, LIVE_SCHEMA);
  const meter = new CpuMeter({ postgres: server.pids });
  await meter.begin();
  let prepareUs = 0;
  let applyUs = 0;
  let position = -1n;
  let decisions = 0;
  const started = performance.now();
  for (;;) {
    const batch = await store.readAll(position, { streamPrefixes: projection.streamPrefixes, limit: BATCH });
    if (batch.length === 0) break;
    const before = process.cpuUsage();
    const write = await projection.prepare!(batch);
    const prepared = process.cpuUsage(before);
    await applyBatch(pool, projection, LIVE_SCHEMA, batch, position, batch.at(-1)!.position, write);
    const total = process.cpuUsage(before);
    prepareUs += prepared.user + prepared.system;
    applyUs += total.user + total.system - prepared.user - prepared.system;
    position = batch.at(-1)!.position;
    decisions += batch.length;
  }
  const wallMs = performance.now() - started;
  const { postgres } = await meter.end();
  return { decisions, wallMs, prepareUs, applyUs, postgresUs: postgres! };
}

function report(name: string, run: Run): void {
  const per = (us: number) => (us / run.decisions).toFixed(2);
  log(
    `${name}: ${run.decisions} decisions in ${(run.wallMs / 1000).toFixed(1)} s = ${Math.round(run.decisions / (run.wallMs / 1000))}/s; ` +
      `node CPU ${per(run.prepareUs + run.applyUs)} µs/decision (decode ${per(run.prepareUs)}, fold and writes ${per(run.applyUs)}); PostgreSQL CPU ${per(run.postgresUs)} µs/decision`,
  );
}

await withBenchServer(async (server) => {
  log(`server: ${server.label}; ${DECISIONS} decisions of ${CREDENTIALS.length} credentials over 14 days, batches of ${BATCH}`);
  const store = await createPostgresEventStore(server.url);
  const pool = createPool(server.url);
  try {
    await seed(store);
    report('anomaly_windows', await catchUp(store, pool, server, anomalyWindowsProjection));
    const counts = await pool.query<{ detections: number; windows: number; shapes: number }>(
      'select (select count(*)::int from rm.anomaly_detections) as detections, (select count(*)::int from rm.anomaly_windows) as windows, (select count(*)::int from rm.anomaly_shapes) as shapes',
    );
    log(`read model: ${JSON.stringify(counts.rows[0])}`);
    report('audit_entries (for scale)', await catchUp(store, pool, server, auditProjection({ keys: new Map() })));
  } finally {
    await store.close();
    await pool.end();
  }
});
