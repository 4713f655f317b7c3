/**
 * The webhooks role: the outbox (events → messages) and the delivery lanes, in one process at a
 * time (an advisory lock; a second instance waits as a standby). Everything it needs to resume is
 * in its tables, so a restart, even mid-retry, loses nothing and sends each pending message again
 * with the same webhook-id.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Keyring } from '../crypto/seal.js';
import type { Logger } from '../logger.js';
import { batches } from '../store/batches.js';
import type { EventStore, Subscription } from '../store/port.js';
import { Lanes, type AttemptOutcome } from './lanes.js';
import type { AllowedNetworks } from './networks.js';
import { enqueue, loadOutboxState, outboxPrefixes } from './outbox.js';
import { ensureWebhookTables } from './schema.js';

const RETRY_MS = 500;
/** Delivered, given-up and cancelled messages, and attempts, are kept this long, then forgotten. */
export const KEEP_DAYS = 30;
const PRUNE_EVERY_MS = 3_600_000;
const BATCH = 500;
const LOCK_KEY = createHash('sha256').update('pgward-webhooks').digest().readBigInt64BE(0);

export interface WebhookDeliveryOptions {
  readonly store: EventStore;
  readonly pool: pg.Pool;
  readonly keyring: Keyring;
  readonly logger: Logger;
  readonly allowed: AllowedNetworks;
  readonly timeoutMs: number;
  readonly horizonMs: number;
  /** Resolves host names; the system resolver by default. */
  readonly resolve?: (host: string) => Promise<string[]>;
  /** Told of every attempt's outcome. */
  readonly observe?: (outcome: AttemptOutcome) => void;
}

export interface WebhookDelivery {
  /** Resolves once this instance holds the lock and follows the log. */
  readonly active: Promise<void>;
  stop(): Promise<void>;
}

export function startWebhookDelivery(options: WebhookDeliveryOptions): WebhookDelivery {
  const { store, pool, logger } = options;
  const lanes = new Lanes({
    pool,
    keyring: options.keyring,
    logger,
    horizonMs: options.horizonMs,
    ...(options.observe ? { observe: options.observe } : {}),
    send: { allowed: options.allowed, timeoutMs: options.timeoutMs, ...(options.resolve ? { resolve: options.resolve } : {}) },
  });
  let stopped = false;
  let following: Subscription | undefined;
  let lockClient: pg.PoolClient | undefined;
  let markActive!: () => void;
  const active = new Promise<void>((resolve) => (markActive = resolve));

  async function follow(): Promise<void> {
    const state = await loadOutboxState(pool);
    if (stopped) return;
    const subscription = store.subscribe(state.position, { streamPrefixes: outboxPrefixes(state.targets) });
    following = subscription;
    markActive();
    for await (const batch of batches(subscription, BATCH)) {
      if (stopped) return;
      let rest = batch;
      while (rest.length > 0) {
        const { consumed, touched, prefixesChanged } = await enqueue(pool, state, rest);
        for (const webhookId of touched) lanes.wake(webhookId);
        // The endpoints changed what must be read: follow again from the checkpoint with the new
        // prefixes. Closed first, since leaving the loop waits for the subscription's pending read.
        if (prefixesChanged) {
          await subscription.close();
          return;
        }
        rest = rest.slice(consumed);
      }
    }
  }

  let released = false;
  const done = (async () => {
    await ensureWebhookTables(pool);
    if (stopped) return;
    lockClient = await pool.connect();
    lockClient.on('error', () => undefined);
    try {
      await lockClient.query('select pg_advisory_lock($1)', [LOCK_KEY]);
      await deliver();
    } finally {
      releaseLock();
    }
  })();
  done.catch((error: unknown) => {
    if (!stopped) logger.error({ err: error }, 'webhook delivery stopped');
  });

  function releaseLock(): void {
    if (!lockClient || released) return;
    released = true;
    // Ending the session releases the advisory lock, also while the lock wait is pending.
    lockClient.release(true);
  }

  const prune = async (): Promise<void> => {
    try {
      await pool.query(`delete from pgward.webhook_attempts where attempted_at < now() - make_interval(days => $1)`, [KEEP_DAYS]);
      await pool.query(`delete from pgward.webhook_messages where status <> 'pending' and finished_at < now() - make_interval(days => $1)`, [KEEP_DAYS]);
    } catch (error) {
      logger.warn({ err: error }, 'could not forget old webhook messages; trying again in an hour');
    }
  };
  let pruning: NodeJS.Timeout | undefined;

  async function deliver(): Promise<void> {
    logger.info('webhook delivery is active: this process sends every webhook message');
    void prune();
    pruning = setInterval(() => void prune(), PRUNE_EVERY_MS).unref();
    const pending = await pool.query<{ webhook_id: string }>(`select distinct webhook_id from pgward.webhook_messages where status = 'pending'`);
    for (const { webhook_id } of pending.rows) lanes.wake(webhook_id);
    while (!stopped) {
      try {
        await follow();
      } catch (error) {
        if (stopped) break;
        logger.error({ err: error }, 'webhook outbox failed; following again from its checkpoint');
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      } finally {
        await following?.close();
      }
    }
  }

  return {
    active,
    async stop() {
      stopped = true;
      clearInterval(pruning);
      await following?.close();
      await lanes.stop();
      releaseLock();
      await done.catch(() => undefined);
    },
  };
}
