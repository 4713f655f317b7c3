import pg from 'pg';
import { z } from 'zod';
import { project } from '../../../commands/projects/project.js';
import { databaseIdOf, evolveDatabase, evolveReplica, replicaIdOf, type DatabaseRow, type ReplicaRow } from '../../../projections/databases.js';
import type { RecordedEvent } from '../../store/port.js';
import { findDatabase, listDatabases, listReplicas, type DatabaseView } from '../../../queries/databases.js';
import { openSecret, sealSecret } from '../../crypto/seal.js';
import { SslMode } from '../../events/databases.js';
import { newId } from '../../ids.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { CreateDatabaseRequest, Database, databaseRegistration, fold, toDatabase, UpdateDatabaseRequest, visibleProject } from './projects.js';
import { execute, errorResponses, etag, IdParam, ifMatch, iso, requireRole, Timestamp, type Api, type ApiDeps, foldStream } from './support.js';

const ProjectParams = z.object({ project_id: IdParam('project id') });
const DatabaseParams = ProjectParams.extend({ database_id: IdParam('database id') });
const ReplicaParams = DatabaseParams.extend({ replica_id: IdParam('replica id') });

const replicaAddress = {
  host: z.string().regex(/^[^\s\0]{1,255}$/, { message: 'must be 1-255 characters without whitespace or NUL' }),
  port: z.int().min(1).max(65_535),
};

const CreateReplicaRequest = z.strictObject({ ...replicaAddress, ssl_mode: SslMode.default('prefer') }).meta({ title: 'CreateReplicaRequest' });

const Replica = z
  .object({ id: z.string(), database_id: z.string(), host: z.string(), port: z.int(), ssl_mode: SslMode, created_at: Timestamp })
  .meta({ id: 'Replica' });

const UpdateReplicaRequest = z
  .strictObject({ ...replicaAddress, ssl_mode: SslMode })
  .partial()
  .refine((body) => Object.keys(body).length > 0, { message: 'name at least one field to change' })
  .meta({ title: 'UpdateReplicaRequest' });

type ReplicaAt = ReplicaRow & { revision: number };

/** The replica as stored, with its revision (its ETag), from the project's stream: authoritative, and right after a write too. */
async function replicaFromStream(deps: ApiDeps, projectId: string, databaseId: string, replicaId: string): Promise<ReplicaAt> {
  const evolve = (row: ReplicaAt | undefined, event: RecordedEvent): ReplicaAt | null => {
    const next = evolveReplica(row, event);
    return next && { ...next, revision: event.revision };
  };
  const row = await foldStream(deps, `project-${projectId}`, evolve, (event) => replicaIdOf(event) === replicaId);
  if (!row || row.database_id !== databaseId) throw new Problem('NOT_FOUND', `replica ${replicaId} not found on database ${databaseId}`);
  return row;
}

function toReplica(row: ReplicaRow): z.infer<typeof Replica> {
  return { id: row.replica_id, database_id: row.database_id, host: row.host, port: row.port, ssl_mode: row.ssl_mode as z.infer<typeof SslMode>, created_at: iso(row.created_at) };
}

/** The database as stored, from the project's stream: authoritative, and right after a write too. */
export async function databaseFromStream(deps: ApiDeps, projectId: string, databaseId: string): Promise<DatabaseRow | undefined> {
  const row = await foldStream(deps, `project-${projectId}`, evolveDatabase, (event) => databaseIdOf(event) === databaseId);
  return row?.status === 'active' ? row : undefined;
}

export async function visibleDatabase(deps: ApiDeps, orgId: string, projectId: string, databaseId: string): Promise<DatabaseView> {
  await visibleProject(deps, orgId, projectId);
  const row = (await findDatabase(deps.pool, projectId, databaseId)) ?? (await databaseFromStream(deps, projectId, databaseId));
  if (!row) throw new Problem('NOT_FOUND', `database ${databaseId} not found in project ${projectId}`);
  return row;
}

const CONNECT_TIMEOUT_MS = 5_000;

