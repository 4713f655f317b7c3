import { createHash } from 'node:crypto';
import type pg from 'pg';
import { migrate } from '../src/pg/migrate.js';
import { inTransaction } from '../src/pg/transaction.js';
import type { EventStore, SubscriptionFeed } from '../src/store/port.js';
import { batches } from '../src/store/batches.js';
import { NotificationListener } from '../src/pg/listener.js';
import { projectionTx, tableDdl, type Projection, type ProjectionTx } from './projection.js';

export const LIVE_SCHEMA = 'rm';

const checkpointsDdl = `
create schema if not exists pgward;
create table if not exists pgward.projection_checkpoints (
  name text primary key,
  position bigint not null,
  updated_at timestamptz not null default now()
);`;

export function projectionLockKey(name: string): bigint {
  return createHash('sha256').update(`pgward-projection:${name}`).digest().readBigInt64BE(0);
}

export function ensureReadModel(pool: pg.Pool, projection: Projection, schema = LIVE_SCHEMA, signal?: AbortSignal): Promise<void> {
  return ensureReadModels(pool, [projection], schema, signal);
}

/**
 * The read models of several projections in one migration: one lock and one batch of DDL, where a
 * migration per projection queues every runner of a process behind the same advisory lock, and a
 * stop meanwhile waits for the whole queue.
 */
export async function ensureReadModels(pool: pg.Pool, projections: readonly Projection[], schema = LIVE_SCHEMA, signal?: AbortSignal): Promise<void> {
  const ddl = projections.flatMap((projection) => projection.tables.map((table) => tableDdl(schema, table))).join('\n');
  await migrate(pool, `${checkpointsDdl}\ncreate schema if not exists "${schema}";\n${ddl}`, signal);
}

export async function readCheckpoint(db: pg.Pool | pg.ClientBase, name: string): Promise<bigint> {
  const { rows } = await db.query<{ position: bigint }>('select position from pgward.projection_checkpoints where name = $1', [name]);
  return rows[0]?.position ?? -1n;
}

export class CheckpointMoved extends Error {
  override readonly name = 'CheckpointMoved';
}

/**
 * Applies a batch and moves the checkpoint from `from` to `to` in one transaction. The checkpoint
 * update is fenced on `from`: if anything else moved it (a rebuild reset, a second runner), nothing
 * of the batch is written.
 */
export async function applyBatch(
  pool: pg.Pool,
  projection: Projection,
  schema: string,
  events: Parameters<Projection['apply']>[1],
  from: bigint,
  to: bigint,
  write: (tx: ProjectionTx) => Promise<void> = (tx) => projection.apply(tx, events),
): Promise<void> {
  await inTransaction(pool, async (client) => {
    await write(projectionTx(client, schema));
    const moved =
      from === -1n
        ? await client.query(
            `insert into pgward.projection_checkpoints as c (name, position) values ($1, $2)
             on conflict (name) do update set position = $2, updated_at = now() where c.position = -1`,
            [projection.name, to],
          )
        : await client.query('update pgward.projection_checkpoints set position = $3, updated_at = now() where name = $1 and position = $2', [
            projection.name,
            from,
            to,
          ]);
    if (moved.rowCount !== 1) throw new CheckpointMoved(`projection ${projection.name}: checkpoint moved away from ${from}`);
  });
}

export interface RunnerHooks {
  onBatch?(projection: string, count: number, position: bigint): void;
  onError?(projection: string, error: unknown): void;
}

export interface RunningProjection {
  /** Resolves once this runner holds the projection's lock and has started reading. */
  readonly active: Promise<void>;
  stop(): Promise<void>;
}

const RETRY_MS = 500;
/** A reset (see maintenance.ts) notifies here, so an idle runner re-reads its checkpoint at once. */
export const RESET_CHANNEL = 'pgward_projection_reset';

/**
 * The runners of one read-model database share one LISTEN session for resets. PostgreSQL signals
 * every session of a database that listens to anything on each commit that notifies, an audit
 * append included, so a session per runner would be woken for audit traffic it has no use for.
 */
const resetListeners = new Map<pg.Pool, { listener: NotificationListener; runners: number }>();

