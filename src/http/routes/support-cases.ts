/**
 * Support cases (spec §2.12) from both sides of the thread, and cancellation feedback
 * (docs/support.md). An organization's people reach their own cases at /v1/support-cases; the
 * deployment's operators, with an operator token, reach every organization's at /v1/operator/support-cases.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { cancellationFeedback, CANCELLATION_FEEDBACK_STREAM } from '../../../commands/support/cancellation-feedback.js';
import { supportCase, supportCaseStream } from '../../../commands/support/support-case.js';
import { evolveCancellationFeedback, evolveSupportCase, evolveSupportMessage, type CancellationFeedbackRow, type SupportCaseRow, type SupportMessageRow } from '../../../projections/support.js';
import { findSupportCase, listCancellationFeedback, listSupportCases, listSupportMessages } from '../../../queries/support.js';
import { text } from '../../events/fields.js';
import { CancellationReason, SupportBody, SupportSeverity, SupportSide, SupportTitle } from '../../events/support.js';
import { newId } from '../../ids.js';
import { decodePageToken, decodeTimeCursor, PageQuery, paginate, timeCursorKey } from '../pagination.js';
import { requireOperator } from '../plugins/auth.js';
import { Problem } from '../problem.js';
import { OrgParams } from './organizations.js';
import { fold } from './projects.js';
import { addressedOrg, commandContext, errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const CreateSupportCaseRequest = z
  .strictObject({
    org_id: IdParam('organization the case is about (yours: GET /v1/me)'),
    title: SupportTitle.describe('1-500 characters'),
    body: SupportBody.describe('1-50,000 characters'),
    severity: SupportSeverity.default(4).describe('1 Critical, 2 High, 3 Normal, 4 Low (default)'),
  })
  .meta({ title: 'CreateSupportCaseRequest' });

const CreateSupportMessageRequest = z.strictObject({ body: SupportBody.describe('1-50,000 characters') }).meta({ title: 'CreateSupportMessageRequest' });

const CancellationFeedbackRequest = z
  .strictObject({
    reason: CancellationReason.optional().describe('The predefined reason'),
    feedback: text(5_000).optional().describe('Free text, at most 5,000 characters'),
  })
  .meta({ title: 'CancellationFeedbackRequest' });

const SupportMessage = z
  .object({
    id: z.string(),
    case_id: z.string(),
    side: SupportSide.describe('customer: the organization’s people; operator: the deployment’s support'),
    author: z.string().describe('api_key:<key id>, user:<subject> or operator:<name>'),
    body: z.string(),
    created_at: Timestamp,
  })
  .meta({ id: 'SupportMessage' });

const SupportCase = z
  .object({
    id: z.string(),
    org_id: z.string(),
    title: z.string(),
    body: z.string(),
    severity: z.int().describe('1 Critical, 2 High, 3 Normal, 4 Low'),
    status: z.enum(['open', 'closed']),
    opened_by: z.string(),
    message_count: z.int(),
    awaiting: z.enum(['operator', 'customer', 'nobody']).describe('Whose turn it is: the side that did not write last; nobody once closed'),
    closed_by: z.string().nullable(),
    closed_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'SupportCase' });

const SupportCaseWithThread = SupportCase.extend({ messages: z.array(SupportMessage).describe('The thread after the case’s own body, oldest first') }).meta({ id: 'SupportCaseWithThread' });

const CancellationFeedback = z
  .object({ id: z.string(), org_id: z.string(), reason: CancellationReason.nullable(), feedback: z.string(), recorded_by: z.string(), created_at: Timestamp })
  .meta({ id: 'CancellationFeedback' });

function toCase(row: SupportCaseRow): z.infer<typeof SupportCase> {
  return {
    id: row.case_id,
    org_id: row.org_id,
    title: row.title,
    body: row.body,
    severity: row.severity,
    status: row.status,
    opened_by: row.opened_by,
    message_count: row.message_count,
    awaiting: row.status === 'closed' ? 'nobody' : row.last_side === 'customer' ? 'operator' : 'customer',
    closed_by: row.closed_by,
    closed_at: row.closed_at === null ? null : iso(row.closed_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function toMessage(row: SupportMessageRow): z.infer<typeof SupportMessage> {
  return { id: row.message_id, case_id: row.case_id, side: row.side, author: row.author, body: row.body, created_at: iso(row.created_at) };
}

function toFeedback(row: CancellationFeedbackRow): z.infer<typeof CancellationFeedback> {
  return { id: row.feedback_id, org_id: row.org_id, reason: row.reason as z.infer<typeof CancellationReason> | null, feedback: row.feedback, recorded_by: row.recorded_by, created_at: iso(row.created_at) };
}

/** The case when `orgId` may see it (every case for an operator, `orgId` undefined), else 404 as for a nonexistent one. */
async function visibleCase(deps: ApiDeps, orgId: string | undefined, caseId: string): Promise<SupportCaseRow> {
  const row = await readModelOrStream(deps, () => findSupportCase(deps.pool, caseId), supportCaseStream(caseId), evolveSupportCase);
  if (!row || (orgId !== undefined && row.org_id !== orgId)) throw new Problem('NOT_FOUND', `support case ${caseId} not found`);
  return row;
}

