import { z } from 'zod';
import { webhook } from '../../../commands/webhooks/webhook.js';
import { evolveWebhook, type WebhookRow } from '../../../projections/webhooks.js';
import { findWebhook, listDeliveryAttempts, listWebhooks, type DeliveryAttemptRow, type WebhookView } from '../../../queries/webhooks.js';
import { openSecret, sealSecret } from '../../crypto/seal.js';
import { text } from '../../events/fields.js';
import { WebhookEventType, WebhookUrl } from '../../events/webhooks.js';
import { newId } from '../../ids.js';
import { secretAad } from '../../webhooks/lanes.js';
import { messageId } from '../../webhooks/notifications.js';
import { newSigningSecret } from '../../webhooks/signing.js';
import { decodePageToken, decodePositionCursor, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { fold, visibleProject } from './projects.js';
import { errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

/** How long the previous secret keeps signing after a rotation unless the request says otherwise: 24 hours. */
export const DEFAULT_GRACE_SECONDS = 86_400;
const MAX_GRACE_SECONDS = 7 * 86_400;

const EventTypes = z
  .array(WebhookEventType)
  .min(1)
  .refine((types) => new Set(types).size === types.length, { message: 'lists an event type twice' })
  .describe('The event types delivered to this endpoint (docs/webhooks.md); webhook.test is sent on request whatever this lists');

const CreateWebhookRequest = z
  .strictObject({
    url: WebhookUrl.describe('Where deliveries are POSTed: http(s), to an address PGWARD_WEBHOOK_ALLOWED_NETWORKS allows'),
    event_types: EventTypes,
    enabled: z.boolean().default(true).describe('Whether deliveries are made; a disabled endpoint keeps what is pending until enabled again'),
    description: text(500).default('').describe('A note for humans, at most 500 characters'),
  })
  .meta({ title: 'CreateWebhookRequest' });

const UpdateWebhookRequest = z
  .strictObject({
    url: WebhookUrl.optional(),
    event_types: EventTypes.optional(),
    enabled: z.boolean().optional(),
    description: text(500).optional(),
  })
  .refine((body) => Object.values(body).some((value) => value !== undefined), { message: 'name at least one of url, event_types, enabled, description' })
  .meta({ title: 'UpdateWebhookRequest' });

const RotateSecretRequest = z
  .strictObject({
    grace_period_seconds: z
      .int()
      .min(0)
      .max(MAX_GRACE_SECONDS)
      .default(DEFAULT_GRACE_SECONDS)
      .describe('How long deliveries stay signed with the previous secret as well (0-604800 s, default 86400)'),
  })
  .meta({ title: 'RotateWebhookSecretRequest' });

const Webhook = z
  .object({
    id: z.string(),
    project_id: z.string(),
    url: z.string(),
    event_types: z.array(WebhookEventType),
    enabled: z.boolean(),
    description: z.string(),
    delivery_status: z.enum(['healthy', 'failing']).describe('failing once a message was given up after the retry horizon, until a delivery succeeds'),
    failing_since: Timestamp.nullable(),
    previous_secret_valid_until: Timestamp.nullable().describe('Until when deliveries also carry a signature with the secret before the last rotation'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Webhook' });

const WebhookWithSecret = Webhook.extend({
  secret: z.string().describe('The signing secret (whsec_...), shown only in this response'),
}).meta({ id: 'WebhookWithSecret' });

const DeliveryAttempt = z
  .object({
    id: z.string(),
    message_id: z.string().describe('The webhook-id header and the envelope id, the same on every attempt'),
    type: WebhookEventType,
    attempt: z.int(),
    attempted_at: Timestamp,
    status_code: z.int().nullable().describe('The receiver’s HTTP status; null when none came'),
    latency_ms: z.int(),
    error: z.string().nullable(),
    outcome: z.enum(['delivered', 'retrying', 'failed']),
  })
  .meta({ id: 'WebhookDeliveryAttempt' });

function toWebhook(row: WebhookRow | WebhookView): z.infer<typeof Webhook> {
  const failingSince = 'failing_since' in row ? row.failing_since : null;
  return {
    id: row.webhook_id,
    project_id: row.project_id,
    url: row.url,
    event_types: row.event_types,
    enabled: row.enabled,
    description: row.description,
    delivery_status: failingSince === null ? 'healthy' : 'failing',
    failing_since: failingSince === null ? null : iso(failingSince),
    previous_secret_valid_until: row.previous_valid_until === null ? null : iso(row.previous_valid_until),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function toAttempt(row: DeliveryAttemptRow): z.infer<typeof DeliveryAttempt> {
  return { ...row, id: row.attempt_id, type: row.type as WebhookEventType, attempted_at: iso(row.attempted_at) };
}

/** The caller's live webhook in the project (from the stream when the read model has not caught up), else 404. */
async function visibleWebhook(deps: ApiDeps, orgId: string, projectId: string, webhookId: string): Promise<WebhookRow | WebhookView> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream<WebhookRow | WebhookView>(deps, () => findWebhook(deps.pool, projectId, webhookId), `webhook-${webhookId}`, evolveWebhook);
  if (!row || row.project_id !== projectId || row.status !== 'active') throw new Problem('NOT_FOUND', `webhook ${webhookId} not found in project ${projectId}`);
  return row;
}

/** The secret the stored events hold equals the one issued by this request; else the request was a retry already served. */
function shownOnce(deps: ApiDeps, row: WebhookRow, issued: string): void {
  if (openSecret(row.secret, deps.keyring, secretAad(row.webhook_id)) !== issued) {
    throw new Problem('CONFLICT', 'this request was already served; its secret was shown then and cannot be shown again');
  }
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const WebhookParams = ProjectParams.extend({ webhook_id: IdParam('webhook id') });

export function webhookRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/webhooks',
    {
      schema: {
        operationId: 'listWebhooks',
        summary: 'List a project’s webhook endpoints',
        tags: ['webhooks'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ webhooks: z.array(Webhook), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listWebhooks(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.webhook_id);
      return { webhooks: page.items.map(toWebhook), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/webhooks',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createWebhook',
        summary: 'Register a webhook endpoint',
        description:
          'Deliveries are signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature) with the secret this response shows once; ' +
          'it is stored sealed and never shown again (rotate it with rotate-secret). Retried with back-off for PGWARD_WEBHOOK_RETRY_HORIZON_SECONDS.',
        tags: ['webhooks'],
        params: ProjectParams,
        body: CreateWebhookRequest,
        response: { 201: WebhookWithSecret, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const webhookId = newId('whk_');
      const secret = newSigningSecret();
      const result = await execute(deps, request, `webhook-${webhookId}`, webhook, {
        kind: 'create',
        webhook: { webhook_id: webhookId, project_id: projectId, ...request.body, secret: sealSecret(secret, deps.keyring, secretAad(webhookId)) },
      });
      const row = fold(evolveWebhook, result.recorded);
      shownOnce(deps, row, secret);
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/webhooks/${row.webhook_id}`);
      return reply.code(201).send({ ...toWebhook(row), secret });
    },
  );

  app.get(
    '/v1/projects/:project_id/webhooks/:webhook_id',
    {
      schema: {
        operationId: 'getWebhook',
        summary: 'Get a webhook endpoint (never its secret)',
        tags: ['webhooks'],
        params: WebhookParams,
        response: { 200: Webhook, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const row = await visibleWebhook(deps, caller.orgId, request.params.project_id, request.params.webhook_id);
      etag(reply, row.revision);
      return toWebhook(row);
    },
  );

  app.patch(
    '/v1/projects/:project_id/webhooks/:webhook_id',
    {
      schema: {
        operationId: 'updateWebhook',
        summary: 'Change a webhook endpoint’s url, event types, enabled flag or description',
        description: 'Messages already enqueued keep their endpoint; a new url applies to their next attempt. Honours If-Match.',
        tags: ['webhooks'],
        params: WebhookParams,
        body: UpdateWebhookRequest,
        response: { 200: Webhook, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const row = await visibleWebhook(deps, caller.orgId, request.params.project_id, request.params.webhook_id);
      const result = await execute(deps, request, `webhook-${row.webhook_id}`, webhook, { kind: 'update', changes: request.body, ifRevision: ifMatch(request) });
      const updated = fold(evolveWebhook, result.recorded, row);
      etag(reply, updated.revision);
      return toWebhook(updated);
    },
  );

  app.delete(
    '/v1/projects/:project_id/webhooks/:webhook_id',
    {
      schema: {
        operationId: 'deleteWebhook',
        summary: 'Remove a webhook endpoint; what is pending for it is not sent',
        tags: ['webhooks'],
        params: WebhookParams,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const row = await visibleWebhook(deps, caller.orgId, request.params.project_id, request.params.webhook_id);
      await execute(deps, request, `webhook-${row.webhook_id}`, webhook, { kind: 'delete', ifRevision: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v1/projects/:project_id/webhooks/:webhook_id/rotate-secret',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'rotateWebhookSecret',
        summary: 'Replace a webhook endpoint’s signing secret',
        description:
          'The new secret is shown once. For grace_period_seconds (default 86400) every delivery carries two signatures, one per secret, ' +
          'space-separated in webhook-signature as Standard Webhooks allows, so receivers can switch without missing one. Honours If-Match.',
        tags: ['webhooks'],
        params: WebhookParams,
        body: RotateSecretRequest.nullish(),
        response: { 200: WebhookWithSecret, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const row = await visibleWebhook(deps, caller.orgId, request.params.project_id, request.params.webhook_id);
      const grace = request.body?.grace_period_seconds ?? DEFAULT_GRACE_SECONDS;
      const secret = newSigningSecret();
      const result = await execute(deps, request, `webhook-${row.webhook_id}`, webhook, {
        kind: 'rotate',
        secret: sealSecret(secret, deps.keyring, secretAad(row.webhook_id)),
        previousValidUntil: new Date(deps.now().getTime() + grace * 1000).toISOString(),
        ifRevision: ifMatch(request),
      });
      const rotated = fold(evolveWebhook, result.recorded, row);
      shownOnce(deps, rotated, secret);
      etag(reply, rotated.revision);
      return { ...toWebhook(rotated), secret };
    },
  );

  app.post(
    '/v1/projects/:project_id/webhooks/:webhook_id/test',
    {
      schema: {
        operationId: 'testWebhook',
        summary: 'Send a webhook.test message to this endpoint',
        description: 'Enqueued like every message (signed, retried, listed in deliveries); answers with its message id at once.',
        tags: ['webhooks'],
        params: WebhookParams,
        response: { 202: z.object({ message_id: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const row = await visibleWebhook(deps, caller.orgId, request.params.project_id, request.params.webhook_id);
      const result = await execute(deps, request, `webhook-${row.webhook_id}`, webhook, { kind: 'test' });
      return reply.code(202).send({ message_id: messageId(result.recorded[0]!) });
    },
  );

  app.get(
    '/v1/projects/:project_id/webhooks/:webhook_id/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: 'List a webhook endpoint’s delivery attempts, newest first',
        tags: ['webhooks'],
        params: WebhookParams,
        querystring: PageQuery,
        response: { 200: z.object({ deliveries: z.array(DeliveryAttempt), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const row = await visibleWebhook(deps, caller.orgId, request.params.project_id, request.params.webhook_id);
      const { page_size: size, page_token: token } = request.query;
      const before = decodePositionCursor(token);
      const page = paginate(await listDeliveryAttempts(deps.pool, row.webhook_id, before, size + 1), size, (attempt) => attempt.attempt_id);
      return { deliveries: page.items.map(toAttempt), next_page_token: page.next_page_token };
    },
  );
}