/** Calls `heard` with the name of a reset projection, or undefined when a reset may have been missed. */
function onReset(pool: pg.Pool, heard: (projection: string | undefined) => void): () => Promise<void> {
  let shared = resetListeners.get(pool);
  if (!shared) {
    shared = { listener: new NotificationListener(pool.options), runners: 0 };
    resetListeners.set(pool, shared);
  }
  shared.runners += 1;
  const off = shared.listener.onNotify([RESET_CHANNEL], heard);
  const { listener } = shared;
  return async () => {
    off();
    if (--shared.runners > 0) return;
    resetListeners.delete(pool);
    await listener.close();
  };
}

/**
 * Runs one projection until stopped: takes the projection's advisory lock (a second runner waits
 * for it), then follows the store from the checkpoint, batch by batch. The subscription ends
 * when a reset is announced, and following starts again from the stored checkpoint.
 */
export function runProjection(options: {
  store: EventStore;
  pool: pg.Pool;
  projection: Projection;
  schema?: string;
  batchSize?: number;
  hooks?: RunnerHooks;
  /** Events committed in this process to the projection's streams, taken instead of reading them back (src/store/committed-feed.ts). */
  feed?: SubscriptionFeed;
  /** The read model's tables exist already (ensureReadModels ran for every runner of the process). */
  readModelReady?: boolean;
}): RunningProjection {
  const { store, pool, projection, hooks = {}, feed } = options;
  const schema = options.schema ?? LIVE_SCHEMA;
  const batchSize = options.batchSize ?? 1000;
  let stopped = false;
  /** Gives up a read-model migration still waiting for its lock when the runner is stopped. */
  const starting = new AbortController();
  let lockClient: pg.PoolClient | undefined;
  let subscription: ReturnType<EventStore['subscribe']> | undefined;
  let markActive!: () => void;
  const active = new Promise<void>((resolve) => (markActive = resolve));

  async function follow(): Promise<void> {
    let position = await readCheckpoint(pool, projection.name);
    subscription = store.subscribe(position, { streamPrefixes: projection.streamPrefixes, feed });
    markActive();
    let writing: Promise<void> = Promise.resolve();
    try {
      for await (const batch of batches(subscription, batchSize)) {
        if (stopped) return;
        const to = batch[batch.length - 1]!.position;
        // Prepared while the previous batch is still being written; written only after it committed.
        const prepared = projection.prepare?.(batch);
        prepared?.catch(() => undefined);
        await writing;
        const write = await prepared;
        writing = applyBatch(pool, projection, schema, batch, position, to, write).then(() => {
          position = to;
          hooks.onBatch?.(projection.name, batch.length, position);
        });
        // Awaited before the next batch or on the way out; until then a failure must not count as unhandled.
        writing.catch(() => undefined);
      }
    } finally {
      await writing;
    }
  }

  let released = false;
  const releaseLock = (): void => {
    if (!lockClient || released) return;
    released = true;
    // Ending the session releases the advisory lock, also when the lock wait is still pending.
    lockClient.release(true);
  };

  const done = (async () => {
    if (!options.readModelReady) await ensureReadModel(pool, projection, schema, starting.signal);
    if (stopped) return;
    lockClient = await pool.connect();
    lockClient.on('error', () => undefined);
    if (stopped) return releaseLock();
    let stopListening: (() => Promise<void>) | undefined;
    try {
      await lockClient.query('select pg_advisory_lock($1)', [projectionLockKey(projection.name)]);
      stopListening = onReset(pool, (reset) => {
        if (reset === undefined || reset === projection.name) void subscription?.close();
      });
      while (!stopped) {
        try {
          await follow();
        } catch (error) {
          if (stopped) break;
          if (error instanceof CheckpointMoved) continue;
          hooks.onError?.(projection.name, error);
          await subscription?.close();
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        }
      }
    } finally {
      await stopListening?.();
      releaseLock();
    }
  })();

  return {
    active,
    async stop() {
      stopped = true;
      starting.abort();
      await subscription?.close();
      releaseLock();
      await done.catch(() => undefined);
    },
  };
}
