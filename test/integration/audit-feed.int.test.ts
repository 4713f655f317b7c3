/**
 * The audit projection fed by ingest in the same process (`pgward serve`'s pipeline worker,
 * src/store/committed-feed.ts), on the real PostgreSQL store and the in-process bus:
 * - it takes ingest's appends as they commit instead of reading them back: a handful of store
 *   reads for dozens of appends, and the read model equals a rebuild from the events
 *   (`projections rebuild --verify`) for random decision sequences of two projects;
 * - what the feed does not hold is read from the store: another writer's append between two of
 *   ingest's, batches dropped for room;
 * - a projection that starts after ingest appended (its process died between the append and the
 *   read model's write) catches up from the store and loses nothing.
 */
import fc from 'fast-check';
import type pg from 'pg';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { anomalyRulesStream, anomalyWindowsProjection } from '../../projections/anomaly-windows.js';
import { AUDIT_STREAM_PREFIX, auditProjection, auditStream } from '../../projections/audit.js';
import type { Projection } from '../../projections/projection.js';
import { rebuildAndVerify } from '../../projections/maintenance.js';
import { readCheckpoint, runProjection, type RunningProjection } from '../../projections/runner.js';
import type { BusRecord } from '../../proxy/decisions.js';
import { PreparedEntries } from '../../src/audit/prepared-entries.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { DecisionBus } from '../../src/bus/port.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { AnomalyRulesSet } from '../../src/events/anomalies.js';
import { AuditGapRecorded, type StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { createPool } from '../../src/pg/pool.js';
import { CategoryFeeds } from '../../src/store/category-feeds.js';
import type { EventStore } from '../../src/store/port.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { countingStore } from '../support/counting-store.js';
import { decision } from '../support/decisions.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const PROJECTS = ['prj_feed0000000000000000000001', 'prj_feed0000000000000000000002'];
const keys = { current: 'k1', keys: new Map([['k1', Buffer.alloc(32, 7)]]) };
const anchor = loadAnchorKey(generateAnchorKey());

let db: TestDatabase;
let store: PostgresEventStore;
let pool: pg.Pool;
let bus: DecisionBus;
const running: { stop(): Promise<void> }[] = [];

beforeEach(async () => {
  db = await freshDatabase('audit_feed');
  store = await createPostgresEventStore(db.url, { poolSize: 4 });
  pool = createPool(db.url, { max: 6 });
  bus = createMemoryBus();
});

afterEach(async () => {
  for (const part of running.splice(0).reverse()) await part.stop();
  await bus.close();
  await store.close();
  await pool.end();
  await db.drop();
});

/** The pipeline worker's wiring (src/main.ts): ingest hands its entries and its appends to the audit projection. */
async function pipeline(options: { capacity?: number; projection?: boolean; anomalies?: boolean } = {}) {
  const counted = countingStore(store);
  const anomalyReads = countingStore(store);
  const feeds = new CategoryFeeds(AUDIT_STREAM_PREFIX, store, options.capacity);
  const handed = new PreparedEntries();
  const projection = auditProjection(keys, handed);
  const runners: RunningProjection[] = [];
  const start = async (projected: Projection, reading: EventStore) => {
    const runner = runProjection({ store: reading, pool, projection: projected, feed: feeds.feedFor(projected.streamPrefixes) });
    runners.push(runner);
    running.push(runner);
    await runner.active;
  };
  if (options.projection !== false) await start(projection, counted.store);
  if (options.anomalies) await start(anomalyWindowsProjection, anomalyReads.store);
  const ingest: RunningIngest = await startIngest({ store, bus, logger: pino({ level: 'silent' }), holeGraceMs: 600_000, appendLingerMs: 2, checkpoints: { every: 64, keys, anchor: { keyId: 'feed-anchor', privateKey: anchor.privateKey }, handOn: handed }, feed: feeds });
  running.push(ingest);
  const stop = async () => {
    await ingest.stop();
    for (const runner of runners) await runner.stop();
  };
  return { reads: counted.reads, anomalyReads: anomalyReads.reads, projection, stop };
}

let published = 0;
let proxySeq = 0;
/** Publishes `decisions` as records of `perRecord`, waiting for each to be appended, so each is an append of its own. */
async function publish(decisions: readonly StatementDecided[], perRecord: number): Promise<void> {
  const before = await streamSizes();
  for (let i = 0; i < decisions.length; i += perRecord) {
    const record: BusRecord = { kind: 'batch', decisions: decisions.slice(i, i + perRecord) };
    await bus.publish({ id: `record-${++published}`, data: Buffer.from(JSON.stringify(record)) });
    await until('the record appended', async () => (await streamSizes()) >= before + i + Math.min(perRecord, decisions.length - i), 10_000);
  }
}

/** Within what an entry hashes as a JSON number (beyond it the entry is a gap marker, the last test). */
const exact = (count: string): string => String(BigInt(count) % BigInt(Number.MAX_SAFE_INTEGER));

/** Random decisions, each of one of the projects and with a proxy sequence of its own (so none is a redelivery). */
const randomDecisions = (count: number, seed: number): StatementDecided[] =>
  fc.sample(decision, { numRuns: count, seed }).map((d, i) => ({
    ...d,
    rows_returned: exact(d.rows_returned),
    bytes_out: exact(d.bytes_out),
    project_id: PROJECTS[i % PROJECTS.length]!,
    proxy_id: 'feed-proxy',
    boot_epoch: 1,
    seq: String(++proxySeq),
  }));

async function streamSizes(): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`select count(*)::int as n from pgward.events where stream like 'audit-%'`);
  return rows[0]!.n;
}

