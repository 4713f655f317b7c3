/**
 * Benchmark of the PostgreSQL event store and the projection runner (`npm run bench:store`).
 * A measurement, not a test: figures below target print BELOW; only errors exit non-zero.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { projectionStatus } from '../../projections/maintenance.js';
import { projectsProjection } from '../../projections/projects.js';
import { runProjection } from '../../projections/runner.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { ProjectCreated, ProjectUpdated } from '../../src/events/projects.js';
import { newId } from '../../src/ids.js';
import { createPool } from '../../src/pg/pool.js';
import type { ExpectedRevision, NewEvent } from '../../src/store/port.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { withBenchServer } from './server.js';

const WRITERS = 4;
const STREAMS_PER_WRITER = 100;
const SEED_STREAMS = 20_000;
const UPDATES_PER_SEED_STREAM = 4;
const RUNNER_BATCH = 1000;
const TARGET_EVENTS_PER_S = 20_000;
const PHASE_TIMEOUT_MS = 180_000;
const PROGRESS_MS = 2_000;

const DESCRIPTION =
  'Customer-facing analytics warehouse for the EU region: nightly loads from the billing and usage services, ' +
  'read by the reporting agents through pgward with row-level policies and approval for writes.';

interface Result {
  readonly name: string;
  readonly events: number;
  readonly seconds: number;
  readonly appends?: number;
  /** Milliseconds per append, sorted ascending. */
  readonly latencies?: readonly number[];
}

let clock = Date.parse('2026-01-01T00:00:00.000Z');
function meta() {
  clock += 1;
  return { event_id: randomUUID(), correlation_id: 'bench', actor: 'usr_bench', at: new Date(clock).toISOString() };
}

function projectCreated(projectId: string, orgId: string, n: number): NewEvent {
  return encodeEvent(
    ProjectCreated,
    { project_id: projectId, org_id: orgId, name: `Analytics warehouse ${n}`, description: DESCRIPTION, tags: ['analytics', 'eu-west-1', 'agents'], cloud: 'aws', self_hosted: false },
    meta(),
  );
}

function projectUpdated(projectId: string, n: number): NewEvent {
  return encodeEvent(ProjectUpdated, { project_id: projectId, changes: { name: `Analytics warehouse ${n}`, tags: ['analytics', `rev-${n}`] } }, meta());
}

const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

function log(line: string): void {
  console.log(`[bench:store] ${line}`);
}

function percentile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

function deadlineError(phase: string): Error {
  return new Error(`${phase}: not done within ${PHASE_TIMEOUT_MS / 1000} s`);
}

/**
 * Runs `count` workers, each calling `step` until it returns false. The first failure stops the
 * others at their next step, and every worker has ended when this settles, so cleanup never races them.
 */
async function runWorkers(phase: string, count: number, step: (worker: number) => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  let failed = false;
  const outcomes = await Promise.allSettled(
    Array.from({ length: count }, async (_, worker) => {
      try {
        while (!failed && (await step(worker))) {
          if (Date.now() > deadline) throw deadlineError(phase);
        }
      } catch (error) {
        failed = true;
        throw error;
      }
    }),
  );
  const failure = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  if (failure) throw failure.reason;
}

function everyFewSeconds(report: () => string): () => void {
  const timer = setInterval(() => log(report()), PROGRESS_MS);
  return () => clearInterval(timer);
}

interface AppendPlan {
  readonly stream: string;
  readonly events: readonly NewEvent[];
}

/** Each writer rotates over its own streams; events are encoded before the clock starts. */
function planWriter(batch: number, appends: number): AppendPlan[] {
  const orgId = newId('org_');
  const projects = Array.from({ length: STREAMS_PER_WRITER }, () => newId('prj_'));
  return Array.from({ length: appends }, (_, i) => {
    const projectId = projects[i % STREAMS_PER_WRITER]!;
    return { stream: `project-${projectId}`, events: Array.from({ length: batch }, (_, j) => projectCreated(projectId, orgId, i * batch + j)) };
  });
}

