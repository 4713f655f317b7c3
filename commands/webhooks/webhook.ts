import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import type { SealedSecret } from '../../src/events/fields.js';
import { WebhookCreated, WebhookDeleted, WebhookSecretRotated, WebhookTestRequested, WebhookUpdated } from '../../src/events/webhooks.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** One webhook endpoint per stream (`webhook-<id>`). `revision` is its ETag. */
export interface WebhookState {
  readonly exists: boolean;
  readonly deleted: boolean;
  readonly webhookId?: string;
  readonly revision: number;
}

export type WebhookChanges = z.input<typeof WebhookUpdated.schema>['changes'];

export type WebhookCommand =
  | { readonly kind: 'create'; readonly webhook: z.input<typeof WebhookCreated.schema> }
  | { readonly kind: 'update'; readonly changes: WebhookChanges; readonly ifRevision?: number }
  | { readonly kind: 'rotate'; readonly secret: SealedSecret; readonly previousValidUntil: string; readonly ifRevision?: number }
  | { readonly kind: 'test' }
  | { readonly kind: 'delete'; readonly ifRevision?: number };

function evolve(state: WebhookState, event: CatalogEvent): WebhookState {
  switch (event.type) {
    case WebhookCreated.type:
      return { ...state, exists: true, webhookId: event.data.webhook_id, revision: event.revision };
    case WebhookUpdated.type:
    case WebhookSecretRotated.type:
      return { ...state, revision: event.revision };
    case WebhookDeleted.type:
      return { ...state, deleted: true, revision: event.revision };
    default:
      return state;
  }
}

function decide(state: WebhookState, command: WebhookCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `webhook ${command.webhook.webhook_id} already exists`);
    return [emit(WebhookCreated, command.webhook)];
  }
  if (!state.exists || state.deleted) return new DomainError('NOT_FOUND', 'webhook not found');
  const webhook_id = state.webhookId!;
  if (command.kind !== 'test' && command.ifRevision !== undefined && command.ifRevision !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the webhook is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
  }
  switch (command.kind) {
    case 'update':
      return [emit(WebhookUpdated, { webhook_id, changes: command.changes })];
    case 'rotate':
      return [emit(WebhookSecretRotated, { webhook_id, secret: command.secret, previous_valid_until: command.previousValidUntil })];
    case 'test':
      return [emit(WebhookTestRequested, { webhook_id })];
    case 'delete':
      return [emit(WebhookDeleted, { webhook_id })];
  }
}

export const webhook: Aggregate<WebhookState, WebhookCommand> = {
  initial: { exists: false, deleted: false, revision: -1 },
  evolve,
  decide,
};
