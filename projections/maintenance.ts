import type pg from 'pg';
import { inTransaction } from '../src/pg/transaction.js';
import type { EventStore } from '../src/store/port.js';
import { qualified, type Projection } from './projection.js';
import { applyBatch, ensureReadModel, LIVE_SCHEMA, readCheckpoint, RESET_CHANNEL } from './runner.js';

export interface ProjectionStatus {
  name: string;
  position: string;
  head: string;
  /** Global positions between the checkpoint and the store's head (events of other streams included). */
  behind_head: string;
  /** Events of this projection's streams beyond its checkpoint: what it has still to apply. */
  lag: number;
  /** No event of this projection's streams lies beyond its checkpoint. */
  caught_up: boolean;
}

/** Where each projection stands: `pgward projections list`, and the projection lag metric. */
export async function projectionStatus(store: EventStore, pool: pg.Pool, projections: readonly Projection[]): Promise<ProjectionStatus[]> {
  const head = await store.headPosition();
  return Promise.all(
    projections.map(async (projection) => {
      const position = await readCheckpoint(pool, projection.name).catch(() => -1n);
      const lag = await store.countAfter(position, { streamPrefixes: projection.streamPrefixes });
      return {
        name: projection.name,
        position: String(position),
        head: String(head),
        behind_head: String(head > position ? head - position : 0n),
        lag,
        caught_up: lag === 0,
      };
    }),
  );
}

export interface TableDigest {
  rows: number;
  md5: string;
}

export async function digestReadModel(db: pg.ClientBase | pg.Pool, projection: Projection, schema: string): Promise<Record<string, TableDigest>> {
  const out: Record<string, TableDigest> = {};
  for (const table of projection.tables) {
    const { rows } = await db.query<{ rows: number; md5: string | null }>(
      `select count(*)::int as rows, md5(coalesce(string_agg(t::text, E'\\n' order by ${table.orderBy}), '')) as md5
         from ${qualified(schema, table.name)} t`,
    );
    out[table.name] = { rows: rows[0]?.rows ?? 0, md5: rows[0]?.md5 ?? '' };
  }
  return out;
}

async function replay(store: EventStore, pool: pg.Pool, projection: Projection, schema: string, from: bigint, to: bigint): Promise<bigint> {
  const scratchCheckpoint = `${projection.name}@${schema}`;
  let position = from;
  while (position < to) {
    const batch = (await store.readAll(position, { streamPrefixes: projection.streamPrefixes, limit: 1000 })).filter((e) => e.position <= to);
    if (batch.length === 0) break;
    const next = batch[batch.length - 1]!.position;
    await applyBatch(pool, { ...projection, name: scratchCheckpoint }, schema, batch, position, next);
    position = next;
  }
  return position;
}

export interface VerifyResult {
  name: string;
  position: string;
  identical: boolean;
  live: Record<string, TableDigest>;
  rebuilt: Record<string, TableDigest>;
}

/**
 * Replays the projection from position 0 into a scratch schema and compares every table's digest
 * with the live read model at the same checkpoint. The live side is read in one repeatable-read
 * snapshot, so its rows and checkpoint agree even while the live runner keeps going.
 */
export async function rebuildAndVerify(store: EventStore, pool: pg.Pool, projection: Projection): Promise<VerifyResult> {
  const scratch = `rm_rebuild_${projection.name}`.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  await pool.query(`drop schema if exists "${scratch}" cascade`);
  await pool.query(`delete from pgward.projection_checkpoints where name = $1`, [`${projection.name}@${scratch}`]).catch(() => undefined);
  await ensureReadModel(pool, projection, LIVE_SCHEMA);
  await ensureReadModel(pool, projection, scratch);
  const snapshot = await pool.connect();
  try {
    await snapshot.query('begin isolation level repeatable read read only');
    const livePosition = await readCheckpoint(snapshot, projection.name);
    const live = await digestReadModel(snapshot, projection, LIVE_SCHEMA);
    await snapshot.query('commit');
    const reached = await replay(store, pool, projection, scratch, -1n, livePosition);
    const rebuilt = await digestReadModel(pool, projection, scratch);
    const identical = reached === livePosition && JSON.stringify(live) === JSON.stringify(rebuilt);
    if (identical) await pool.query(`drop schema "${scratch}" cascade`);
    await pool.query(`delete from pgward.projection_checkpoints where name = $1`, [`${projection.name}@${scratch}`]);
    return { name: projection.name, position: String(livePosition), identical, live, rebuilt };
  } finally {
    snapshot.release();
  }
}

/** Empties the live read model and resets its checkpoint; the running projector then replays from position 0. */
export async function resetProjection(pool: pg.Pool, projection: Projection): Promise<void> {
  await ensureReadModel(pool, projection, LIVE_SCHEMA);
  await inTransaction(pool, async (client) => {
    for (const table of projection.tables) await client.query(`truncate ${qualified(LIVE_SCHEMA, table.name)}`);
    // Reset to -1 rather than delete: the running projector's fenced update then fails and it re-reads the checkpoint.
    await client.query('update pgward.projection_checkpoints set position = -1, updated_at = now() where name = $1', [projection.name]);
    await client.query('select pg_notify($1, $2)', [RESET_CHANNEL, projection.name]);
  });
}

/**
 * Waits until the projection has applied every event of its streams that exists now (bounded):
 * a read-your-writes barrier for lookups that cannot fall back to a stream, such as an API key by hash.
 */
export async function awaitCaughtUp(store: EventStore, pool: pg.Pool, projection: Projection, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const target = (await store.readAll(-1n, { streamPrefixes: projection.streamPrefixes, limit: 1 })).length === 0 ? -1n : await store.headPosition();
  for (;;) {
    const position = await readCheckpoint(pool, projection.name);
    const pending = await store.readAll(position, { streamPrefixes: projection.streamPrefixes, limit: 1 });
    if (pending.length === 0 || pending[0]!.position > target) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Waits (bounded) until every projection that reads `stream` has applied the event at `position`; false on timeout. */
export async function awaitApplied(pool: pg.Pool, projections: readonly Projection[], stream: string, position: bigint, timeoutMs: number): Promise<boolean> {
  const readers = projections.filter((p) => p.streamPrefixes.some((prefix) => stream.startsWith(prefix)));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const positions = await Promise.all(readers.map((p) => readCheckpoint(pool, p.name)));
    if (positions.every((p) => p >= position)) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
