/**
 * The outbox: a checkpointed subscription to the event log that turns events into messages, one
 * per subscribed endpoint, written with the new checkpoint in one transaction. It reads only the
 * categories that can notify: webhooks, credentials, audit checkpoints and anomalies, and the audit
 * streams of just those projects that have an endpoint subscribed to an audit-derived type (its
 * prefix set changes with the endpoints, and the subscription restarts from the checkpoint then).
 */
import type pg from 'pg';
import { evolveWebhook, WEBHOOK_STREAM, type WebhookRow } from '../../projections/webhooks.js';
import { auditStream } from '../../projections/audit.js';
import { inTransaction } from '../pg/transaction.js';
import type { RecordedEvent } from '../store/port.js';
import { AUDIT_DERIVED_TYPES, credentialRegistration, envelopeBody, notificationOf, type Notification } from './notifications.js';

const OUTBOX = 'outbox';

/** The categories every outbox reads, whatever the endpoints. */
const BASE_PREFIXES = [WEBHOOK_STREAM, 'credential-', 'auditcp-', 'anomaly-'];

export interface OutboxState {
  position: bigint;
  readonly targets: Map<string, WebhookRow>;
  readonly credentials: Map<string, string>;
}

export async function loadOutboxState(pool: pg.Pool): Promise<OutboxState> {
  const [checkpoint, targets, credentials] = await Promise.all([
    pool.query<{ position: string }>('select position from pgward.webhook_outbox where name = $1', [OUTBOX]),
    pool.query<{ row: WebhookRow }>('select row from pgward.webhook_targets'),
    pool.query<{ credential_id: string; project_id: string }>('select credential_id, project_id from pgward.webhook_credentials'),
  ]);
  return {
    position: BigInt(checkpoint.rows[0]?.position ?? -1),
    targets: new Map(targets.rows.map(({ row }) => [row.webhook_id, row])),
    credentials: new Map(credentials.rows.map((r) => [r.credential_id, r.project_id])),
  };
}

/** The stream prefixes the outbox reads while `targets` are the endpoints. */
export function outboxPrefixes(targets: ReadonlyMap<string, WebhookRow>): string[] {
  const projects = [...targets.values()].filter((t) => t.status === 'active' && t.event_types.some((type) => AUDIT_DERIVED_TYPES.has(type))).map((t) => t.project_id);
  return [...BASE_PREFIXES, ...[...new Set(projects)].sort().map(auditStream)];
}

/** The endpoints a notification goes to, as they are at its event. */
function recipients(notification: Notification, targets: ReadonlyMap<string, WebhookRow>): WebhookRow[] {
  if (notification.webhookId !== undefined) {
    const target = targets.get(notification.webhookId);
    return target?.status === 'active' ? [target] : [];
  }
  return [...targets.values()].filter((t) => t.status === 'active' && t.enabled && t.project_id === notification.projectId && t.event_types.includes(notification.type));
}

export interface Enqueued {
  /** Events consumed: a prefix of the batch, ending at the first that changed the prefix set. */
  readonly consumed: number;
  /** Endpoints with new messages or a changed definition: their lanes are woken. */
  readonly touched: ReadonlySet<string>;
  readonly prefixesChanged: boolean;
}

/**
 * Applies events in order to `state` and the tables, in one transaction with the checkpoint. On
 * failure nothing is written; the caller reloads the state from the tables.
 */
export async function enqueue(pool: pg.Pool, state: OutboxState, events: readonly RecordedEvent[]): Promise<Enqueued> {
  const prefixes = outboxPrefixes(state.targets).join('\n');
  const touched = new Set<string>();
  return inTransaction(pool, async (client) => {
    let consumed = 0;
    let prefixesChanged = false;
    for (const event of events) {
      consumed += 1;
      if (event.stream.startsWith(WEBHOOK_STREAM)) {
        const next = evolveWebhook(state.targets.get(event.stream.slice(WEBHOOK_STREAM.length)), event);
        if (next) {
          state.targets.set(next.webhook_id, next);
          touched.add(next.webhook_id);
          await client.query(
            `insert into pgward.webhook_targets (webhook_id, project_id, row) values ($1, $2, $3)
             on conflict (webhook_id) do update set row = excluded.row`,
            [next.webhook_id, next.project_id, JSON.stringify(next)],
          );
        }
      }
      const registered = credentialRegistration(event);
      if (registered) {
        state.credentials.set(registered.credentialId, registered.projectId);
        await client.query('insert into pgward.webhook_credentials (credential_id, project_id) values ($1, $2) on conflict do nothing', [registered.credentialId, registered.projectId]);
      }
      const notification = notificationOf(event, (id) => state.credentials.get(id));
      for (const target of notification ? recipients(notification, state.targets) : []) {
        touched.add(target.webhook_id);
        await client.query(
          `insert into pgward.webhook_messages (webhook_id, message_id, position, type, body) values ($1, $2, $3, $4, $5)
           on conflict do nothing`,
          [target.webhook_id, notification!.id, event.position, notification!.type, envelopeBody(notification!, target.project_id)],
        );
      }
      if (outboxPrefixes(state.targets).join('\n') !== prefixes) {
        prefixesChanged = true;
        break;
      }
    }
    const to = events[consumed - 1]!.position;
    const moved = await client.query(
      `insert into pgward.webhook_outbox as o (name, position) values ($1, $3)
       on conflict (name) do update set position = $3 where o.position = $2`,
      [OUTBOX, state.position, to],
    );
    if (moved.rowCount !== 1) throw new Error(`the webhook outbox checkpoint moved away from ${state.position}`);
    state.position = to;
    return { consumed, touched, prefixesChanged };
  });
}
