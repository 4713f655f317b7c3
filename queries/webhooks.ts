import type pg from 'pg';
import type { WebhookRow } from '../projections/webhooks.js';

/** An endpoint as the read model has it, with its delivery health from the delivering role. */
export type WebhookView = WebhookRow & { failing_since: string | null };

export async function findWebhook(db: pg.Pool, projectId: string, webhookId: string): Promise<WebhookView | undefined> {
  const { rows } = await db.query<{ row: WebhookView }>(
    `select to_jsonb(w) || jsonb_build_object('failing_since', t.failing_since) as row
     from rm.webhooks w left join pgward.webhook_targets t using (webhook_id)
     where w.project_id = $1 and w.webhook_id = $2 and w.status = 'active'`,
    [projectId, webhookId],
  );
  return rows[0]?.row;
}

export async function listWebhooks(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<WebhookView[]> {
  const { rows } = await db.query<{ row: WebhookView }>(
    `select to_jsonb(w) || jsonb_build_object('failing_since', t.failing_since) as row
     from rm.webhooks w left join pgward.webhook_targets t using (webhook_id)
     where w.project_id = $1 and w.status = 'active' and ($2::text is null or w.webhook_id > $2) order by w.webhook_id limit $3`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

export interface DeliveryAttemptRow {
  attempt_id: string;
  message_id: string;
  type: string;
  attempt: number;
  attempted_at: Date;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  outcome: 'delivered' | 'retrying' | 'failed';
}

/** An endpoint's delivery attempts, newest first, before attempt `before` when given. */
export async function listDeliveryAttempts(db: pg.Pool, webhookId: string, before: string | undefined, limit: number): Promise<DeliveryAttemptRow[]> {
  const { rows } = await db.query<DeliveryAttemptRow>(
    `select attempt_id::text, message_id, type, attempt, attempted_at, status_code, latency_ms, error, outcome
     from pgward.webhook_attempts where webhook_id = $1 and ($2::bigint is null or attempt_id < $2) order by attempt_id desc limit $3`,
    [webhookId, before ?? null, limit],
  );
  return rows;
}
