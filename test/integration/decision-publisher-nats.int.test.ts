/**
 * The proxy's decision publisher on NATS JetStream, through ingest into the PostgreSQL event store
 * (the split deployment's audit path): a burst of decisions with long statements, several megabytes
 * in all, reaches the audit stream whole. The publisher keeps each bus message within the server's
 * max_payload (1 MiB by default); a batch over it would be refused by the client on every retry,
 * and the audit trail would stall behind it.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { auditStream } from '../../projections/audit.js';
import { DecisionPublisher, type Decision } from '../../proxy/decisions.js';
import { connectNatsBus } from '../../src/bus/nats.js';
import type { DecisionBus } from '../../src/bus/port.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { placed } from '../support/decisions.js';

const natsUrl = process.env.NATS_URL ?? '';
const PROJECT = 'prj_publishernats00000000000';

let db: TestDatabase;
let store: PostgresEventStore;
let bus: DecisionBus;
let stream: string;
let ingest: RunningIngest | undefined;

beforeEach(async () => {
  db = await freshDatabase('publisher_nats');
  store = await createPostgresEventStore(db.url, { poolSize: 4 });
  const tag = randomBytes(4).toString('hex');
  stream = `PGWARD_PUBLISHER_${tag}`;
  bus = await connectNatsBus({ url: natsUrl, stream, subject: `pgward.publisher.${tag}` });
});

afterEach(async () => {
  await ingest?.stop();
  ingest = undefined;
  await bus.close();
  const nc = await connect({ servers: natsUrl });
  try {
    await (await jetstreamManager(nc)).streams.delete(stream);
  } finally {
    await nc.close();
  }
  await store.close();
  await db.drop();
});

function decision(sql: string): Decision {
  return placed({
    event: 'query', project_id: PROJECT, credential_id: null, session_id: 'publisher.1', source: 'wire', region: 'local', client_ip: '', ts: new Date().toISOString(),
    sql, normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'bypass', rows_returned: '1', bytes_out: '1',
    latency_us: 1, tables_read: [], tables_written: [], tables_blocked: [], parsed: false, approval_id: null,
  });
}

describe.skipIf(natsUrl === '')('the decision publisher on NATS JetStream', () => {
  it('delivers a burst of 300 decisions of 12 KB each (3.6 MB) to the audit stream, each exactly once, in bus messages within max_payload', async () => {
    ingest = await startIngest({ store, bus, logger: pino({ level: 'silent' }) });
    const errors: unknown[] = [];
    const publisher = new DecisionPublisher(bus, { proxyId: 'nats-proxy', bootEpoch: 1 }, 10_000, (error) => errors.push(error));
    // 4,000 characters of three UTF-8 bytes each (the audit keeps up to 4,096): 12 KB a decision.
    for (let i = 0; i < 300; i++) expect(publisher.publish(decision(`select '${'€'.repeat(4_000)}', ${i}`))).toBe(true);

    const deadline = Date.now() + 20_000;
    let events = await store.readStream(auditStream(PROJECT));
    while (events.length < 300 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      events = await store.readStream(auditStream(PROJECT));
    }
    await publisher.close();

    expect(errors).toEqual([]);
    expect(events.length).toBe(300);
    const seqs = events.map((event) => (JSON.parse(Buffer.from(event.data).toString()) as { seq: string }).seq);
    expect(new Set(seqs).size).toBe(300);
    const nc = await connect({ servers: natsUrl });
    try {
      const info = await (await jetstreamManager(nc)).streams.info(stream);
      // Several messages, none over the server's limit (the stream would refuse it anyway).
      expect(info.state.messages).toBeGreaterThanOrEqual(4);
      expect(info.state.bytes / info.state.messages).toBeLessThanOrEqual(nc.info!.max_payload);
    } finally {
      await nc.close();
    }
  });
});
