import type { UpstreamPool } from '../../proxy/upstream/pool.js';

/**
 * Opens `count` idle connections in the pool. A test that waits out a short acquire timeout opens
 * its connections first: the timeout also bounds a connect, which a loaded machine can take longer
 * for. An acquire that timed out leaves its connection idle once it is opened.
 */
export async function openIdle(pool: UpstreamPool, count: number): Promise<void> {
  while (pool.stats().idle < count) {
    const taken = await Promise.allSettled(Array.from({ length: count }, () => pool.acquire()));
    for (const result of taken) if (result.status === 'fulfilled') await pool.release(result.value, { reset: false });
    while (pool.stats().size > pool.stats().idle) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
