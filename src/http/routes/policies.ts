import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { policy } from '../../../commands/policies/policy.js';
import { evolvePolicy, type PolicyRow } from '../../../projections/policies.js';
import { countLiveCredentialsUsingPolicy } from '../../../queries/credentials.js';
import { unknownHoneytokens } from '../../../queries/honeytokens.js';
import { findPolicy, listPolicies, policyNameTaken } from '../../../queries/policies.js';
import { HoneytokenId, QualifiedColumn, text } from '../../events/fields.js';
import {
  AuditMode, DEFAULT_MIGRATION_SAFETY, DEFAULT_STATEMENT_TIMEOUT_MS, DEFAULT_WRITE_MODE, WriteMode, MaskMode, MigrationSafety, POLICY_STATEMENT_KINDS, PolicyStatementKind, STATEMENT_TIMEOUT_MAX_MS,
  STATEMENT_TIMEOUT_MIN_MS,
} from '../../events/policies.js';
import { newId } from '../../ids.js';
import { MAX_ROW_FILTER_CHARS, rowFilterProblem } from '../../../proxy/policy/row-filters.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { fold, visibleProject } from './projects.js';
import { actorOf, errorResponses, etag, execute, IdParam, ifMatch, iso, requireRole, Timestamp, type Api, type ApiDeps, readModelOrStream } from './support.js';
import type { Caller } from '../plugins/auth.js';
import { logEvent } from '../../log-events.js';
import { masksWithHash } from '../../../proxy/policy/hash-key.js';

const identifier = '[^.\\s\\0]{1,63}';
const AllowedTable = z
  .string()
  .regex(new RegExp(`^${identifier}\\.(${identifier}|\\*)$`), { message: 'must be schema.table or schema.*' })
  .describe('A schema-qualified table, or every table of a schema as schema.*');

/** The read models store these counts as PostgreSQL integer: a larger one would stop the policies projection for every tenant. */
const INT4_MAX = 2_147_483_647;

const StatementKinds = z
  .array(PolicyStatementKind)
  .max(POLICY_STATEMENT_KINDS.length)
  .refine((kinds) => new Set(kinds).size === kinds.length, { message: 'lists a statement kind twice' })
  .describe(`Statement kinds: ${POLICY_STATEMENT_KINDS.join(', ')}`);

const ExactTable = z.string().regex(new RegExp(`^${identifier}\\.(?!\\*$)${identifier}$`), { message: 'must be schema.table, one table' });

const unique = (items: readonly string[]): boolean => new Set(items).size === items.length;

const Approval = z.strictObject({
  held_kinds: StatementKinds.default([]).describe('Statement kinds held for a human decision, e.g. update, delete, ddl; a statement running one anywhere (a writable CTE is a delete) is held'),
  row_threshold: z.int().min(0).max(INT4_MAX).nullable().default(null).describe('Also hold writes estimated to affect more rows, and writes whose rows cannot be counted; null for none'),
  expiry_seconds: z.int().min(1).max(604_800).default(3600).describe('An undecided request lapses after this'),
  tables: z.array(AllowedTable).max(10_000).refine(unique, { message: 'lists a table twice' }).default([]).describe('Hold every write to these tables (schema.table or schema.*)'),
  auto_approve: z
    .record(ExactTable, z.strictObject({ max_rows: z.int().min(1).max(INT4_MAX).describe('Writes estimated at most this many rows run without a decision, capped at it') }))
    .default({})
    .describe('schema.table → a ceiling under which a held single INSERT, UPDATE or DELETE of it is not held; never a schema change or a write whose rows cannot be counted'),
  row_tolerance_percent: z
    .int()
    .min(0)
    .max(100)
    .default(0)
    .describe('An approved write whose rows at execution differ from the trial count its reviewer saw by more than this percent is rolled back (request failed); 0: exactly'),
});
export const DEFAULT_APPROVAL = { held_kinds: [], row_threshold: null, expiry_seconds: 3600, tables: [], auto_approve: {}, row_tolerance_percent: 0 };


const RowFilters = z
  .record(ExactTable, z.string().min(1).max(MAX_ROW_FILTER_CHARS))
  .superRefine((filters, ctx) => {
    for (const [table, predicate] of Object.entries(filters)) {
      const problem = rowFilterProblem(table, predicate);
      if (problem) ctx.addIssue({ code: 'custom', message: problem, path: [table] });
    }
  })
  .describe("schema.table → a predicate on the table's own columns (tenant_id = 7), ANDed into every read, UPDATE and DELETE of the table; vetted when saved");

