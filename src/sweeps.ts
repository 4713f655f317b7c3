import type pg from 'pg';
import { sweepExpiredApprovals } from '../commands/approvals/expiry-sweep.js';
import { sweepExpiredCredentials } from '../commands/credentials/expiry-sweep.js';
import { approvalDecision } from '../proxy/approval-audit.js';
import { DecisionPublisher } from '../proxy/decisions.js';
import type { DecisionBus } from './bus/port.js';
import type { Logger } from './logger.js';
import type { EventStore } from './store/port.js';

export interface Sweeps {
  stop(): Promise<void>;
}

/**
 * Periodic housekeeping of the api role: record credentials whose expires_at passed (they were
 * refused from that instant; the sweep only writes it down), expire approval requests undecided past
 * their expires_at (audited `approval_expired` in the held session's trail), and forget idempotency keys older than 24 h.
 * Runs never overlap; a failed run is logged and retried at the next tick.
 */
export function startSweeps(options: { store: EventStore; pool: pg.Pool; logger: Logger; intervalMs: number; audit: { bus: DecisionBus; publisherId: string } }): Sweeps {
  const { store, pool, logger } = options;
  const decisions = new DecisionPublisher(options.audit.bus, { proxyId: `${options.audit.publisherId.slice(0, 59)}:exp`, bootEpoch: Math.floor(Date.now() / 1000) }, 10_000, (error) =>
    logger.warn({ err: error }, 'decision bus refused an approval expiry record; retrying'),
  );
  let running: Promise<void> | undefined;
  const run = async (): Promise<void> => {
    try {
      const expired = await sweepExpiredCredentials(store, pool, new Date());
      if (expired > 0) logger.info({ expired }, 'recorded expired credentials');
      const lapsed = await sweepExpiredApprovals(store, pool, new Date(), (row) => {
        const reason = `approval request ${row.approval_id} expired undecided at ${row.expires_at} (rule approval.expired); the statement did not run`;
        decisions.publish(approvalDecision(row, { event: 'approval_expired', source: 'control', rule: 'approval.expired', reason, ts: new Date(row.expires_at).toISOString() }));
      });
      if (lapsed > 0) logger.info({ expired: lapsed }, 'recorded expired approval requests');
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
      await decisions.close();
    },
  };
}
