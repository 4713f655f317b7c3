/**
 * Delivery lanes: one per endpoint with pending messages, each sending its endpoint's messages one
 * at a time in the order they were enqueued (event-log order), so a receiver sees a project's events
 * in order, and a slow or failing receiver holds up only its own lane.
 */
import type pg from 'pg';
import type { WebhookRow } from '../../projections/webhooks.js';
import { openSecret, type Keyring } from '../crypto/seal.js';
import { inTransaction } from '../pg/transaction.js';
import { logEvent } from '../log-events.js';
import type { Logger } from '../logger.js';
import { nextRetry } from './retries.js';
import { send, type Attempted, type SendOptions } from './send.js';
import { signedHeaders } from './signing.js';

export interface LaneOptions {
  readonly pool: pg.Pool;
  readonly keyring: Keyring;
  readonly logger: Logger;
  readonly send: SendOptions;
  /** How long a message is retried after its first attempt before it is given up. */
  readonly horizonMs: number;
  readonly now?: () => Date;
  readonly random?: () => number;
  /** Told of every attempt's outcome (the process's metrics). */
  readonly observe?: (outcome: AttemptOutcome) => void;
}

export type AttemptOutcome = 'delivered' | 'retrying' | 'failed';

interface Head {
  message_id: string;
  type: string;
  body: string;
  attempts: number;
  first_attempt_at: Date | null;
  next_attempt_at: Date;
  row: WebhookRow;
}

/** The aad a webhook's secrets are sealed with. */
export function secretAad(webhookId: string): string {
  return `webhook:${webhookId}`;
}

/** The secrets a delivery is signed with at `now`: the current one, and the previous one during its grace period. */
export function signingSecrets(row: WebhookRow, keyring: Keyring, now: Date): string[] {
  const aad = secretAad(row.webhook_id);
  const current = openSecret(row.secret, keyring, aad);
  const previousValid = row.previous_secret !== null && row.previous_valid_until !== null && new Date(row.previous_valid_until) > now;
  return previousValid ? [current, openSecret(row.previous_secret!, keyring, aad)] : [current];
}

export class Lanes {
  private readonly lanes = new Map<string, { poked: boolean; interrupt?: () => void; done: Promise<void> }>();
  private stopped = false;
  private readonly abort = new AbortController();
  private readonly now: () => Date;
  private readonly random: () => number;

  constructor(private readonly options: LaneOptions) {
    this.now = options.now ?? (() => new Date());
    this.random = options.random ?? Math.random;
  }

  /** Something changed for this endpoint (new messages, a new definition): its lane looks again. */
  wake(webhookId: string): void {
    if (this.stopped) return;
    const lane = this.lanes.get(webhookId);
    if (lane) {
      lane.poked = true;
      lane.interrupt?.();
      return;
    }
    const state: { poked: boolean; interrupt?: () => void; done: Promise<void> } = { poked: false, done: Promise.resolve() };
    this.lanes.set(webhookId, state);
    state.done = this.run(webhookId, state).catch((error: unknown) => {
      this.options.logger.error({ err: error, webhook_id: webhookId }, 'webhook lane failed; it starts again at the next wake-up');
      this.lanes.delete(webhookId);
      if (!this.stopped) setTimeout(() => this.wake(webhookId), 1_000).unref();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    for (const lane of this.lanes.values()) lane.interrupt?.();
    await Promise.all([...this.lanes.values()].map((lane) => lane.done));
  }

  private sleep(state: { interrupt?: () => void }, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        state.interrupt = undefined;
        resolve();
      }
      state.interrupt = done;
    });
  }

  private async head(webhookId: string): Promise<Head | undefined> {
    const { rows } = await this.options.pool.query<Head>(
      `select m.message_id, m.type, m.body, m.attempts, m.first_attempt_at, m.next_attempt_at, t.row
       from pgward.webhook_messages m join pgward.webhook_targets t using (webhook_id)
       where m.webhook_id = $1 and m.status = 'pending' order by m.position, m.message_id limit 1`,
      [webhookId],
    );
    return rows[0];
  }

  private async run(webhookId: string, state: { poked: boolean; interrupt?: () => void }): Promise<void> {
    const { pool } = this.options;
    while (!this.stopped) {
      state.poked = false;
      const head = await this.head(webhookId);
      if (!head) {
        if (state.poked) continue;
        break;
      }
      if (head.row.status === 'deleted') {
        await pool.query(`update pgward.webhook_messages set status = 'cancelled', finished_at = now() where webhook_id = $1 and status = 'pending'`, [webhookId]);
        continue;
      }
      // A disabled endpoint keeps its messages until it is enabled again (which wakes the lane).
      if (!head.row.enabled) {
        if (state.poked) continue;
        break;
      }
      const wait = head.next_attempt_at.getTime() - this.now().getTime();
      if (wait > 0) {
        await this.sleep(state, wait);
        continue;
      }
      const at = this.now();
      let attempted: Attempted;
      try {
        attempted = await send(head.row.url, signedHeaders(head.message_id, at, head.body, signingSecrets(head.row, this.options.keyring, at)), head.body, { ...this.options.send, signal: this.abort.signal });
      } catch (error) {
        attempted = { statusCode: null, latencyMs: 0, error: `not sent: ${(error as Error).message}` };
      }
      // Stopping mid-attempt records nothing: the message stays pending and is sent again, with the same id, after a restart.
      if (this.stopped) break;
      await this.record(webhookId, head, at, attempted);
    }
    this.lanes.delete(webhookId);
  }

  private async record(webhookId: string, head: Head, at: Date, attempted: Attempted): Promise<void> {
    const attempt = head.attempts + 1;
    const firstAttemptAt = head.first_attempt_at ?? at;
    const retry = attempted.error === null ? undefined : nextRetry(attempt, firstAttemptAt, this.now(), this.options.horizonMs, this.random());
    const outcome: AttemptOutcome = attempted.error === null ? 'delivered' : retry?.kind === 'retry' ? 'retrying' : 'failed';
    await inTransaction(this.options.pool, async (client) => {
      await client.query(
        `insert into pgward.webhook_attempts (webhook_id, message_id, type, attempt, attempted_at, status_code, latency_ms, error, outcome)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [webhookId, head.message_id, head.type, attempt, at, attempted.statusCode, attempted.latencyMs, attempted.error, outcome],
      );
      await client.query(
        `update pgward.webhook_messages set attempts = $3, first_attempt_at = $4, status = $5, next_attempt_at = coalesce($6, next_attempt_at),
           finished_at = case when $5 = 'pending' then null else now() end
         where webhook_id = $1 and message_id = $2`,
        [webhookId, head.message_id, attempt, firstAttemptAt, outcome === 'retrying' ? 'pending' : outcome, retry?.kind === 'retry' ? retry.at : null],
      );
      if (outcome === 'delivered') await client.query('update pgward.webhook_targets set failing_since = null where webhook_id = $1', [webhookId]);
      if (outcome === 'failed') await client.query('update pgward.webhook_targets set failing_since = coalesce(failing_since, $2) where webhook_id = $1', [webhookId, at]);
    });
    this.options.observe?.(outcome);
    if (outcome === 'failed') {
      logEvent(this.options.logger, 'webhook_failing', { project_id: head.row.project_id, webhook_id: webhookId, message_id: head.message_id, attempts: attempt, error: attempted.error }, 'a webhook message was given up after its retry horizon; the endpoint is marked failing');
    }
  }
}