/** How the control plane connects to a registered database as its registered user. */
export function upstreamClientConfig(stored: DatabaseRow, deps: Pick<ApiDeps, 'keyring'>, applicationName: string): pg.ClientConfig {
  return {
    host: stored.host,
    port: stored.port,
    database: stored.name,
    user: stored.username,
    password: openSecret(stored.password_sealed, deps.keyring, stored.database_id),
    ssl: stored.ssl_mode === 'disable' || stored.ssl_mode === 'allow' || stored.ssl_mode === 'prefer' ? false : { rejectUnauthorized: stored.ssl_mode === 'verify-full' || stored.ssl_mode === 'verify-ca' },
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: applicationName,
  };
}

export function databaseRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/databases',
    {
      schema: {
        operationId: 'listDatabases',
        summary: 'List a project’s databases',
        tags: ['databases'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ databases: z.array(Database), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listDatabases(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.database_id);
      return { databases: page.items.map(toDatabase), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/databases',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createDatabase',
        summary: 'Register another upstream database in a project',
        description: 'The password is write-only: it is sealed with AES-256-GCM and never returned.',
        tags: ['databases'],
        params: ProjectParams,
        body: CreateDatabaseRequest,
        response: { 201: Database, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const result = await execute(deps, request, `project-${projectId}`, project, { kind: 'add-database', database: databaseRegistration(request.body, projectId, deps) });
      const row = fold(evolveDatabase, result.recorded);
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/databases/${row.database_id}`);
      return reply.code(201).send(toDatabase(row));
    },
  );

  app.get(
    '/v1/projects/:project_id/databases/:database_id',
    {
      schema: {
        operationId: 'getDatabase',
        summary: 'Get a database',
        tags: ['databases'],
        params: DatabaseParams,
        response: { 200: Database, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const row = await visibleDatabase(deps, caller.orgId, request.params.project_id, request.params.database_id);
      etag(reply, row.revision);
      return toDatabase(row);
    },
  );

  app.patch(
    '/v1/projects/:project_id/databases/:database_id',
    {
      schema: {
        operationId: 'updateDatabase',
        summary: 'Change a database’s settings or password',
        description: 'The password is write-only. Changing host or port needs the password in the same request (400 otherwise): the stored one is never sent to a new address.',
        tags: ['databases'],
        params: DatabaseParams,
        body: UpdateDatabaseRequest,
        response: { 200: Database, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const { project_id: projectId, database_id: databaseId } = request.params;
      const current = await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const { password, ...settings } = request.body;
      // The stored password goes wherever the database points: a new address needs the password meant for it.
      const moved = (settings.host !== undefined && settings.host !== current.host) || (settings.port !== undefined && settings.port !== current.port);
      if (moved && password === undefined) {
        throw new Problem('INVALID_INPUT', 'changing host or port needs the password for the new address in the same request: the stored one is never sent elsewhere', {
          errors: [{ field: 'password', message: 'is required when host or port changes' }],
        });
      }
      const changes = { ...settings, ...(password === undefined ? {} : { password: sealSecret(password, deps.keyring, databaseId) }) };
      await execute(deps, request, `project-${projectId}`, project, { kind: 'update-database', databaseId, changes, ifRevision: ifMatch(request) });
      const row = await databaseFromStream(deps, projectId, databaseId);
      if (!row) throw new Problem('NOT_FOUND', `database ${databaseId} not found in project ${projectId}`);
      etag(reply, row.revision);
      return toDatabase(row);
    },
  );

  app.delete(
    '/v1/projects/:project_id/databases/:database_id',
    {
      schema: {
        operationId: 'deleteDatabase',
        summary: 'Remove a database from a project',
        tags: ['databases'],
        params: DatabaseParams,
        response: { 204: z.null().describe('Removed'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'CONFLICT') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const { project_id: projectId, database_id: databaseId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      await execute(deps, request, `project-${projectId}`, project, { kind: 'remove-database', databaseId, ifRevision: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v1/projects/:project_id/databases/:database_id/test',
    {
      schema: {
        operationId: 'testDatabase',
        summary: 'Connect to the upstream database and report its server version',
        tags: ['databases'],
        params: DatabaseParams,
        response: { 200: z.object({ ok: z.boolean(), server_version: z.string().nullable(), error: z.string().nullable(), latency_ms: z.int() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const { project_id: projectId, database_id: databaseId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const stored = await databaseFromStream(deps, projectId, databaseId);
      if (!stored) throw new Problem('NOT_FOUND', `database ${databaseId} not found in project ${projectId}`);
      const started = Date.now();
      const client = new pg.Client(upstreamClientConfig(stored, deps, 'pgward-test'));
      client.on('error', () => undefined);
      try {
        await client.connect();
        const { rows } = await client.query<{ server_version: string }>('show server_version');
        return { ok: true, server_version: rows[0]?.server_version ?? null, error: null, latency_ms: Date.now() - started };
      } catch (error) {
        return { ok: false, server_version: null, error: (error as Error).message, latency_ms: Date.now() - started };
      } finally {
        await client.end().catch(() => undefined);
      }
    },
  );

  app.get(
    '/v1/projects/:project_id/databases/:database_id/replicas',
    {
      schema: {
        operationId: 'listReplicas',
        summary: 'List a database’s read replicas',
        tags: ['replicas'],
        params: DatabaseParams,
        querystring: PageQuery,
        response: { 200: z.object({ replicas: z.array(Replica), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const { project_id: projectId, database_id: databaseId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listReplicas(deps.pool, databaseId, decodePageToken(token), size + 1), size, (row) => row.replica_id);
      return { replicas: page.items.map(toReplica), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/databases/:database_id/replicas',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createReplica',
        summary: 'Add a read replica to a database',
        tags: ['replicas'],
        params: DatabaseParams,
        body: CreateReplicaRequest,
        response: { 201: Replica, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const { project_id: projectId, database_id: databaseId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const replica = { replica_id: newId('rep_'), database_id: databaseId, ...request.body };
      const result = await execute(deps, request, `project-${projectId}`, project, { kind: 'add-replica', replica });
      const row = fold(evolveReplica, result.recorded);
      void reply.header('location', `/v1/projects/${projectId}/databases/${databaseId}/replicas/${row.replica_id}`);
      return reply.code(201).send(toReplica(row));
    },
  );

  app.get(
    '/v1/projects/:project_id/databases/:database_id/replicas/:replica_id',
    {
      schema: {
        operationId: 'getReplica',
        summary: 'Get a read replica',
        tags: ['replicas'],
        params: ReplicaParams,
        response: { 200: Replica, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const { project_id: projectId, database_id: databaseId, replica_id: replicaId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const row = await replicaFromStream(deps, projectId, databaseId, replicaId);
      etag(reply, row.revision);
      return toReplica(row);
    },
  );

  app.patch(
    '/v1/projects/:project_id/databases/:database_id/replicas/:replica_id',
    {
      schema: {
        operationId: 'updateReplica',
        summary: 'Change a read replica’s address or TLS mode',
        description: 'If-Match with the replica’s ETag makes the change conditional (412 when it changed since). The replica keeps authenticating with its database’s credentials.',
        tags: ['replicas'],
        params: ReplicaParams,
        body: UpdateReplicaRequest,
        response: { 200: Replica, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const { project_id: projectId, database_id: databaseId, replica_id: replicaId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      await execute(deps, request, `project-${projectId}`, project, { kind: 'update-replica', databaseId, replicaId, changes: request.body, ifRevision: ifMatch(request) });
      const row = await replicaFromStream(deps, projectId, databaseId, replicaId);
      etag(reply, row.revision);
      return toReplica(row);
    },
  );

  app.delete(
    '/v1/projects/:project_id/databases/:database_id/replicas/:replica_id',
    {
      schema: {
        operationId: 'deleteReplica',
        summary: 'Remove a read replica',
        tags: ['replicas'],
        params: ReplicaParams,
        response: { 204: z.null().describe('Removed'), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const { project_id: projectId, database_id: databaseId, replica_id: replicaId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      await execute(deps, request, `project-${projectId}`, project, { kind: 'remove-replica', databaseId, replicaId });
      return reply.code(204).send(null);
    },
  );
}
