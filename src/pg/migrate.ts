import type pg from 'pg';

const MIGRATION_LOCK_KEY = 7_294_061_000;

/** Runs idempotent DDL under a session advisory lock, so processes starting together don't race on catalog rows. */
export async function migrate(pool: pg.Pool, sql: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(sql);
    } finally {
      await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
}