async function entries(): Promise<Map<string, number[]>> {
  const { rows } = await pool.query<{ project_id: string; seq: string }>('select project_id, seq from rm.audit_entries order by project_id, seq').catch(() => ({ rows: [] }));
  const out = new Map<string, number[]>();
  for (const row of rows) out.set(row.project_id, [...(out.get(row.project_id) ?? []), Number(row.seq)]);
  return out;
}

async function until(what: string, probe: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Every project's entries are seq 1..n with n its stream's size, and the read model equals a rebuild from the events. */
async function expectComplete(projection: ReturnType<typeof auditProjection>): Promise<void> {
  const sizes = new Map<string, number>();
  for (const project of PROJECTS) sizes.set(project, (await store.readStream(auditStream(project))).length);
  await until('every entry projected', async () => [...(await entries()).entries()].every(([project, seqs]) => seqs.length === sizes.get(project)) && (await entries()).size === PROJECTS.length);
  for (const [project, seqs] of await entries()) expect(seqs).toEqual(Array.from({ length: sizes.get(project)! }, (_, i) => i + 1));
  expect(await rebuildAndVerify(store, pool, projection)).toMatchObject({ identical: true });
}

describe('the audit projection fed by ingest in the same process', () => {
  it('takes ingest’s appends without reading them back, and the read model equals a rebuild from the events (random decisions of two projects)', async () => {
    const { reads, projection } = await pipeline();
    const before = reads();
    await publish(randomDecisions(600, 17), 20);
    await expectComplete(projection);
    // 30 appends, each read back without the feed (80 reads): the read at start is before `before`; a
    // few reads for notifications that raced a batch, more on a loaded machine, where a projection
    // woken mid-append may wait out its 50 ms for the hand-over (11 seen once in a whole-suite run):
    // the bound stays far under the 80 of reading every append back.
    expect(reads() - before).toBeLessThanOrEqual(16);
  });

  it('reads from the store what the feed does not hold: another writer’s append between ingest’s, and batches dropped for room', async () => {
    const { reads, projection } = await pipeline({ capacity: 30 });
    const before = reads();
    await publish(randomDecisions(200, 5), 20);
    // A gap marker appended by another writer (another ingest process): the next batch of ingest no longer follows the projection's position.
    const gap = { project_id: PROJECTS[0]!, proxy_id: 'other-proxy', boot_epoch: 3, from_seq: '1', to_seq: '2', count: '2', reason: 'bus_unavailable', ts: '2026-11-26T10:00:00.000Z' };
    await store.append(auditStream(PROJECTS[0]!), [encodeEvent(AuditGapRecorded, gap, { event_id: '0b6c3c9a-7b4e-4a51-9a57-5f1c8d2e3f40', correlation_id: 'test', actor: 'other-ingest', at: gap.ts })], 'any');
    await publish(randomDecisions(200, 6), 20);
    // Records of 100 decisions into a feed of 30 events: each batch is dropped before it is taken.
    await publish(randomDecisions(400, 7), 100);
    await expectComplete(projection);
    expect(reads() - before).toBeGreaterThan(0);
  });

  it('a projection started after ingest appended (a crash between the append and the read model’s write) catches up from the store, then takes the feed', async () => {
    const crashed = await pipeline({ projection: false });
    await publish(randomDecisions(300, 23), 30);
    await crashed.stop();
    expect(await entries()).toEqual(new Map());
    // The restarted worker: its feed holds nothing of what was appended before.
    const { reads, projection } = await pipeline();
    await until('caught up', async () => [...(await entries()).values()].reduce((sum, seqs) => sum + seqs.length, 0) === 300);
    // The catch-up's last reads may still be under way when the entries are in: counted from when they stopped.
    let caughtUp = reads();
    await until('the catch-up’s reads over', async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const settled = reads() === caughtUp;
      caughtUp = reads();
      return settled;
    });
    expect(caughtUp).toBeGreaterThan(0);
    await publish(randomDecisions(300, 24), 30);
    await expectComplete(projection);
    expect(reads() - caughtUp).toBeLessThanOrEqual(3);
  });

  it('a decision with a count beyond 2^53 - 1 stalls nothing: it becomes a counter_out_of_range gap marker, the entries after it are projected, checkpoints signed, and a rebuild matches', async () => {
    const { projection } = await pipeline();
    const decisions = randomDecisions(128, 31);
    const big = (i: number, changes: Partial<StatementDecided>) => (decisions[i] = { ...decisions[i]!, ...changes });
    big(40, { bytes_out: '9007199254740993' });
    big(41, { rows_returned: '9223372036854775807' });
    big(90, { proxy_id: 'feed-proxy-big', seq: '9007199254740993' });
    await publish(decisions, 16);
    await expectComplete(projection);
    const { rows } = await pool.query<{ project_id: string; seq: string; event: string; reason: string; proxy_id: string; gap: unknown; bytes_out: bigint; ts: string }>(
      `select project_id, seq, event, reason, proxy_id, gap, bytes_out, ts from rm.audit_entries where event = 'gap_marker' order by seq`,
    );
    const marker = (d: StatementDecided, gap: unknown) => ({ project_id: d.project_id, event: 'gap_marker', reason: 'counter_out_of_range', proxy_id: d.proxy_id, gap, bytes_out: 0n, ts: d.ts });
    expect(rows.map(({ seq: _seq, ...row }) => row)).toEqual([
      marker(decisions[40]!, { from_seq: Number(decisions[40]!.seq), to_seq: Number(decisions[40]!.seq), count: 1 }),
      marker(decisions[41]!, { from_seq: Number(decisions[41]!.seq), to_seq: Number(decisions[41]!.seq), count: 1 }),
      marker(decisions[90]!, null),
    ]);
    // The event log keeps the decision's values exactly.
    const stored = (await store.readStream(auditStream(decisions[40]!.project_id))).map((event) => JSON.parse(Buffer.from(event.data).toString('utf8')) as StatementDecided);
    expect(stored.filter((d) => d.bytes_out === '9007199254740993')).toHaveLength(1);
    // Each project's 64 entries were covered by a checkpoint: the checkpointer did not stop at the marker either.
    for (const project of PROJECTS) {
      const checkpoints = (await store.readStream(`auditcp-${project}`)).map((event) => JSON.parse(Buffer.from(event.data).toString('utf8')) as { size: string });
      expect(checkpoints.map((c) => c.size)).toEqual(['64']);
    }
  });

  it('anomaly_windows takes ingest’s appends too, without reading them back; an anomalyrules event between them is read from the store; both read models equal their rebuilds', async () => {
    const { reads, anomalyReads, projection } = await pipeline({ anomalies: true });
    const before = { audit: reads(), anomalies: anomalyReads() };
    await publish(randomDecisions(600, 43), 20);
    await expectComplete(projection);
    await until('anomaly_windows caught up', async () => (await checkpointOf('anomaly_windows')) === (await auditHead()));
    // 30 appends, each read back before anomaly_windows took them from its feed.
    expect(anomalyReads() - before.anomalies).toBeLessThanOrEqual(10);
    expect(reads() - before.audit).toBeLessThanOrEqual(10);
    const rules = { project_id: PROJECTS[0]!, rules: { volume_spike: { sigma_milli: 6000, floor: 500 } }, credentials: {} };
    await store.append(anomalyRulesStream(PROJECTS[0]!), [encodeEvent(AnomalyRulesSet, rules, { event_id: '5f0c3c9a-7b4e-4a51-9a57-5f1c8d2e3f41', correlation_id: 'test', actor: 'api', at: '2026-11-26T10:00:00.000Z' })], 'any');
    await publish(randomDecisions(200, 44), 20);
    await until('anomaly_windows caught up', async () => (await checkpointOf('anomaly_windows')) === (await auditHead()));
    expect((await pool.query<{ project_id: string }>('select project_id from rm.anomaly_rules')).rows).toEqual([{ project_id: PROJECTS[0] }]);
    expect(await rebuildAndVerify(store, pool, anomalyWindowsProjection)).toMatchObject({ identical: true });
    expect(await rebuildAndVerify(store, pool, projection)).toMatchObject({ identical: true });
  });
});

async function checkpointOf(name: string): Promise<bigint> {
  return readCheckpoint(pool, name);
}

async function auditHead(): Promise<bigint> {
  const { rows } = await pool.query<{ head: bigint }>(`select max(position) as head from pgward.events where stream like 'audit-%'`);
  return rows[0]!.head;
}