const policyShape = {
  name: text(128, 1),
  read_only: z.boolean().describe('Only statements proven read-only run'),
  allowed_tables: z.array(AllowedTable).max(10_000).describe('Empty allows no table'),
  masked_columns: z.record(QualifiedColumn, MaskMode).describe('schema.table.column → mask'),
  max_rows: z.int().min(1).max(INT4_MAX).nullable().describe('Results are capped at this many rows; null for no cap'),
  queries_per_day: z.int().min(0).max(INT4_MAX).describe('Per credential; 0 means no limit'),
  bytes_per_month: z.int().min(0).describe('Bytes returned per credential per month; 0 means no limit'),
  approval: Approval,
  honeytokens: z.array(HoneytokenId).max(1_000).describe('Honeytokens this profile plants; changing the list needs the admin role'),
  audit_mode: AuditMode.describe('strict refuses a statement whose audit record cannot be handed over'),
  allow_catalog: z.boolean().describe('Whether pg_catalog and information_schema may be read'),
  statement_timeout_ms: z
    .int()
    .min(STATEMENT_TIMEOUT_MIN_MS)
    .max(STATEMENT_TIMEOUT_MAX_MS)
    .describe(`Each statement of an agent session is cancelled past this (57014), or past the database’s query_timeout_ms when that is smaller; the agent cannot lift it. Default ${DEFAULT_STATEMENT_TIMEOUT_MS} ms`),
  statement_allow: StatementKinds.nullable().describe('Only statements whose every kind is listed run (it never lifts read_only; statement_deny wins); null for every kind'),
  statement_deny: StatementKinds.describe('Statements of these kinds are refused, also when one runs inside another (WITH x AS (DELETE ...) SELECT is a delete)'),
  denied_tables: z.array(AllowedTable).max(10_000).describe('Refused wherever a statement names them, whatever allowed_tables says (schema.table or schema.*)'),
  migration_safety: MigrationSafety.describe(`Lock-heavy schema changes (CREATE INDEX without CONCURRENTLY, table rewrites, ...): off, warn (run, with a migration_flagged audit row saying why) or block (refused with the safe alternative). Default ${DEFAULT_MIGRATION_SAFETY}`),
  row_filters: RowFilters,
  max_affected_rows: z.int().min(1).max(INT4_MAX).nullable().describe('A write (INSERT, UPDATE, DELETE) that affects more rows is rolled back and refused (54000, rule write_cap.exceeded); writes it cannot count (TRUNCATE, COPY FROM, writable CTEs) are refused; null for no cap'),
  write_mode: WriteMode.describe(`commit runs writes; rollback runs each write and rolls it back, answering what it would have done; sandbox is refused until sandbox branches exist. Default ${DEFAULT_WRITE_MODE}`),
};

export const CreatePolicyRequest = z
  .strictObject({
    name: policyShape.name,
    read_only: policyShape.read_only.default(true),
    allowed_tables: policyShape.allowed_tables.default([]),
    masked_columns: policyShape.masked_columns.default({}),
    max_rows: policyShape.max_rows.default(null),
    queries_per_day: policyShape.queries_per_day.default(0),
    bytes_per_month: policyShape.bytes_per_month.default(0),
    approval: Approval.default(DEFAULT_APPROVAL),
    honeytokens: policyShape.honeytokens.default([]),
    audit_mode: policyShape.audit_mode.default('best_effort'),
    allow_catalog: policyShape.allow_catalog.default(false),
    statement_timeout_ms: policyShape.statement_timeout_ms.default(DEFAULT_STATEMENT_TIMEOUT_MS),
    statement_allow: policyShape.statement_allow.default(null),
    statement_deny: policyShape.statement_deny.default([]),
    denied_tables: policyShape.denied_tables.default([]),
    migration_safety: policyShape.migration_safety.default(DEFAULT_MIGRATION_SAFETY),
    row_filters: policyShape.row_filters.default({}),
    max_affected_rows: policyShape.max_affected_rows.default(null),
    write_mode: policyShape.write_mode.default(DEFAULT_WRITE_MODE),
  })
  .meta({ title: 'CreatePolicyProfileRequest' });

const UpdatePolicyRequest = z
  .strictObject(policyShape)
  .partial()
  .refine((body) => Object.keys(body).length > 0, { message: 'name at least one field to change' })
  .meta({ title: 'UpdatePolicyProfileRequest' });

