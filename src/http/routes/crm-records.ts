/**
 * The five operations every CRM record type has (docs/crm.md): create, list, get, patch and delete,
 * organization-scoped, each guarded by its entry in CRM_PERMISSIONS.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { crmRecord, crmStream, type Fields } from '../../../commands/crm/record.js';
import { evolveCrmRecord, type CrmRecordRow } from '../../../projections/crm.js';
import { findCrmRecord, listCrmRecords, type FieldFilter } from '../../../queries/crm.js';
import { CRM_PERMISSIONS, type CrmOperation } from '../../crm/permissions.js';
import { CRM_ID_PREFIX, type CrmRecordType } from '../../events/crm.js';
import { text } from '../../events/fields.js';
import { isAgentRole, type AgentRole } from '../../events/organizations.js';
import { newId } from '../../ids.js';
import { decodeTimeCursor, PageQuery, paginate, timeCursorKey } from '../pagination.js';
import { callerOf } from '../plugins/auth.js';
import { Problem } from '../problem.js';
import { fold } from './projects.js';
import { errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

/** Who calls a CRM operation: the organization, and the agent role of an agent credential (null for a person). */
export interface CrmCaller {
  readonly orgId: string;
  readonly agentRole: AgentRole | null;
}

/** The caller, when its role may call `operation` (CRM_PERMISSIONS); else 403 FORBIDDEN. */
export function crmCaller(request: FastifyRequest, operation: CrmOperation): CrmCaller {
  const caller = callerOf(request);
  const permission = CRM_PERMISSIONS[operation];
  if (!isAgentRole(caller.role)) return { orgId: requireRole(request, permission.human).orgId, agentRole: null };
  if (!(permission.agents as readonly AgentRole[]).includes(caller.role)) {
    throw new Problem('FORBIDDEN', `an agent credential of role ${caller.role} may not call ${operation}${operation === 'approveArtifact' ? ': only a person approves' : ''} (docs/crm.md lists what each agent role may call)`);
  }
  return { orgId: caller.orgId, agentRole: caller.role };
}

/** The live record of `type` in the organization (from its stream when the read model lags), or undefined. */
export async function liveRecord(deps: ApiDeps, orgId: string, type: CrmRecordType, recordId: string): Promise<CrmRecordRow | undefined> {
  const row = await readModelOrStream(deps, () => findCrmRecord(deps.pool, recordId), crmStream(type, recordId), evolveCrmRecord);
  return row && row.org_id === orgId && row.record_type === type ? row : undefined;
}

/** 400 INVALID_INPUT naming `field` unless it names a live record of `type` in the organization. */
export async function requireReference(deps: ApiDeps, orgId: string, type: CrmRecordType, recordId: string, field: string): Promise<CrmRecordRow> {
  const row = await liveRecord(deps, orgId, type, recordId);
  if (!row) throw new Problem('INVALID_INPUT', `${field}: no ${type} ${recordId} in this organization`, { errors: [{ field, message: `names no ${type} of this organization` }] });
  return row;
}

export const RecordMeta = {
  id: z.string(),
  org_id: z.string(),
  created_by: z.string().describe('Who created it: api_key:<key id> or user:<subject>'),
  created_by_agent_role: z.string().nullable().describe('The agent role of the credential that created it; null when a person did'),
  created_at: Timestamp,
  updated_at: Timestamp,
};

/** A record as the API shows it: its fields, id, organization, creator and times. */
export function recordBody(row: CrmRecordRow): Fields & Record<keyof typeof RecordMeta, unknown> {
  return { ...row.fields, id: row.record_id, org_id: row.org_id, created_by: row.created_by, created_by_agent_role: row.created_by_agent_role, created_at: iso(row.created_at), updated_at: iso(row.updated_at) };
}

/** A list filter: the query parameter's schema and the field it matches. */
export interface ListFilter {
  readonly schema: z.ZodType<string | undefined>;
  readonly field: string;
  readonly match?: FieldFilter['match'];
  /** Matches the row's status column rather than a field. */
  readonly column?: 'status';
  readonly normalize?: (value: string) => string;
}

export type Body = Record<string, unknown>;

export interface RecordRoutes {
  readonly type: CrmRecordType;
  readonly label: string;
  readonly collection: string;
  readonly param: string;
  readonly ops: { readonly list: CrmOperation; readonly get: CrmOperation; readonly create: CrmOperation; readonly update: CrmOperation; readonly delete: CrmOperation };
  readonly createBody: z.ZodObject;
  readonly updateBody: z.ZodType;
  readonly response: z.ZodObject;
  readonly describe: { readonly create: string; readonly update: string; readonly delete: string };
  readonly filters: Readonly<Record<string, ListFilter>>;
  readonly searched: string;
  readonly toResponse: (row: CrmRecordRow) => Body;
  /** The get operation's answer, when it adds to toResponse (a task's artifacts). */
  readonly detail?: (deps: ApiDeps, row: CrmRecordRow) => Promise<Body>;
  /** Refuses (with a Problem naming the field) fields that name records missing from the organization. */
  readonly checkReferences?: (deps: ApiDeps, caller: CrmCaller, fields: Fields, current?: CrmRecordRow) => Promise<void>;
  /** Refuses a delete that would leave other records naming this one. */
  readonly checkDelete?: (deps: ApiDeps, row: CrmRecordRow) => Promise<void>;
}

