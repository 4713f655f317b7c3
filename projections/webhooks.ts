import { decodeWith } from '../src/events/envelope.js';
import type { SealedSecret } from '../src/events/fields.js';
import { WebhookCreated, WebhookDeleted, WebhookSecretRotated, WebhookUpdated, type WebhookEventType } from '../src/events/webhooks.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** A webhook endpoint as of its last event. The secrets are sealed; no response ever carries them. */
export type WebhookRow = {
  webhook_id: string;
  project_id: string;
  url: string;
  event_types: WebhookEventType[];
  enabled: boolean;
  description: string;
  secret: SealedSecret;
  /** The secret before the last rotation, still signing until previous_valid_until. */
  previous_secret: SealedSecret | null;
  previous_valid_until: string | null;
  status: 'active' | 'deleted';
  revision: number;
  created_at: string;
  updated_at: string;
};

export const WEBHOOK_STREAM = 'webhook-';

export function evolveWebhook(row: WebhookRow | undefined, event: RecordedEvent): WebhookRow | null {
  switch (event.type) {
    case WebhookCreated.type: {
      const { data, metadata } = decodeWith(WebhookCreated, event);
      return { ...data, previous_secret: null, previous_valid_until: null, status: 'active', revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case WebhookUpdated.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(WebhookUpdated, event);
      const changes = Object.fromEntries(Object.entries(data.changes).filter(([, value]) => value !== undefined));
      return { ...row, ...changes, revision: event.revision, updated_at: metadata.at };
    }
    case WebhookSecretRotated.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(WebhookSecretRotated, event);
      return { ...row, secret: data.secret, previous_secret: row.secret, previous_valid_until: data.previous_valid_until, revision: event.revision, updated_at: metadata.at };
    }
    case WebhookDeleted.type:
      return row ? { ...row, status: 'deleted', revision: event.revision, updated_at: decodeWith(WebhookDeleted, event).metadata.at } : null;
    default:
      return row ?? null;
  }
}

/** The webhook an event of its stream concerns. */
export function webhookIdOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(WEBHOOK_STREAM) ? event.stream.slice(WEBHOOK_STREAM.length) : undefined;
}

export const webhooksProjection = rowProjection<WebhookRow>({
  name: 'webhooks',
  streamPrefixes: [WEBHOOK_STREAM],
  table: {
    name: 'webhooks',
    key: 'webhook_id',
    columnNames: ['webhook_id', 'project_id', 'url', 'event_types', 'enabled', 'description', 'secret', 'previous_secret', 'previous_valid_until', 'status', 'revision', 'created_at', 'updated_at'],
    columns: `webhook_id text primary key, project_id text not null, url text not null, event_types jsonb not null, enabled boolean not null, description text not null,
      secret jsonb not null, previous_secret jsonb, previous_valid_until timestamptz, status text not null, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'webhook_id',
    indexes: ['project_id, webhook_id'],
  },
  keyOf: webhookIdOf,
  evolve: evolveWebhook,
});
