import { z } from 'zod';
import { project } from '../../../commands/projects/project.js';
import { evolveDatabase, type DatabaseRow } from '../../../projections/databases.js';
import { evolveProject, type ProjectRow } from '../../../projections/projects.js';
import { countLiveCredentialsInProject } from '../../../queries/credentials.js';
import { findProject, listProjects } from '../../../queries/projects.js';
import { findOrganization } from '../../../queries/organizations.js';
import { evolveOrganization, type OrganizationRow } from '../../../projections/organizations.js';
import { sealSecret } from '../../crypto/seal.js';
import { CacheConfig, DatabaseRole, defaultCacheConfig, PoolConfig, SslMode } from '../../events/databases.js';
import { text } from '../../events/fields.js';
import { Cloud } from '../../events/projects.js';
import { newId } from '../../ids.js';
import { plans } from '../../plans.js';
import type { RecordedEvent } from '../../store/port.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { addressedOrg, execute, errorResponses, etag, IdParam, ifMatch, iso, requireRole, Timestamp, type Api, type ApiDeps, readModelOrStream } from './support.js';

const noNul = (max: number, min = 0) => text(max, min);

export const defaultPoolConfig: PoolConfig = { mode: 'transaction', max_connections: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 };

const databaseSettings = {
  ssl_mode: SslMode.describe('libpq sslmode towards the upstream'),
  role: DatabaseRole,
  pool_config: PoolConfig,
  cache_config: CacheConfig,
  pool_region: z.string().regex(/^([a-z0-9][a-z0-9-]{0,62})?$/).describe('Empty means direct'),
  auto_read_routing: z.boolean().describe('Route SELECTs to read replicas'),
  query_timeout_ms: z.int().min(0).max(300_000).describe('Upstream statement_timeout, and a cap on every policy’s statement_timeout_ms on this database; 0: no database limit (policies still apply theirs)'),
};

const databaseConnection = {
  host: z.string().regex(/^[^\s\0]{1,255}$/, { message: 'must be 1-255 characters without whitespace or NUL' }),
  port: z.int().min(1).max(65_535),
  name: noNul(255, 1),
  username: noNul(255, 1),
  password: noNul(1024, 1).describe('Write-only; stored sealed with AES-256-GCM, never returned'),
};

export const CreateDatabaseRequest = z
  .strictObject({
    ...databaseConnection,
    ssl_mode: databaseSettings.ssl_mode.default('prefer'),
    role: databaseSettings.role.default('primary'),
    pool_config: databaseSettings.pool_config.default(defaultPoolConfig),
    cache_config: databaseSettings.cache_config.default(defaultCacheConfig),
    pool_region: databaseSettings.pool_region.default(''),
    auto_read_routing: databaseSettings.auto_read_routing.default(false),
    query_timeout_ms: databaseSettings.query_timeout_ms.default(0),
  })
  .meta({ title: 'CreateDatabaseRequest' });

/** Any subset of the fields, without defaults: what is absent stays as it is. */
export const UpdateDatabaseRequest = z
  .strictObject({ ...databaseConnection, ...databaseSettings })
  .partial()
  .refine((body) => Object.keys(body).length > 0, { message: 'name at least one field to change' })
  .meta({ title: 'UpdateDatabaseRequest' });