/** The messages the read model has, and those of the stream it has not applied yet (read-your-writes). */
async function thread(deps: ApiDeps, row: SupportCaseRow): Promise<SupportMessageRow[]> {
  const messages = await listSupportMessages(deps.pool, row.case_id);
  if (messages.length >= row.message_count) return messages;
  const events = await deps.store.readStream(supportCaseStream(row.case_id));
  return events.filter((event) => event.type.startsWith('SupportMessagePosted.')).map((event) => evolveSupportMessage(undefined, event)!);
}

const CaseParams = z.object({ case_id: IdParam('support case id') });
const CaseFilters = z.object({
  status: z.enum(['open', 'closed']).optional().describe('Only cases in this status'),
  severity: z.coerce.number().int().min(1).max(4).optional().describe('Only cases of this severity (1-4)'),
  org_id: IdParam('organization whose cases to list: yours by default; for operators, all by default').optional(),
});

/** How one side reaches the cases: which it sees (an organization's, or all) and what it may do. */
interface Side {
  readonly side: z.infer<typeof SupportSide>;
  readonly base: string;
  readonly tag: string;
  readonly ids: { readonly list: string; readonly get: string; readonly post: string; readonly close: string };
  readonly who: string;
  /** The organization whose cases the request sees (undefined: all), refusing callers without the permission. */
  readonly scope: (request: FastifyRequest, write: boolean, named?: string) => string | undefined;
}

const customer: Side = {
  side: 'customer',
  base: '/v1/support-cases',
  tag: 'support',
  ids: { list: 'listSupportCases', get: 'getSupportCase', post: 'createSupportMessage', close: 'closeSupportCase' },
  who: 'the organization',
  scope: (request, write, named) => addressedOrg(requireRole(request, write ? 'member' : 'viewer'), named),
};

const operator: Side = {
  side: 'operator',
  base: '/v1/operator/support-cases',
  tag: 'operator',
  ids: { list: 'listOperatorSupportCases', get: 'getOperatorSupportCase', post: 'createOperatorSupportMessage', close: 'closeOperatorSupportCase' },
  who: 'the deployment’s operators (operator token)',
  scope: (request, _write, named) => (requireOperator(request), named),
};

