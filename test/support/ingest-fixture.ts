import { placed } from './decisions.js';
import { pino } from 'pino';
import { afterEach, beforeEach } from 'vitest';
import { auditStream } from '../../projections/audit.js';
import type { BusRecord } from '../../proxy/decisions.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { DecisionBus } from '../../src/bus/port.js';
import type { StatementDecided } from '../../src/events/audit.js';
import { startIngest, type IngestOptions, type RunningIngest } from '../../src/ingest/ingest.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from './pg.js';

/** What an ingest test works with; `db`, `store` and `bus` are new for each test. */
export interface IngestFixture {
  readonly db: TestDatabase;
  readonly store: PostgresEventStore;
  readonly bus: DecisionBus;
  /** Starts ingest on this test's store and bus (a silent logger); the last one started is stopped after the test. */
  start(options?: Omit<IngestOptions, 'store' | 'bus' | 'logger'>): Promise<RunningIngest>;
  /** The proxy's decision numbered `seq`, of the fixture's project. */
  decisionAt(seq: number): StatementDecided;
  /** Publishes a bus record: a string as it is (to send what is not JSON), anything else as JSON. */
  publish(record: BusRecord | Record<string, unknown> | string): Promise<void>;
  batch(...seqs: number[]): BusRecord;
  /** The proxy's own gap marker for `from`..`to`. */
  gap(from: number, to: number, reason: string): Record<string, unknown>;
  /** The project's audit stream, each event's type and data. */
  trail(): Promise<{ type: string; data: Record<string, unknown> }[]>;
}

/**
 * Each test of the file gets a fresh state database with its PostgreSQL event store and an
 * in-process bus, and whatever ingest it started is stopped, the bus and store closed and the
 * database dropped after it. Decisions and gap markers are of one `project` and `proxy`.
 */
export function useIngestFixture(label: string, project: string, proxy: string): IngestFixture {
  let db: TestDatabase | undefined;
  let store: PostgresEventStore | undefined;
  let bus: DecisionBus | undefined;
  let ingest: RunningIngest | undefined;
  let published = 0;

  beforeEach(async () => {
    db = await freshDatabase(label);
    store = await createPostgresEventStore(db.url, { poolSize: 4 });
    bus = createMemoryBus();
  });

  afterEach(async () => {
    await ingest?.stop();
    ingest = undefined;
    await bus?.close();
    await store?.close();
    await db?.drop();
  });

  const decisionAt = (seq: number): StatementDecided =>
    placed({
      event: 'query', project_id: project, credential_id: null, session_id: `${proxy}.1`, source: 'wire', region: 'local', client_ip: '', ts: new Date().toISOString(),
      sql: `select ${seq}`, normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'bypass', rows_returned: '1', bytes_out: '1',
      latency_us: 1, tables_read: [], tables_written: [], tables_blocked: [], parsed: false, approval_id: null, proxy_id: proxy, boot_epoch: 1, seq: String(seq),
    });

  return {
    get db() {
      return db!;
    },
    get store() {
      return store!;
    },
    get bus() {
      return bus!;
    },
    async start(options = {}) {
      ingest = await startIngest({ ...options, store: store!, bus: bus!, logger: pino({ level: 'silent' }) });
      return ingest;
    },
    decisionAt,
    async publish(record) {
      await bus!.publish({ id: `record-${++published}`, data: Buffer.from(typeof record === 'string' ? record : JSON.stringify(record)) });
    },
    batch: (...seqs) => ({ kind: 'batch', decisions: seqs.map(decisionAt) }),
    gap: (from, to, reason) => ({
      kind: 'gap', project_id: project, proxy_id: proxy, boot_epoch: 1, from_seq: String(from), to_seq: String(to), count: String(to - from + 1), reason, ts: new Date().toISOString(),
    }),
    async trail() {
      return (await store!.readStream(auditStream(project))).map((e) => ({ type: e.type, data: JSON.parse(Buffer.from(e.data).toString('utf8')) as Record<string, unknown> }));
    },
  };
}
