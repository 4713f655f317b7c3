import type pg from 'pg';

/** The first key of every branch copy's advisory lock; the second is the branch id's hash. */
const COPY_LOCK_NAMESPACE = 0x62_72_6e;

export interface CopyLease {
  release(): Promise<void>;
}

/**
 * A branch's copy lease: a session-level advisory lock on the state database, held by the process
 * copying the branch on a connection of its own from before the branch is recorded until its
 * outcome is. PostgreSQL drops it when that process (or its connection) dies, so a branch still
 * `copying` whose lease can be taken has no copier left (docs/branches.md). `wait` false: undefined
 * when another session holds it.
 */
export async function takeCopyLease(pool: pg.Pool, branchId: string, wait: boolean): Promise<CopyLease | undefined> {
  const client = await pool.connect();
  try {
    const { rows } = await client.query<{ taken: boolean }>(
      wait ? 'select true as taken from pg_advisory_lock($1, hashtext($2))' : 'select pg_try_advisory_lock($1, hashtext($2)) as taken',
      [COPY_LOCK_NAMESPACE, branchId],
    );
    if (!rows[0]?.taken) {
      client.release();
      return undefined;
    }
  } catch (error) {
    client.release(true);
    throw error;
  }
  return {
    async release() {
      try {
        await client.query('select pg_advisory_unlock($1, hashtext($2))', [COPY_LOCK_NAMESPACE, branchId]);
        client.release();
      } catch {
        // A connection that cannot unlock is dropped, which unlocks.
        client.release(true);
      }
    },
  };
}