export const Database = z
  .object({
    id: z.string(),
    project_id: z.string(),
    host: z.string(),
    port: z.int(),
    name: z.string(),
    username: z.string(),
    ssl_mode: SslMode,
    role: DatabaseRole,
    pool_config: PoolConfig,
    cache_config: CacheConfig,
    pool_region: z.string(),
    auto_read_routing: z.boolean(),
    query_timeout_ms: z.int(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Database' });
export type Database = z.infer<typeof Database>;

const CreateProjectRequest = z
  .strictObject({
    name: noNul(100, 1),
    org_id: noNul(64, 1).optional().describe('Defaults to the caller’s organization (GET /v1/me); another organization’s id answers 404'),
    database: CreateDatabaseRequest,
    description: noNul(500).default(''),
    cloud: Cloud.default('aws'),
    self_hosted: z.boolean().default(false).describe('Requires the scale or enterprise plan'),
    tags: z.array(noNul(50, 1)).max(10).default([]),
  })
  .meta({ title: 'CreateProjectRequest' });

const Project = z
  .object({
    id: z.string(),
    org_id: z.string(),
    name: z.string(),
    description: z.string(),
    cloud: Cloud,
    self_hosted: z.boolean(),
    tags: z.array(z.string()),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Project' });

const UpdateProjectRequest = z
  .strictObject({ name: noNul(100, 1).optional(), description: noNul(500).optional(), tags: z.array(noNul(50, 1)).max(10).optional() })
  .refine((body) => Object.keys(body).length > 0, { message: 'name at least one of: name, description, tags' })
  .meta({ title: 'UpdateProjectRequest' });

export function toProject(row: ProjectRow): z.infer<typeof Project> {
  return {
    id: row.project_id,
    org_id: row.org_id,
    name: row.name,
    description: row.description,
    cloud: row.cloud as z.infer<typeof Cloud>,
    self_hosted: row.self_hosted,
    tags: row.tags,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function toDatabase(row: Omit<DatabaseRow, 'password_sealed'>): Database {
  return {
    id: row.database_id,
    project_id: row.project_id,
    host: row.host,
    port: row.port,
    name: row.name,
    username: row.username,
    ssl_mode: row.ssl_mode as Database['ssl_mode'],
    role: row.role as Database['role'],
    pool_config: row.pool_config as Database['pool_config'],
    cache_config: row.cache_config as Database['cache_config'],
    pool_region: row.pool_region,
    auto_read_routing: row.auto_read_routing,
    query_timeout_ms: row.query_timeout_ms,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** Builds a representation from the events just decided, with the read model's own evolve (read-your-writes). */
export function fold<R>(evolve: (row: R | undefined, event: RecordedEvent) => R | null, events: readonly RecordedEvent[], start?: R): R {
  const row = events.reduce<R | undefined>((current, event) => evolve(current, event) ?? undefined, start);
  if (!row) throw new Error('the decided events produced no representation');
  return row;
}

/** Seals the password under the current key, bound to the database id, and resolves the defaults. */
export function databaseRegistration(input: z.infer<typeof CreateDatabaseRequest>, projectId: string, deps: ApiDeps) {
  const databaseId = newId('db_');
  const { password, ...settings } = input;
  return { database_id: databaseId, project_id: projectId, ...settings, password: sealSecret(password, deps.keyring, databaseId) };
}

/** The caller's organization (its plan and features), current right after it was created. */
export function visibleOrganization(deps: ApiDeps, orgId: string): Promise<OrganizationRow | undefined> {
  return readModelOrStream(deps, () => findOrganization(deps.pool, orgId), `org-${orgId}`, evolveOrganization);
}

/**
 * The caller's project. A read-model miss is checked against the project's own stream, so a
 * project created a moment ago is usable at once, before the projection has caught up.
 */
export async function visibleProject(deps: ApiDeps, orgId: string, projectId: string): Promise<ProjectRow> {
  const row = await readModelOrStream(deps, () => findProject(deps.pool, orgId, projectId), `project-${projectId}`, evolveProject);
  if (!row || row.org_id !== orgId || row.status !== 'active') throw new Problem('NOT_FOUND', `project ${projectId} not found`);
  return row;
}


const ProjectParams = z.object({ project_id: IdParam('project id') });

export function projectRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/projects',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createProject',
        summary: 'Create a project with its primary database',
        description: 'Creates the project and registers its primary database atomically. The database password is write-only.',
        tags: ['projects'],
        body: CreateProjectRequest,
        response: { 201: z.object({ project: Project, database: Database }).meta({ id: 'CreateProjectResponse' }), ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const body = request.body;
      const orgId = addressedOrg(caller, body.org_id);
      const org = await visibleOrganization(deps, orgId);
      if (!org) throw new Problem('NOT_FOUND', `organization ${orgId} not found`);
      if (body.self_hosted && !plans[org.plan as keyof typeof plans].selfHostedAllowed) {
        throw new Problem('PLAN_LIMIT_REACHED', `self-hosted projects need the scale or enterprise plan; organization ${org.org_id} is on ${org.plan}`);
      }
      const projectId = newId('prj_');
      const result = await execute(deps, request, `project-${projectId}`,
        project,
        {
          kind: 'create',
          project: { project_id: projectId, org_id: orgId, name: body.name, description: body.description, cloud: body.cloud, self_hosted: body.self_hosted, tags: body.tags },
          database: databaseRegistration(body.database, projectId, deps),
        });
      const [projectEvent, databaseEvent] = result.recorded;
      const created = fold(evolveProject, [projectEvent!]);
      etag(reply, created.revision);
      void reply.header('location', `/v1/projects/${created.project_id}`);
      return reply.code(201).send({ project: toProject(created), database: toDatabase(fold(evolveDatabase, [databaseEvent!])) });
    },
  );

  app.get(
    '/v1/projects',
    {
      schema: {
        operationId: 'listProjects',
        summary: 'List the projects of an organization',
        tags: ['projects'],
        querystring: PageQuery.extend({ org_id: IdParam('organization whose projects to list; defaults to the caller’s (GET /v1/me)').optional() }),
        response: { 200: z.object({ projects: z.array(Project), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const { org_id: named, page_size: size, page_token: token } = request.query;
      const orgId = addressedOrg(caller, named);
      const page = paginate(await listProjects(deps.pool, orgId, decodePageToken(token), size + 1), size, (row) => row.project_id);
      return { projects: page.items.map(toProject), next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/projects/:project_id',
    {
      schema: {
        operationId: 'getProject',
        summary: 'Get a project',
        tags: ['projects'],
        params: ProjectParams,
        response: { 200: Project, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const row = await visibleProject(deps, caller.orgId, request.params.project_id);
      etag(reply, row.revision);
      return toProject(row);
    },
  );

  app.patch(
    '/v1/projects/:project_id',
    {
      schema: {
        operationId: 'updateProject',
        summary: 'Update a project’s name, description or tags',
        tags: ['projects'],
        params: ProjectParams,
        body: UpdateProjectRequest,
        response: { 200: Project, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const row = await visibleProject(deps, caller.orgId, request.params.project_id);
      const result = await execute(deps, request, `project-${row.project_id}`, project, { kind: 'update', changes: request.body, ifRevision: ifMatch(request) });
      const updated = fold(evolveProject, result.recorded, row);
      etag(reply, updated.revision);
      return toProject(updated);
    },
  );

  app.delete(
    '/v1/projects/:project_id',
    {
      schema: {
        operationId: 'deleteProject',
        summary: 'Delete a project that has no live agent credentials',
        tags: ['projects'],
        params: ProjectParams,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'CONFLICT') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const row = await visibleProject(deps, caller.orgId, request.params.project_id);
      const liveCredentials = await countLiveCredentialsInProject(deps.pool, row.project_id);
      await execute(deps, request, `project-${row.project_id}`, project, { kind: 'delete', liveCredentials, ifRevision: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );
}