function threadRoutes(app: Api, deps: ApiDeps, side: Side): void {
  const itemPath = `${side.base}/:case_id`;
  app.get(
    side.base,
    {
      schema: {
        operationId: side.ids.list,
        summary: side.side === 'customer' ? 'List your organization’s support cases' : 'List every organization’s support cases (operators)',
        description: `Newest first; filter by status and severity; for ${side.who}. Each case says whose turn it is (awaiting).`,
        tags: [side.tag],
        querystring: PageQuery.extend(CaseFilters.shape),
        response: { 200: z.object({ cases: z.array(SupportCase), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const { page_size: size, page_token: token, status, severity, org_id: named } = request.query;
      const orgId = side.scope(request, false, named);
      const rows = await listSupportCases(deps.pool, { ...(orgId ? { orgId } : {}), ...(status ? { status } : {}), ...(severity ? { severity } : {}) }, decodeTimeCursor(token), size + 1);
      const page = paginate(rows, size, (row) => timeCursorKey(iso(row.created_at), row.case_id));
      return { cases: page.items.map(toCase), next_page_token: page.next_page_token };
    },
  );

  app.get(
    itemPath,
    {
      schema: {
        operationId: side.ids.get,
        summary: side.side === 'customer' ? 'Get a support case and its message thread' : 'Get any organization’s support case and its thread (operators)',
        tags: [side.tag],
        params: CaseParams,
        response: { 200: SupportCaseWithThread, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const row = await visibleCase(deps, side.scope(request, false), request.params.case_id);
      etag(reply, row.revision);
      return { ...toCase(row), messages: (await thread(deps, row)).map(toMessage) };
    },
  );

  app.post(
    `${itemPath}/messages`,
    {
      config: { idempotent: true },
      schema: {
        operationId: side.ids.post,
        summary: side.side === 'customer' ? 'Add a message to your support case' : 'Answer a support case (operators)',
        description: 'A closed case takes no more messages (409 INVALID_STATE): open a new one. Honours If-Match with the case’s ETag; answers with the case’s new ETag.',
        tags: [side.tag],
        params: CaseParams,
        body: CreateSupportMessageRequest,
        response: { 201: SupportMessage, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED', 'IDEMPOTENCY_KEY_REUSED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const row = await visibleCase(deps, side.scope(request, true), request.params.case_id);
      const result = await execute(deps, request, supportCaseStream(row.case_id), supportCase, {
        kind: 'post',
        messageId: newId('scm_'),
        side: side.side,
        author: commandContext(request, deps).actor,
        body: request.body.body,
        ifRevision: ifMatch(request),
      });
      etag(reply, result.revision);
      void reply.header('location', `${side.base}/${row.case_id}`);
      return reply.code(201).send(toMessage(evolveSupportMessage(undefined, result.recorded[0]!)!));
    },
  );

  app.post(
    `${itemPath}/close`,
    {
      schema: {
        operationId: side.ids.close,
        summary: side.side === 'customer' ? 'Close your support case' : 'Close a support case (operators)',
        description: 'Closing a closed case is 409 INVALID_STATE. Honours If-Match.',
        tags: [side.tag],
        params: CaseParams,
        response: { 200: SupportCase, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const row = await visibleCase(deps, side.scope(request, true), request.params.case_id);
      const result = await execute(deps, request, supportCaseStream(row.case_id), supportCase, { kind: 'close', side: side.side, closedBy: commandContext(request, deps).actor, ifRevision: ifMatch(request) });
      const closed = fold(evolveSupportCase, result.recorded, row);
      etag(reply, closed.revision);
      return toCase(closed);
    },
  );
}

export function supportCaseRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/support-cases',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createSupportCase',
        summary: 'Open a support case',
        description: 'The deployment’s operators answer in its thread (GET /v1/support-cases/{case_id}). org_id is your organization; another one is 404.',
        tags: ['support'],
        body: CreateSupportCaseRequest,
        response: { 201: SupportCase, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const orgId = customer.scope(request, true, request.body.org_id)!;
      const caseId = newId('sc_');
      const { title, body, severity } = request.body;
      const result = await execute(deps, request, supportCaseStream(caseId), supportCase, {
        kind: 'open',
        opened: { case_id: caseId, org_id: orgId, title, body, severity, opened_by: commandContext(request, deps).actor },
      });
      const row = fold(evolveSupportCase, result.recorded);
      etag(reply, row.revision);
      void reply.header('location', `/v1/support-cases/${row.case_id}`);
      return reply.code(201).send(toCase(row));
    },
  );
  threadRoutes(app, deps, customer);
  threadRoutes(app, deps, operator);

  app.post(
    '/v1/orgs/:org_id/cancellation-feedback',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createCancellationFeedback',
        summary: 'Record why the organization cancels (cancellation feedback)',
        description: 'Both fields are optional. Records are kept as given; they are never edited.',
        tags: ['support'],
        params: OrgParams,
        body: CancellationFeedbackRequest.nullish(),
        response: { 201: CancellationFeedback, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const orgId = addressedOrg(requireRole(request, 'admin'), request.params.org_id);
      const feedbackId = newId('cfb_');
      const result = await execute(deps, request, `${CANCELLATION_FEEDBACK_STREAM}${feedbackId}`, cancellationFeedback, {
        feedback_id: feedbackId,
        org_id: orgId,
        reason: request.body?.reason ?? null,
        feedback: request.body?.feedback ?? '',
        recorded_by: commandContext(request, deps).actor,
      });
      return reply.code(201).send(toFeedback(fold(evolveCancellationFeedback, result.recorded)));
    },
  );

  app.get(
    '/v1/orgs/:org_id/cancellation-feedback',
    {
      schema: {
        operationId: 'listCancellationFeedback',
        summary: 'List the organization’s cancellation feedback',
        tags: ['support'],
        params: OrgParams,
        querystring: PageQuery,
        response: { 200: z.object({ feedback: z.array(CancellationFeedback), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const orgId = addressedOrg(requireRole(request, 'admin'), request.params.org_id);
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listCancellationFeedback(deps.pool, orgId, decodePageToken(token), size + 1), size, (row) => row.feedback_id);
      return { feedback: page.items.map(toFeedback), next_page_token: page.next_page_token };
    },
  );
}
