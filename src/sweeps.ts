import type pg from 'pg';
import { sweepExpiredCredentials } from '../commands/credentials/expiry-sweep.js';
import type { Logger } from './logger.js';
import type { EventStore } from './store/port.js';

export interface Sweeps {
  stop(): Promise<void>;
}

/**
 * Periodic housekeeping of the api role: record credentials whose expires_at passed (they were
 * refused from that instant; the sweep only writes it down) and forget idempotency keys older than 24 h.
 * Runs never overlap; a failed run is logged and retried at the next tick.
 */
export function startSweeps(options: { store: EventStore; pool: pg.Pool; logger: Logger; intervalMs: number }): Sweeps {
  const { store, pool, logger } = options;
  let running: Promise<void> | undefined;
  const run = async (): Promise<void> => {
    try {
      const expired = await sweepExpiredCredentials(store, pool, new Date());
      if (expired > 0) logger.info({ expired }, 'recorded expired credentials');
      await pool.query(`delete from pgward.idempotency_keys where created_at < now() - interval '24 hours'`);
    } catch (error) {
      logger.error({ err: error }, 'sweep failed; retrying at the next tick');
    }
  };
  const timer = setInterval(() => {
    running ??= run().finally(() => {
      running = undefined;
    });
  }, options.intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
