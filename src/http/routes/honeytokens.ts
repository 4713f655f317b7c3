import { z } from 'zod';
import { honeytoken } from '../../../commands/honeytokens/honeytoken.js';
import { evolveHoneytoken, type HoneytokenRow } from '../../../projections/honeytokens.js';
import { findHoneytoken, listHoneytokens } from '../../../queries/honeytokens.js';
import { policiesPlanting } from '../../../queries/policies.js';
import { HoneytokenKind, targetFitsKind } from '../../events/honeytokens.js';
import { newId } from '../../ids.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { fold, visibleProject } from './projects.js';
import { errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const TARGET_SHAPES = 'schema.table for a table, schema.table.column for a column, any text of 1-1000 characters for a value';

const CreateHoneytokenRequest = z
  .strictObject({
    kind: HoneytokenKind.describe('What the canary is: a table, a column, or a literal value appearing in statements'),
    target: z.string().describe(`The canary: ${TARGET_SHAPES}`),
    disable_credential: z.boolean().default(false).describe('Also disable the credential whose statement touches it'),
  })
  .refine((body) => targetFitsKind(body.kind, body.target), { message: `must be ${TARGET_SHAPES}`, path: ['target'] })
  .meta({ title: 'CreateHoneytokenRequest' });

const Honeytoken = z
  .object({
    id: z.string(),
    project_id: z.string(),
    kind: HoneytokenKind,
    target: z.string(),
    disable_credential: z.boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Honeytoken' });

function toHoneytoken(row: HoneytokenRow): z.infer<typeof Honeytoken> {
  return {
    id: row.honeytoken_id,
    project_id: row.project_id,
    kind: row.kind,
    target: row.target,
    disable_credential: row.disable_credential,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** The caller's live honeytoken in the project (from the stream when the read model has not caught up), else 404. */
async function visibleHoneytoken(deps: ApiDeps, orgId: string, projectId: string, honeytokenId: string): Promise<HoneytokenRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findHoneytoken(deps.pool, projectId, honeytokenId), `honeytoken-${honeytokenId}`, evolveHoneytoken);
  if (!row || row.project_id !== projectId || row.status !== 'active') throw new Problem('NOT_FOUND', `honeytoken ${honeytokenId} not found in project ${projectId}`);
  return row;
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const HoneytokenParams = ProjectParams.extend({ honeytoken_id: IdParam('honeytoken id') });

export function honeytokenRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/honeytokens',
    {
      schema: {
        operationId: 'listHoneytokens',
        summary: 'List a project’s honeytokens',
        tags: ['honeytokens'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ honeytokens: z.array(Honeytoken), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listHoneytokens(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.honeytoken_id);
      return { honeytokens: page.items.map(toHoneytoken), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/honeytokens',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createHoneytoken',
        summary: 'Plant a honeytoken',
        description:
          'A canary table, column or value. A policy profile plants it by listing its id in `honeytokens`; a statement of a credential under that profile ' +
          'that touches it is refused, audited as canary_tripped, and, when disable_credential is true, the credential is disabled.',
        tags: ['honeytokens'],
        params: ProjectParams,
        body: CreateHoneytokenRequest,
        response: { 201: Honeytoken, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const honeytokenId = newId('hnt_');
      const result = await execute(deps, request, `honeytoken-${honeytokenId}`, honeytoken, {
        kind: 'create',
        honeytoken: { honeytoken_id: honeytokenId, project_id: projectId, ...request.body },
      });
      const row = fold(evolveHoneytoken, result.recorded);
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/honeytokens/${honeytokenId}`);
      return reply.code(201).send(toHoneytoken(row));
    },
  );

  app.get(
    '/v1/projects/:project_id/honeytokens/:honeytoken_id',
    {
      schema: {
        operationId: 'getHoneytoken',
        summary: 'Get a honeytoken',
        tags: ['honeytokens'],
        params: HoneytokenParams,
        response: { 200: Honeytoken, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const row = await visibleHoneytoken(deps, caller.orgId, request.params.project_id, request.params.honeytoken_id);
      etag(reply, row.revision);
      return toHoneytoken(row);
    },
  );

  app.delete(
    '/v1/projects/:project_id/honeytokens/:honeytoken_id',
    {
      schema: {
        operationId: 'deleteHoneytoken',
        summary: 'Remove a honeytoken that no policy profile plants',
        description: 'Honours If-Match with the honeytoken’s ETag (412 when it changed since).',
        tags: ['honeytokens'],
        params: HoneytokenParams,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'CONFLICT', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const current = await visibleHoneytoken(deps, caller.orgId, request.params.project_id, request.params.honeytoken_id);
      const attachedTo = await policiesPlanting(deps.pool, current.project_id, current.honeytoken_id);
      await execute(deps, request, `honeytoken-${current.honeytoken_id}`, honeytoken, { kind: 'delete', attachedTo, ifRevision: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );
}
