import type pg from 'pg';
import { arrayLiteral } from '../pg/array-literal.js';
import { migrate } from '../pg/migrate.js';
import { inTransaction } from '../pg/transaction.js';
import { createPool } from '../pg/pool.js';
import { eventStoreSchemaSql } from './postgres-schema.js';
import {
  StoreError,
  satisfies,
  wrongExpectedRevision,
  type AppendResult,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type RecordedEvent,
  type Subscription,
} from './port.js';
import { wakeableSubscription } from './subscription.js';
import { categoryOf, readsBesideAudit, wakeChannels } from './categories.js';
import { NotificationListener } from '../pg/listener.js';

const DEFAULT_BATCH = 1000;

interface EventRow {
  position: bigint;
  stream: string;
  revision: number;
  event_id: string;
  type: string;
  data: Buffer;
  metadata: Buffer;
}

function toRecorded(row: EventRow): RecordedEvent {
  return {
    id: row.event_id,
    type: row.type,
    data: row.data,
    metadata: row.metadata,
    stream: row.stream,
    revision: row.revision,
    position: row.position,
  };
}

function likePrefix(prefix: string): string {
  return `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export interface PostgresEventStore extends EventStore {
  /** Runs `work` in one database transaction: every append inside commits or none does. */
  transaction<T>(work: (tx: Pick<EventStore, 'append'>) => Promise<T>): Promise<T>;
}

/**
 * The events' data and metadata back to back, with the offsets between them (as append_events
 * takes them): one Buffer, which pg sends as a binary parameter, where two bytea arrays would
 * travel as hex text and be parsed as arrays.
 */
function packPayloads(events: readonly NewEvent[]): { payloads: Buffer; bounds: number[] } {
  const parts: Uint8Array[] = [];
  const bounds = [0];
  let at = 0;
  for (const event of events) {
    parts.push(event.data, event.metadata);
    at += event.data.byteLength;
    bounds.push(at);
    at += event.metadata.byteLength;
    bounds.push(at);
  }
  return { payloads: Buffer.concat(parts, at), bounds };
}

async function appendWith(
  client: pg.Pool | pg.PoolClient,
  stream: string,
  events: readonly NewEvent[],
  expected: ExpectedRevision,
): Promise<AppendResult> {
  if (events.length === 0) {
    const { rows } = await client.query<{ revision: number | null }>(
      'select max(revision) as revision from pgward.events where stream = $1',
      [stream],
    );
    const actual = rows[0]?.revision ?? -1;
    if (!satisfies(expected, actual)) throw wrongExpectedRevision(stream, expected, actual === -1 ? 'no_stream' : actual);
    return { nextExpectedRevision: actual, position: -1n, duplicate: false };
  }
  const { payloads, bounds } = packPayloads(events);
  const { rows } = await client.query<{ outcome: string; actual: number; last_position: bigint; category_before: bigint | null }>(
    'select * from pgward.append_events($1, $2, $3::uuid[], $4::text[], $5::bytea, $6::integer[])',
    [stream, String(expected), arrayLiteral(events.map((e) => e.id)), arrayLiteral(events.map((e) => e.type)), payloads, arrayLiteral(bounds)],
  );
  const row = rows[0];
  if (!row) throw new StoreError('STORE_UNAVAILABLE', 'append returned no result');
  switch (row.outcome) {
    case 'ok':
      return { nextExpectedRevision: row.actual, position: row.last_position, duplicate: false, ...(row.category_before === null ? {} : { categoryBefore: row.category_before }) };
    case 'duplicate':
      return { nextExpectedRevision: row.actual, position: row.last_position, duplicate: true };
    case 'wrong_expected':
      throw wrongExpectedRevision(stream, expected, row.actual === -1 ? 'no_stream' : row.actual);
    default:
      throw new StoreError('EVENT_ID_CONFLICT', `stream ${stream}: some event ids of this batch were already appended elsewhere or in another order`, { stream });
  }
}

export async function createPostgresEventStore(connectionString: string, options: { poolSize?: number } = {}): Promise<PostgresEventStore> {
  const pool = createPool(connectionString, { max: options.poolSize ?? 10, applicationName: 'pgward-store' });
  try {
    await migrate(pool, eventStoreSchemaSql);
  } catch (error) {
    await pool.end();
    throw new StoreError('STORE_UNAVAILABLE', `event store schema: ${(error as Error).message}`);
  }
  const listener = new NotificationListener(connectionString);

  async function readAll(after: bigint, readOptions: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const limit = readOptions.limit ?? DEFAULT_BATCH;
    const patterns = readOptions.streamPrefixes?.map(likePrefix) ?? null;
    const read = readsBesideAudit(readOptions.streamPrefixes) ? 'read_events_beside_audit' : 'read_events';
    const { rows } = await pool.query<EventRow>(`select * from pgward.${read}($1, $2, $3)`, [after, patterns, limit]);
    return rows.map(toRecorded);
  }

  return {
    kind: 'postgres',
    densePositions: true,

    append: (stream, events, expected) => appendWith(pool, stream, events, expected),

    transaction: <T>(work: (tx: Pick<EventStore, 'append'>) => Promise<T>): Promise<T> =>
      inTransaction(pool, (client) => work({ append: (stream, events, expected) => appendWith(client, stream, events, expected) })),

    async readStream(stream, fromRevision = 0, maxCount) {
      // A stream's revisions are dense, so a page is a bounded range: with only `revision >= $2`, stale statistics
      // of a large stream planned a bitmap scan of everything after $2, sorted for its limit (1.2 s a page of 10,000
      // at 1,000,000 events, where the range's index scan reads only the page).
      const { rows } = await pool.query<EventRow>(
        maxCount === undefined
          ? `select position, stream, revision, event_id, type, data, metadata from pgward.events
              where stream = $1 and revision >= $2 order by revision`
          : `select position, stream, revision, event_id, type, data, metadata from pgward.events
              where stream = $1 and revision >= $2 and revision < $2 + $3 order by revision`,
        maxCount === undefined ? [stream, fromRevision] : [stream, fromRevision, maxCount],
      );
      return rows.map(toRecorded);
    },

    readAll,

    subscribe(after, subscribeOptions = {}): Subscription {
      return wakeableSubscription({
        after,
        read: (position) => readAll(position, { streamPrefixes: subscribeOptions.streamPrefixes, limit: DEFAULT_BATCH }),
        feed: subscribeOptions.feed,
        onWake: (wake) => listener.onNotify(wakeChannels(subscribeOptions.streamPrefixes), wake),
      });
    },

    async decisionIdForm() {
      const { rows } = await pool.query<{ value: string }>(`select value from pgward.store_settings where name = 'decision_ids'`);
      const value = rows[0]?.value;
      if (value === 'sequential' || value === 'hashed') return value;
      // A form of a later release, or a row lost (a partial restore): guessing would mix two forms in one store.
      throw new StoreError('STORE_UNAVAILABLE', `pgward.store_settings decision_ids is ${value === undefined ? 'missing' : JSON.stringify(value)}; this release knows "sequential" and "hashed"`);
    },

    async storedEventIds(ids) {
      const { rows } = await pool.query<{ event_id: string }>('select event_id from pgward.events where event_id = any($1::uuid[])', [ids]);
      return new Set(rows.map((row) => row.event_id));
    },

    async countAfter(after, countOptions = {}) {
      const prefixes = countOptions.streamPrefixes;
      const categories = prefixes?.map(categoryOf);
      const { rows } = await pool.query<{ count: string }>('select pgward.count_events($1, $2, $3) as count', [
        after,
        prefixes?.map(likePrefix) ?? null,
        categories?.every((category) => category !== undefined) ? [...new Set(categories)] : null,
      ]);
      return Number(rows[0]!.count);
    },

    async headPosition() {
      const { rows } = await pool.query<{ position: bigint | null }>('select max(position) as position from pgward.events');
      return rows[0]?.position ?? -1n;
    },

    async close() {
      await listener.close();
      await pool.end();
    },
  };
}