/** Every phase starts from an empty store, so runs compare and the catch-up sees only its own events. */
async function emptyStore(pool: pg.Pool): Promise<void> {
  await pool.query('truncate pgward.events');
}

async function appendScenario(
  store: PostgresEventStore,
  pool: pg.Pool,
  scenario: { batch: number; appendsPerWriter: number; exact: boolean },
): Promise<Result> {
  const name = `append batch ${scenario.batch}, ${scenario.exact ? 'exact revisions' : "'any'"}`;
  await emptyStore(pool);
  log(`${name}: encoding ${number.format(WRITERS * scenario.appendsPerWriter * scenario.batch)} events`);
  const plans = Array.from({ length: WRITERS }, () => planWriter(scenario.batch, scenario.appendsPerWriter));
  const revisions = plans.map(() => new Map<string, number>());
  const next = plans.map(() => 0);
  const latencies: number[] = [];
  const total = WRITERS * scenario.appendsPerWriter;
  const stopProgress = everyFewSeconds(() => `${name}: ${number.format(latencies.length)}/${number.format(total)} appends`);
  const start = performance.now();
  try {
    await runWorkers(name, WRITERS, async (writer) => {
      const plan = plans[writer]![next[writer]!++];
      if (!plan) return false;
      const expected: ExpectedRevision = scenario.exact ? (revisions[writer]!.get(plan.stream) ?? 'no_stream') : 'any';
      const began = performance.now();
      const result = await store.append(plan.stream, plan.events, expected);
      latencies.push(performance.now() - began);
      revisions[writer]!.set(plan.stream, result.nextExpectedRevision);
      return true;
    });
  } finally {
    stopProgress();
  }
  const seconds = (performance.now() - start) / 1000;
  log(`${name}: done in ${decimal.format(seconds)} s`);
  return { name, events: total * scenario.batch, appends: total, seconds, latencies: latencies.sort((a, b) => a - b) };
}

/** 20,000 project streams of one ProjectCreated and four ProjectUpdated each, appended one stream per append. */
async function seedProjects(store: PostgresEventStore): Promise<void> {
  const orgId = newId('org_');
  let seeded = 0;
  const stopProgress = everyFewSeconds(() => `seeding: ${number.format(seeded)}/${number.format(SEED_STREAMS)} project streams`);
  try {
    await runWorkers('seeding', WRITERS, async () => {
      if (seeded >= SEED_STREAMS) return false;
      const n = seeded++;
      const projectId = newId('prj_');
      const updates = Array.from({ length: UPDATES_PER_SEED_STREAM }, (_, i) => projectUpdated(projectId, n * 10 + i));
      await store.append(`project-${projectId}`, [projectCreated(projectId, orgId, n), ...updates], 'no_stream');
      return true;
    });
  } finally {
    stopProgress();
  }
}

async function projectionCatchUp(store: PostgresEventStore, pool: pg.Pool): Promise<Result> {
  const name = `projection catch-up, batch ${RUNNER_BATCH}`;
  const events = SEED_STREAMS * (1 + UPDATES_PER_SEED_STREAM);
  log(`${name}: seeding ${number.format(events)} events in ${number.format(SEED_STREAMS)} project streams`);
  await emptyStore(pool);
  await seedProjects(store);
  const head = await store.headPosition();
  let position = -1n;
  let batches = 0;
  let seconds = Number.NaN;
  let settle!: (error?: unknown) => void;
  const reached = new Promise<void>((resolve, reject) => (settle = (error) => (error === undefined ? resolve() : reject(error))));
  const timer = setTimeout(() => settle(deadlineError(name)), PHASE_TIMEOUT_MS);
  const stopProgress = everyFewSeconds(() => `${name}: checkpoint ${number.format(position)}/${number.format(head)}`);
  const start = performance.now();
  const running = runProjection({
    store,
    pool,
    projection: projectsProjection,
    batchSize: RUNNER_BATCH,
    hooks: {
      onBatch(_projection, _count, at) {
        position = at;
        batches++;
        if (at < head) return;
        seconds = (performance.now() - start) / 1000;
        settle();
      },
      onError: (_projection, error) => settle(error),
    },
  });
  try {
    await reached;
  } finally {
    clearTimeout(timer);
    stopProgress();
    await running.stop();
  }
  const [status] = await projectionStatus(store, pool, [projectsProjection]);
  const { rows } = await pool.query<{ rows: number }>('select count(*)::int as rows from rm.projects');
  if (!status?.caught_up || rows[0]?.rows !== SEED_STREAMS) {
    throw new Error(`${name}: read model is wrong after catch-up: ${JSON.stringify(status)}, ${rows[0]?.rows} rows`);
  }
  log(`${name}: done in ${decimal.format(seconds)} s, ${batches} batches (mean ${number.format(events / batches)} events), ${rows[0].rows} rows`);
  return { name, events, seconds };
}