const PolicyApproval = z.object({
  held_kinds: z.array(z.string()),
  row_threshold: z.int().nullable(),
  expiry_seconds: z.int(),
  tables: z.array(z.string()),
  auto_approve: z.record(z.string(), z.object({ max_rows: z.int() })),
  row_tolerance_percent: z.int(),
});

export const PolicyProfile = z
  .object({
    id: z.string(),
    project_id: z.string(),
    ...policyShape,
    approval: PolicyApproval,
    version: z.int().describe('Increments with every change'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'PolicyProfile' });

export function toPolicy(row: PolicyRow): z.infer<typeof PolicyProfile> {
  return {
    id: row.policy_id,
    project_id: row.project_id,
    name: row.name,
    read_only: row.read_only,
    allowed_tables: row.allowed_tables,
    masked_columns: row.masked_columns,
    max_rows: row.max_rows,
    queries_per_day: row.queries_per_day,
    bytes_per_month: Number(row.bytes_per_month),
    approval: { tables: [], auto_approve: {}, row_tolerance_percent: 0, ...row.approval },
    honeytokens: row.honeytokens,
    audit_mode: row.audit_mode as z.infer<typeof AuditMode>,
    allow_catalog: row.allow_catalog,
    statement_timeout_ms: row.statement_timeout_ms,
    statement_allow: row.statement_allow,
    statement_deny: row.statement_deny,
    denied_tables: row.denied_tables,
    migration_safety: row.migration_safety,
    row_filters: row.row_filters,
    max_affected_rows: row.max_affected_rows,
    write_mode: row.write_mode,
    version: row.version,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** Events carry 64-bit counts as decimal strings. */
export function toEventFields<T extends { bytes_per_month?: number }>(body: T): Omit<T, 'bytes_per_month'> & { bytes_per_month?: string } {
  const { bytes_per_month: bytes, ...rest } = body;
  return { ...rest, ...(bytes === undefined ? {} : { bytes_per_month: String(bytes) }) };
}

async function assertNameFree(deps: ApiDeps, projectId: string, name: string | undefined, except?: string): Promise<void> {
  if (name !== undefined && (await policyNameTaken(deps.pool, projectId, name, except))) {
    throw new Problem('RESOURCE_EXISTS', `the project already has a policy profile named ${JSON.stringify(name)}; pick another name`);
  }
}

/** Every honeytoken a profile plants must be a live honeytoken of its project. */
export async function assertHoneytokensExist(deps: ApiDeps, projectId: string, ids: readonly string[] | undefined, field = 'honeytokens'): Promise<void> {
  const unknown = ids && ids.length > 0 ? await unknownHoneytokens(deps.pool, projectId, ids) : [];
  if (unknown.length > 0) {
    throw new Problem('INVALID_INPUT', `honeytoken(s) ${unknown.join(', ')} not found in project ${projectId}; plant them first (POST .../honeytokens)`, {
      errors: unknown.map((id) => ({ field: `${field}.${ids!.indexOf(id)}`, message: 'names no honeytoken of this project' })),
    });
  }
}

/**
 * A profile plants a honeytoken by listing it, so changing the list plants or removes honeytokens,
 * which needs admin (docs/permissions.md): a member edits the rest of a profile but cannot disarm a canary.
 */
function requireAdminToChangeHoneytokens(request: FastifyRequest, before: readonly string[], after: readonly string[] | undefined): void {
  if (after === undefined) return;
  const same = new Set(before).size === new Set(after).size && after.every((id) => before.includes(id));
  if (!same) requireRole(request, 'admin');
}

/** The caller's live policy in the project (from the stream when the read model has not caught up), else 404. */
export async function visiblePolicy(deps: ApiDeps, orgId: string, projectId: string, policyId: string): Promise<PolicyRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findPolicy(deps.pool, projectId, policyId), `policy-${policyId}`, evolvePolicy);
  if (!row || row.project_id !== projectId || row.status !== 'active') throw new Problem('NOT_FOUND', `policy ${policyId} not found in project ${projectId}`);
  return row;
}

export const ProjectParams = z.object({ project_id: IdParam('project id') });
const PolicyParams = ProjectParams.extend({ policy_id: IdParam('policy id') });

/** The security log line of a policy change (none when the command recorded nothing). */
function policyChanged(request: FastifyRequest, caller: Caller, row: Pick<PolicyRow, 'project_id' | 'policy_id' | 'revision'>, change: 'created' | 'updated' | 'deleted', recorded: number): void {
  if (recorded === 0) return;
  logEvent(request.log, 'policy_changed', { project_id: row.project_id, policy_id: row.policy_id, change, revision: row.revision, actor: actorOf(caller) }, `policy ${change}`);
}

export function policyRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/policies',
    {
      schema: {
        operationId: 'listPolicyProfiles',
        summary: 'List a project’s policy profiles',
        tags: ['policies'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ policies: z.array(PolicyProfile), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listPolicies(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.policy_id);
      return { policies: page.items.map(toPolicy), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/policies',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createPolicyProfile',
        summary: 'Create a policy profile',
        description: 'One profile governs an agent on the wire and on MCP alike: read-only, table allowlist, column masks, row cap, budgets, approvals, honeytokens.',
        tags: ['policies'],
        params: ProjectParams,
        body: CreatePolicyRequest,
        response: { 201: PolicyProfile, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'RESOURCE_EXISTS', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      requireAdminToChangeHoneytokens(request, [], request.body.honeytokens);
      await assertNameFree(deps, projectId, request.body.name);
      await assertHoneytokensExist(deps, projectId, request.body.honeytokens);
      // The project's hash key exists before any session decides under a policy that needs it.
      if (request.body.masked_columns && masksWithHash({ masked_columns: request.body.masked_columns })) await deps.hashKeys.load(projectId);
      const policyId = newId('pol_');
      const fields = toEventFields(request.body) as Required<ReturnType<typeof toEventFields<typeof request.body>>>;
      const result = await execute(deps, request, `policy-${policyId}`, policy, { kind: 'create', policy: { policy_id: policyId, project_id: projectId, ...fields } });
      const row = fold(evolvePolicy, result.recorded);
      policyChanged(request, caller, row, 'created', result.recorded.length);
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/policies/${policyId}`);
      return reply.code(201).send(toPolicy(row));
    },
  );

  app.get(
    '/v1/projects/:project_id/policies/:policy_id',
    {
      schema: {
        operationId: 'getPolicyProfile',
        summary: 'Get a policy profile',
        tags: ['policies'],
        params: PolicyParams,
        response: { 200: PolicyProfile, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const row = await visiblePolicy(deps, caller.orgId, request.params.project_id, request.params.policy_id);
      etag(reply, row.revision);
      return toPolicy(row);
    },
  );

  app.patch(
    '/v1/projects/:project_id/policies/:policy_id',
    {
      schema: {
        operationId: 'updatePolicyProfile',
        summary: 'Change a policy profile; live sessions pick up the new version',
        tags: ['policies'],
        params: PolicyParams,
        body: UpdatePolicyRequest,
        response: { 200: PolicyProfile, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'RESOURCE_EXISTS', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const current = await visiblePolicy(deps, caller.orgId, request.params.project_id, request.params.policy_id);
      requireAdminToChangeHoneytokens(request, current.honeytokens, request.body.honeytokens);
      await assertNameFree(deps, current.project_id, request.body.name, current.policy_id);
      await assertHoneytokensExist(deps, current.project_id, request.body.honeytokens);
      if (request.body.masked_columns && masksWithHash({ masked_columns: request.body.masked_columns })) await deps.hashKeys.load(current.project_id);
      const result = await execute(deps, request, `policy-${current.policy_id}`, policy, { kind: 'update', changes: toEventFields(request.body), ifRevision: ifMatch(request) });
      const row = fold(evolvePolicy, result.recorded, current);
      policyChanged(request, caller, row, 'updated', result.recorded.length);
      etag(reply, row.revision);
      return toPolicy(row);
    },
  );

  app.delete(
    '/v1/projects/:project_id/policies/:policy_id',
    {
      schema: {
        operationId: 'deletePolicyProfile',
        summary: 'Delete a policy profile that no live credential uses',
        tags: ['policies'],
        params: PolicyParams,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'CONFLICT') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const current = await visiblePolicy(deps, caller.orgId, request.params.project_id, request.params.policy_id);
      const inUse = await countLiveCredentialsUsingPolicy(deps.pool, current.policy_id);
      const result = await execute(deps, request, `policy-${current.policy_id}`, policy, { kind: 'delete', inUse, ifRevision: ifMatch(request) });
      policyChanged(request, caller, current, 'deleted', result.recorded.length);
      return reply.code(204).send(null);
    },
  );
}