function listBody(spec: RecordRoutes, query: Record<string, string | undefined>): { q?: string; fields: FieldFilter[]; status?: string } {
  const fields: FieldFilter[] = [];
  let status: string | undefined;
  for (const [name, filter] of Object.entries(spec.filters)) {
    const given = query[name];
    if (given === undefined) continue;
    const value = filter.normalize ? filter.normalize(given) : given;
    if (filter.column === 'status') status = value;
    else fields.push({ field: filter.field, value, match: filter.match ?? 'equals' });
  }
  return { ...(query.q !== undefined ? { q: query.q } : {}), fields, ...(status !== undefined ? { status } : {}) };
}

export function recordRoutes(app: Api, deps: ApiDeps, spec: RecordRoutes): void {
  const aggregate = crmRecord(spec.type);
  const itemPath = `${spec.collection}/:${spec.param}`;
  const Params = z.object({ [spec.param]: IdParam(`${spec.label} id`) });
  const idOf = (request: FastifyRequest): string => (request.params as Record<string, string>)[spec.param]!;
  const visible = async (caller: CrmCaller, recordId: string): Promise<CrmRecordRow> => {
    const row = await liveRecord(deps, caller.orgId, spec.type, recordId);
    if (!row) throw new Problem('NOT_FOUND', `${spec.label} ${recordId} not found`);
    return row;
  };
  const filterShape = Object.fromEntries(Object.entries(spec.filters).map(([name, filter]) => [name, filter.schema]));
  const ListQuery = PageQuery.extend({ q: text(255, 1).optional().describe(`Text the ${spec.searched} contain, case-insensitively`), ...filterShape });
  const listKey = spec.collection.slice(spec.collection.lastIndexOf('/') + 1).replaceAll('-', '_');

  app.get(
    spec.collection,
    {
      schema: {
        operationId: spec.ops.list,
        summary: `List the organization’s ${spec.label === 'company' ? 'companies' : `${spec.label}s`}`,
        description: `Newest first; q searches the ${spec.searched}; the other parameters filter on equal values.`,
        tags: ['crm'],
        querystring: ListQuery,
        response: { 200: z.object({ [listKey]: z.array(spec.response), next_page_token: z.string() }), ...errorResponses('FORBIDDEN') },
      },
    },
    async (request) => {
      const caller = crmCaller(request, spec.ops.list);
      const query = request.query as PageQuery & Record<string, string | undefined>;
      const rows = await listCrmRecords(deps.pool, { orgId: caller.orgId, type: spec.type, ...listBody(spec, query) }, decodeTimeCursor(query.page_token), query.page_size + 1);
      const page = paginate(rows, query.page_size, (row) => timeCursorKey(iso(row.created_at), row.record_id));
      return { [listKey]: page.items.map(spec.toResponse), next_page_token: page.next_page_token };
    },
  );

  app.post(
    spec.collection,
    {
      config: { idempotent: true },
      schema: {
        operationId: spec.ops.create,
        summary: `Create a ${spec.label}`,
        description: spec.describe.create,
        tags: ['crm'],
        body: spec.createBody,
        response: { 201: spec.response, ...errorResponses('FORBIDDEN', 'IDEMPOTENCY_KEY_REUSED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = crmCaller(request, spec.ops.create);
      const fields = request.body as Fields;
      await spec.checkReferences?.(deps, caller, fields);
      const recordId = newId(CRM_ID_PREFIX[spec.type]);
      const result = await execute(deps, request, crmStream(spec.type, recordId), aggregate, { kind: 'create', recordId, orgId: caller.orgId, agentRole: caller.agentRole, fields });
      const row = fold(evolveCrmRecord, result.recorded);
      etag(reply, row.revision);
      void reply.header('location', `${spec.collection}/${row.record_id}`);
      return reply.code(201).send(spec.toResponse(row));
    },
  );

  app.get(
    itemPath,
    {
      schema: { operationId: spec.ops.get, summary: `Get a ${spec.label}`, tags: ['crm'], params: Params, response: { 200: spec.response, ...errorResponses('FORBIDDEN', 'NOT_FOUND') } },
    },
    async (request, reply) => {
      const row = await visible(crmCaller(request, spec.ops.get), idOf(request));
      etag(reply, row.revision);
      return spec.detail ? spec.detail(deps, row) : spec.toResponse(row);
    },
  );

  app.patch(
    itemPath,
    {
      schema: {
        operationId: spec.ops.update,
        summary: `Change some of a ${spec.label}’s fields`,
        description: `${spec.describe.update} Honours If-Match with the ETag of a GET.`,
        tags: ['crm'],
        params: Params,
        body: spec.updateBody,
        response: { 200: spec.response, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = crmCaller(request, spec.ops.update);
      const row = await visible(caller, idOf(request));
      const changes = request.body as Fields;
      await spec.checkReferences?.(deps, caller, changes, row);
      const result = await execute(deps, request, crmStream(spec.type, row.record_id), aggregate, { kind: 'update', changes, agentRole: caller.agentRole, ifRevision: ifMatch(request) });
      const updated = fold(evolveCrmRecord, result.recorded, row);
      etag(reply, updated.revision);
      return spec.toResponse(updated);
    },
  );

  app.delete(
    itemPath,
    {
      schema: {
        operationId: spec.ops.delete,
        summary: `Delete a ${spec.label}`,
        description: `${spec.describe.delete} Its activity stays on the timeline. Honours If-Match.`,
        tags: ['crm'],
        params: Params,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'CONFLICT', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = crmCaller(request, spec.ops.delete);
      const row = await visible(caller, idOf(request));
      await spec.checkDelete?.(deps, row);
      await execute(deps, request, crmStream(spec.type, row.record_id), aggregate, { kind: 'delete', agentRole: caller.agentRole, ifRevision: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );
}