function printTable(results: readonly Result[]): void {
  const header = ['scenario', 'events', 'appends', 'seconds', 'events/s', 'appends/s', 'p50 ms', 'p99 ms'];
  const rows = results.map((r) => [
    r.name,
    number.format(r.events),
    r.appends === undefined ? '-' : number.format(r.appends),
    decimal.format(r.seconds),
    number.format(r.events / r.seconds),
    r.appends === undefined ? '-' : number.format(r.appends / r.seconds),
    r.latencies ? decimal.format(percentile(r.latencies, 0.5)) : '-',
    r.latencies ? decimal.format(percentile(r.latencies, 0.99)) : '-',
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  console.log(`\n${line(header)}\n${line(widths.map((w) => '-'.repeat(w)))}\n${rows.map(line).join('\n')}`);
}

function printTarget(label: string, result: Result): void {
  const rate = result.events / result.seconds;
  const verdict = rate >= TARGET_EVENTS_PER_S ? 'PASS' : 'BELOW';
  console.log(`target ${label} >= ${number.format(TARGET_EVENTS_PER_S)} events/s: ${number.format(rate)} events/s ${verdict}`);
}

async function main(): Promise<void> {
  await withBenchServer(async (server) => {
    log(`server: ${server.label}`);
    const store = await createPostgresEventStore(server.url, { poolSize: WRITERS });
    const pool = createPool(server.url, { max: 4, applicationName: 'pgward-bench' });
    try {
      const { rows } = await pool.query<{ version: string }>('select version()');
      log(`server version: ${rows[0]?.version}`);
      const settings = await pool.query<{ name: string; setting: string }>(
        `select name, setting from pg_settings where name = any($1) order by name`,
        [['autovacuum', 'fsync', 'shared_buffers', 'synchronous_commit']],
      );
      log(`server settings: ${settings.rows.map(({ name, setting }) => `${name}=${setting}`).join(', ')}`);
      log(`${WRITERS} concurrent writers, ${STREAMS_PER_WRITER} streams each`);
      const sample = projectCreated(newId('prj_'), newId('org_'), 0);
      log(`ProjectCreated event: ${sample.data.byteLength} bytes of data, ${sample.metadata.byteLength} bytes of metadata`);
      const batch1 = await appendScenario(store, pool, { batch: 1, appendsPerWriter: 2000, exact: false });
      const batch100 = await appendScenario(store, pool, { batch: 100, appendsPerWriter: 200, exact: false });
      const batch100Exact = await appendScenario(store, pool, { batch: 100, appendsPerWriter: 200, exact: true });
      const catchUp = await projectionCatchUp(store, pool);
      printTable([batch1, batch100, batch100Exact, catchUp]);
      console.log('');
      printTarget("append at batch 100 ('any')", batch100);
      printTarget('projected (catch-up)', catchUp);
    } finally {
      await pool.end();
      await store.close();
    }
  });
}

main().catch((error: unknown) => {
  console.error('[bench:store] failed:', error);
  process.exitCode = 1;
});
