/**
 * What ingest reports on /metrics (issue 18 item 6): every bus record appended, dropped or failed,
 * the gap markers it appends and the decisions they say were lost, and the checkpoints it could
 * not sign; against the real PostgreSQL event store and the in-process bus.
 */
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Registry } from 'prom-client';
import { auditStream } from '../../projections/audit.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { DecisionBus } from '../../src/bus/port.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { AuditCheckpointSigned, StatementDecided } from '../../src/events/audit.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { createMetrics } from '../../src/metrics.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { admin, freshDatabase, type TestDatabase } from '../support/pg.js';
import { metricValue } from '../support/pgward-process.js';

const PROJECT = 'prj_ingestmetrics00000000000';
const PROXY = 'metered-proxy';

let db: TestDatabase;
let store: PostgresEventStore;
let bus: DecisionBus;
let ingest: RunningIngest | undefined;
let metrics: ReturnType<typeof createMetrics>;

beforeEach(async () => {
  db = await freshDatabase('ingest_metrics');
  store = await createPostgresEventStore(db.url, { poolSize: 4 });
  bus = createMemoryBus();
  metrics = createMetrics('ingest');
});

afterEach(async () => {
  await ingest?.stop();
  ingest = undefined;
  await bus.close();
  await store.close();
  await db.drop();
});

function decisionAt(seq: number): StatementDecided {
  return {
    event: 'query', project_id: PROJECT, credential_id: null, session_id: 'metered.1', source: 'wire', region: 'local', client_ip: '', ts: new Date().toISOString(),
    sql: `select ${seq}`, normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'bypass', rows_returned: '1', bytes_out: '1',
    latency_us: 1, tables_read: [], tables_written: [], tables_blocked: [], parsed: false, approval_id: null, proxy_id: PROXY, boot_epoch: 1, seq: String(seq),
  } as StatementDecided;
}

let published = 0;
const publish = (data: string) => bus.publish({ id: `record-${++published}`, data: Buffer.from(data) });
const batch = (...seqs: number[]) => JSON.stringify({ kind: 'batch', decisions: seqs.map(decisionAt) });
const gap = (from: number, to: number) =>
  JSON.stringify({ kind: 'gap', project_id: PROJECT, proxy_id: PROXY, boot_epoch: 1, from_seq: String(from), to_seq: String(to), count: String(to - from + 1), reason: 'proxy_buffer_full', ts: new Date().toISOString() });

const trailLength = async () => (await store.readStream(auditStream(PROJECT))).length;
const value = async (registry: Registry, name: string, labels: Record<string, string> = {}) => metricValue(await registry.metrics(), name, labels);

async function until(what: string, probe: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('ingest metrics', () => {
  it('counts records appended, dropped and failed, gap markers by reason and the decisions they lost', async () => {
    // The store refuses decisions for a while: the first record fails, and is delivered again.
    await admin(db.url, (client) => client.query(`alter table pgward.events add constraint no_decisions check (type <> '${StatementDecided.type}') not valid`));
    ingest = await startIngest({ store, bus, logger: pino({ level: 'silent' }), holeGraceMs: 50, observe: metrics.ingest });
    await publish(batch(1, 2));
    await until('a failed record', async () => ((await value(metrics.registry, 'pgward_ingest_records_total', { outcome: 'failed' })) ?? 0) >= 1);
    await admin(db.url, (client) => client.query('alter table pgward.events drop constraint no_decisions'));
    await until('1..2 appended', async () => (await trailLength()) === 2);
    const failed = await value(metrics.registry, 'pgward_ingest_records_total', { outcome: 'failed' });

    await publish(gap(3, 5));
    await publish(batch(6));
    await publish('not json');
    await publish(JSON.stringify({ kind: 'batch', decisions: [{ event: 'query' }] }));
    // 7..8 never arrive: a hole, recorded by the sweep once its grace passed.
    await publish(batch(9));
    await until('gap and 6, 9 appended', async () => (await trailLength()) === 5);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await ingest.sweepHoles();

    const registry = metrics.registry;
    expect({
      appended: await value(registry, 'pgward_ingest_records_total', { outcome: 'appended' }),
      dropped: await value(registry, 'pgward_ingest_records_total', { outcome: 'dropped' }),
      failed: await value(registry, 'pgward_ingest_records_total', { outcome: 'failed' }),
      proxyGaps: await value(registry, 'pgward_audit_gaps_total', { reason: 'proxy_buffer_full' }),
      proxyLost: await value(registry, 'pgward_audit_gap_decisions_total', { reason: 'proxy_buffer_full' }),
      holes: await value(registry, 'pgward_audit_gaps_total', { reason: 'sequence_hole' }),
      holeLost: await value(registry, 'pgward_audit_gap_decisions_total', { reason: 'sequence_hole' }),
    }).toEqual({ appended: 4, dropped: 2, failed, proxyGaps: 1, proxyLost: 3, holes: 1, holeLost: 2 });
    expect(failed).toBeGreaterThanOrEqual(1);
  });

  it('counts a checkpoint it could not sign when due', async () => {
    await admin(db.url, (client) => client.query(`alter table pgward.events add constraint no_checkpoints check (type <> '${AuditCheckpointSigned.type}') not valid`));
    const anchor = loadAnchorKey(generateAnchorKey());
    ingest = await startIngest({ store, bus, logger: pino({ level: 'silent' }), observe: metrics.ingest, checkpoints: { every: 5, keys: { keys: new Map() }, anchor: { keyId: 'metered-anchor', privateKey: anchor.privateKey } } });
    expect(await value(metrics.registry, 'pgward_audit_checkpoint_failures_total')).toBe(0);
    await publish(batch(1, 2, 3, 4, 5, 6));
    await until('a checkpoint failure counted', async () => ((await value(metrics.registry, 'pgward_audit_checkpoint_failures_total')) ?? 0) >= 1);
  });
});
