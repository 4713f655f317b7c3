import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { changes, ProjectId, SealedSecret, text, Timestamp, WebhookId } from './fields.js';

/**
 * What a webhook endpoint can subscribe to (docs/webhooks.md says what each carries and which
 * event it comes from). `webhook.test` is sent on request to the one endpoint asked, subscribed or not.
 */
export const WebhookEventType = z.enum([
  'query_blocked',
  'budget_exhausted',
  'canary_tripped',
  'credential_disabled',
  'credential_revoked',
  'approval_requested',
  'approval_decided',
  'anomaly_alert',
  'migration_flagged',
  'audit_checkpoint',
  'webhook.test',
]);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/** An http(s) URL without credentials in it (they would show in every GET), at most 2048 characters. */
export const WebhookUrl = text(2048, 1).refine(
  (value) => {
    if (!URL.canParse(value)) return false;
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '' && url.hostname !== '';
  },
  { message: 'expected an http:// or https:// URL with a host and no user name or password in it' },
);

const EventTypes = z
  .array(WebhookEventType)
  .min(1)
  .max(WebhookEventType.options.length)
  .refine((types) => new Set(types).size === types.length, { message: 'lists an event type twice' });

const webhookFields = {
  url: WebhookUrl,
  event_types: EventTypes,
  enabled: z.boolean(),
  description: text(500),
};

/** A webhook endpoint was registered; its signing secret is sealed (aad `webhook:<id>`), never plaintext. */
export const WebhookCreated = defineEvent(
  'WebhookCreated',
  1,
  z.strictObject({ webhook_id: WebhookId, project_id: ProjectId, ...webhookFields, secret: SealedSecret }),
);
export type WebhookCreated = z.infer<typeof WebhookCreated.schema>;

/** Some of an endpoint's url, event types, enabled flag or description changed. */
export const WebhookUpdated = defineEvent('WebhookUpdated', 1, z.strictObject({ webhook_id: WebhookId, changes: changes(webhookFields) }));
export type WebhookUpdated = z.infer<typeof WebhookUpdated.schema>;

/** The signing secret was replaced; deliveries are signed with the previous one too until `previous_valid_until`. */
export const WebhookSecretRotated = defineEvent(
  'WebhookSecretRotated',
  1,
  z.strictObject({ webhook_id: WebhookId, secret: SealedSecret, previous_valid_until: Timestamp }),
);
export type WebhookSecretRotated = z.infer<typeof WebhookSecretRotated.schema>;

/** The endpoint was removed: nothing more is delivered to it. */
export const WebhookDeleted = defineEvent('WebhookDeleted', 1, z.strictObject({ webhook_id: WebhookId }));
export type WebhookDeleted = z.infer<typeof WebhookDeleted.schema>;

/** Someone asked for a `webhook.test` delivery to this endpoint. */
export const WebhookTestRequested = defineEvent('WebhookTestRequested', 1, z.strictObject({ webhook_id: WebhookId }));
export type WebhookTestRequested = z.infer<typeof WebhookTestRequested.schema>;
