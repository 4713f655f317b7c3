/**
 * The pool's per-owner (per-credential) limit, against the real test server: an owner holds at
 * most perCredentialLimit connections, parked ones included; its acquirers beyond that wait for
 * its own connections and fail with OWNER_LIMIT, while other owners' acquirers are served.
 * Each pool first opens the connections its test takes (openIdle).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { UpstreamConnection, UpstreamTarget } from '../../proxy/upstream/connection.js';
import { PoolError, UpstreamPool } from '../../proxy/upstream/pool.js';
import { perCredentialLimit, type PoolConfig } from '../../src/events/databases.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { openIdle } from '../support/upstream-pool.js';

let database: TestDatabase;
const pools: UpstreamPool[] = [];

async function poolOf(config: Partial<PoolConfig>, warm: number): Promise<UpstreamPool> {
  const url = new URL(database.url);
  const target: UpstreamTarget = {
    host: url.hostname,
    port: Number(url.port || 5432),
    database: database.name,
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    sslMode: 'disable',
    applicationName: 'pgw_owner_limit',
    connectTimeoutMs: 5_000,
  };
  const pool = new UpstreamPool(target, { mode: 'transaction', max_connections: 4, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 300, ...config });
  pools.push(pool);
  await openIdle(pool, warm);
  return pool;
}

const failure = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (error: unknown) => error);

beforeAll(async () => {
  database = await freshDatabase('owner_limit', inject('pgUrl'));
});
afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.close()));
  await database?.drop();
});

describe('perCredentialLimit', () => {
  it('is half the pool rounded up, or the configured number up to the pool size', () => {
    expect([1, 2, 3, 10, 11].map((max) => perCredentialLimit({ max_connections: max }))).toEqual([1, 1, 2, 5, 6]);
    expect(perCredentialLimit({ max_connections: 10, max_connections_per_credential: 8 })).toBe(8);
    expect(perCredentialLimit({ max_connections: 4, max_connections_per_credential: 8 })).toBe(4);
  });
});

describe('UpstreamPool owners', () => {
  it('serves another owner while one waits at its limit, then fails the waiter with OWNER_LIMIT', async () => {
    const pool = await poolOf({}, 4);
    const a1 = await pool.acquire({ owner: 'a' });
    const a2 = await pool.acquire({ owner: 'a' });
    const a3 = failure(pool.acquire({ owner: 'a' }));
    // Queued behind a's waiter, b is served at once.
    const b1 = await pool.acquire({ owner: 'b' });
    expect(pool.heldBy('a')).toBe(2);
    expect(pool.heldBy('b')).toBe(1);
    const refused = await a3;
    expect(refused).toBeInstanceOf(PoolError);
    expect((refused as PoolError).code).toBe('OWNER_LIMIT');
    expect(pool.tryAcquire('a')).toBeUndefined();
    // An acquirer that names no owner is not limited.
    const anonymous = await pool.acquire();
    for (const connection of [a1, a2, b1, anonymous]) await pool.release(connection, { reset: false });
    expect(pool.heldBy('a')).toBe(0);
    expect(pool.stats()).toMatchObject({ size: 4, idle: 4, inUse: 0 });
  });

  it('fails a waiter with ACQUIRE_TIMEOUT when its share is the whole pool', async () => {
    const pool = await poolOf({ max_connections: 1 }, 1);
    const held = await pool.acquire({ owner: 'a' });
    const refused = await failure(pool.acquire({ owner: 'a' }));
    expect((refused as PoolError).code).toBe('ACQUIRE_TIMEOUT');
    await pool.release(held, { reset: false });
  });

  it("hands a released connection to the owner's waiter once it is under its limit", async () => {
    const pool = await poolOf({ acquire_timeout_ms: 5_000 }, 0);
    const [a1, a2] = [await pool.acquire({ owner: 'a' }), await pool.acquire({ owner: 'a' })];
    const a3 = pool.acquire({ owner: 'a' });
    await pool.release(a1, { reset: false });
    const third = await a3;
    expect(third).toBe(a1);
    expect(pool.heldBy('a')).toBe(2);
    await pool.release(a2, { reset: false });
    await pool.release(third, { reset: false });
  });

  it('counts parked connections: at its limit an owner takes back its own parked one, never another idle one', async () => {
    const pool = await poolOf({ max_connections_per_credential: 1 }, 2);
    const idle = await pool.acquire({ owner: 'b' });
    const held = await pool.acquire({ owner: 'a' });
    await pool.release(idle, { reset: false });
    const reclaimed: string[] = [];
    expect(pool.park(held, () => reclaimed.push('a'))).toBe(true);
    expect(pool.heldBy('a')).toBe(1);
    const again = pool.tryAcquire('a');
    expect(again).toBe(held);
    expect(reclaimed).toEqual(['a']);
    expect(pool.heldBy('a')).toBe(1);
    expect(pool.stats()).toMatchObject({ idle: 1, inUse: 1 });
    await pool.release(again!, { reset: false });
  });

  it("moves a parked connection taken by another owner to that owner's count", async () => {
    const pool = await poolOf({ max_connections: 1 }, 1);
    const held: UpstreamConnection = await pool.acquire({ owner: 'a' });
    pool.park(held, () => undefined);
    const taken = pool.tryAcquire('b');
    expect(taken).toBe(held);
    expect([pool.heldBy('a'), pool.heldBy('b')]).toEqual([0, 1]);
    await pool.release(taken!, { reset: false });
    expect(pool.heldBy('b')).toBe(0);
  });
});
