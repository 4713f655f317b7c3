import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';

const MIGRATION_LOCK_KEY = 7_294_061_000;
const LOCK_RETRY_MS = 25;

/**
 * Runs idempotent DDL under a session advisory lock, so processes starting together don't race on
 * catalog rows. The lock is tried rather than waited for in the server, so an abort (a process
 * stopping while it starts) gives up the wait at once and leaves no backend queued on the lock.
 */
export async function migrate(pool: pg.Pool, sql: string, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  const client = await pool.connect();
  try {
    while (!(await client.query<{ locked: boolean }>('select pg_try_advisory_lock($1) as locked', [MIGRATION_LOCK_KEY])).rows[0]!.locked) {
      await delay(LOCK_RETRY_MS, undefined, { signal });
    }
    try {
      await client.query(sql);
    } finally {
      await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
}
