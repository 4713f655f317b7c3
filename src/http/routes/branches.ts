import { z } from 'zod';
import { branch } from '../../../commands/branches/branch.js';
import { DomainError } from '../../../commands/domain-error.js';
import type { DatabaseRow } from '../../../projections/databases.js';
import { evolveBranch, type BranchRow } from '../../../projections/branches.js';
import { branchNameTaken, findBranch, listBranches } from '../../../queries/branches.js';
import { copyBranch, dropBranch, type BranchTarget } from '../../branches/copy.js';
import { takeCopyLease, type CopyLease } from '../../branches/copy-lease.js';
import { branchesStillCopying } from '../../../queries/branches.js';
import type { FastifyBaseLogger } from 'fastify';
import { releaseName, reservationKeys, reserveName, stillHolds } from '../../reservations.js';
import { BranchCopyMethod } from '../../events/branches.js';
import { text } from '../../events/fields.js';
import { newId } from '../../ids.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { databaseFromStream, upstreamClientConfig } from './databases.js';
import { fold, visibleProject } from './projects.js';
import { actorOf, errorResponses, etag, execute, executeAs, foldStream, IdParam, matchedRevision, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const CreateBranchRequest = z
  .strictObject({
    database_id: IdParam('database id').describe('The project’s database to copy'),
    name: text(100, 1).describe('A name for humans, unique among the database’s branches (1-100 characters)'),
  })
  .meta({ title: 'CreateBranchRequest' });

const Branch = z
  .object({
    id: z.string(),
    project_id: z.string(),
    database_id: z.string(),
    name: z.string(),
    database_name: z.string().describe('The branch’s database on the upstream server'),
    status: z.enum(['copying', 'ready', 'failed']).describe('copying until the copy is made; ready serves sandboxed sessions; failed says why in failure_reason'),
    method: BranchCopyMethod.nullable().describe('How the copy was made: template (CREATE DATABASE … TEMPLATE) or logical (pg_dump | psql); null while copying or failed'),
    failure_reason: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Branch' });

function toBranch(row: BranchRow): z.infer<typeof Branch> {
  return {
    id: row.branch_id,
    project_id: row.project_id,
    database_id: row.database_id,
    name: row.name,
    database_name: row.database_name,
    status: row.status === 'deleted' ? 'failed' : row.status,
    method: row.method,
    failure_reason: row.failure_reason,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

async function visibleBranch(deps: ApiDeps, orgId: string, projectId: string, branchId: string): Promise<BranchRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findBranch(deps.pool, projectId, branchId), `branch-${branchId}`, evolveBranch);
  if (!row || row.project_id !== projectId || row.status === 'deleted') throw new Problem('NOT_FOUND', `branch ${branchId} not found in project ${projectId}`);
  return row;
}

function targetOf(deps: ApiDeps, database: DatabaseRow, branchDatabase: string): BranchTarget {
  const config = upstreamClientConfig(database, deps, 'pgward-branch');
  return { source: { ...config, host: database.host, port: database.port, user: database.username, database: database.name }, sslMode: database.ssl_mode, branch: branchDatabase };
}

const COPIER = { correlationId: 'branch-copy', actor: 'pgward:branch-copy' };

const copierOf = (deps: ApiDeps, branchId: string) => ({ ...COPIER, correlationId: `branch-copy:${branchId}`, now: deps.now });

/**
 * Copies the branch's database and records the outcome, holding its copy lease throughout. A branch
 * deleted while it was copying gets its database dropped again, as nothing will drop it later.
 */
async function runCopy(deps: ApiDeps, row: BranchRow, database: DatabaseRow, lease: CopyLease): Promise<void> {
  const target = targetOf(deps, database, row.database_name);
  const stream = `branch-${row.branch_id}`;
  const context = copierOf(deps, row.branch_id);
  try {
    let method: z.infer<typeof BranchCopyMethod>;
    try {
      method = await copyBranch(target);
    } catch (error) {
      await executeAs(deps, context, stream, branch, { kind: 'fail', reason: `the copy failed: ${(error as Error).message}`.slice(0, 1000) }).catch(() => undefined);
      return;
    }
    try {
      await executeAs(deps, context, stream, branch, { kind: 'ready', method });
    } catch (error) {
      if (error instanceof DomainError) await dropBranch(target).catch(() => undefined);
      else throw error;
    }
  } finally {
    await lease.release();
  }
}

/** Why a branch whose copier is gone failed: recorded on it. */
export const INTERRUPTED = 'the copy was interrupted: the process making it stopped; its partial database was dropped. Create the branch again';

/**
 * Branches still `copying` whose copy lease is free had their copier die mid-copy (a crash, a
 * kill): each gets its partial database dropped and is recorded failed. A drop that fails leaves
 * the branch copying, for the next run. Returns how many were recovered.
 */
export async function recoverInterruptedCopies(deps: ApiDeps): Promise<number> {
  let recovered = 0;
  for (const { branch_id: branchId, project_id: projectId } of await branchesStillCopying(deps.pool)) {
    const lease = await takeCopyLease(deps.pool, branchId, false);
    if (!lease) continue;
    try {
      // Under the lease, from the stream: a copy that ended just before is not undone.
      const row = await foldStream(deps, `branch-${branchId}`, evolveBranch);
      if (row?.status !== 'copying') continue;
      const database = await databaseFromStream(deps, projectId, row.database_id);
      if (database) await dropBranch(targetOf(deps, database, row.database_name));
      await executeAs(deps, copierOf(deps, branchId), `branch-${branchId}`, branch, { kind: 'fail', reason: INTERRUPTED });
      recovered += 1;
    } finally {
      await lease.release();
    }
  }
  return recovered;
}

/** How often each API process looks for interrupted copies (and once at its start). */
const RECOVERY_INTERVAL_MS = 5_000;

function startRecovery(deps: ApiDeps, log: FastifyBaseLogger): () => Promise<void> {
  let running: Promise<void> | undefined;
  const run = (): void => {
    running ??= recoverInterruptedCopies(deps)
      .then((recovered) => void (recovered > 0 && log.warn({ recovered }, 'recorded branch copies whose copier stopped as failed, their partial databases dropped')))
      .catch((error: unknown) => log.warn({ err: error }, 'could not recover interrupted branch copies; retrying'))
      .finally(() => (running = undefined));
  };
  run();
  const timer = setInterval(run, RECOVERY_INTERVAL_MS);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const BranchParams = ProjectParams.extend({ branch_id: IdParam('branch id') });

export function branchRoutes(app: Api, deps: ApiDeps): void {
  const copying = new Set<Promise<void>>();
  let stopRecovery: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    stopRecovery = startRecovery(deps, app.log);
  });
  app.addHook('onClose', async () => {
    await stopRecovery?.();
    await Promise.allSettled(copying);
  });

  app.get(
    '/v1/projects/:project_id/branches',
    {
      schema: {
        operationId: 'listBranches',
        summary: 'List a project’s sandbox branches',
        tags: ['branches'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ branches: z.array(Branch), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listBranches(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.branch_id);
      return { branches: page.items.map(toBranch), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/branches',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createBranch',
        summary: 'Create a sandbox branch of a database',
        description:
          'Copies the database on its upstream server into a new database (status copying, then ready or failed): CREATE DATABASE … TEMPLATE when the source has no other sessions, ' +
          'else pg_dump | psql. Credentials whose policy has write_mode sandbox then run on the newest ready branch of their database (docs/branches.md). ' +
          'The registered database user needs CREATEDB.',
        tags: ['branches'],
        params: ProjectParams,
        body: CreateBranchRequest,
        response: { 202: Branch, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'RESOURCE_EXISTS', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { database_id: databaseId, name } = request.body;
      const database = await databaseFromStream(deps, projectId, databaseId);
      if (!database) throw new Problem('NOT_FOUND', `database ${databaseId} not found in project ${projectId}`);
      const taken = () => new Problem('RESOURCE_EXISTS', `database ${databaseId} already has a branch named ${JSON.stringify(name)}; pick another name`);
      if (await branchNameTaken(deps.pool, databaseId, name)) throw taken();
      const branchId = newId('brn_');
      const key = reservationKeys.branch(databaseId, name);
      // The read model may not show a branch created a moment ago: the name's own stream decides a race.
      const holds = async (holder: string, since: string) => {
        const row = await foldStream(deps, `branch-${holder}`, evolveBranch);
        return stillHolds(row, row?.status !== 'deleted', since);
      };
      if (!(await reserveName(deps.store, key, branchId, actorOf(caller), holds))) throw taken();
      // Taken before the branch is recorded: a recovery run never finds it copying with its lease free.
      const lease = (await takeCopyLease(deps.pool, branchId, true))!;
      let result;
      try {
        result = await execute(deps, request, `branch-${branchId}`, branch, {
          kind: 'create',
          branch: { branch_id: branchId, project_id: projectId, database_id: databaseId, name, database_name: `pgward_branch_${branchId.slice('brn_'.length)}` },
        });
      } catch (error) {
        await lease.release();
        await releaseName(deps.store, key, branchId, actorOf(caller));
        throw error;
      }
      const row = fold(evolveBranch, result.recorded);
      const copy = runCopy(deps, row, database, lease).catch((error: unknown) => request.log.error({ err: error, branch_id: branchId }, 'a branch copy could not record its outcome'));
      copying.add(copy);
      void copy.finally(() => copying.delete(copy));
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/branches/${branchId}`);
      return reply.code(202).send(toBranch(row));
    },
  );

  app.get(
    '/v1/projects/:project_id/branches/:branch_id',
    {
      schema: {
        operationId: 'getBranch',
        summary: 'Get a sandbox branch (its status while copying)',
        tags: ['branches'],
        params: BranchParams,
        response: { 200: Branch, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const row = await visibleBranch(deps, caller.orgId, request.params.project_id, request.params.branch_id);
      etag(reply, row.revision);
      return toBranch(row);
    },
  );

  app.delete(
    '/v1/projects/:project_id/branches/:branch_id',
    {
      schema: {
        operationId: 'deleteBranch',
        summary: 'Delete a sandbox branch and drop its database',
        description: 'Drops the branch’s database on the upstream server (ending its sessions), then removes the branch. A branch still copying is dropped once its copy ends.',
        tags: ['branches'],
        params: BranchParams,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'BAD_GATEWAY') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const current = await visibleBranch(deps, caller.orgId, request.params.project_id, request.params.branch_id);
      const expected = matchedRevision(request, current.revision, 'branch');
      // Dropped first: a failed drop leaves the branch as it was, and a retry drops nothing twice.
      const database = await databaseFromStream(deps, current.project_id, current.database_id);
      if (database && current.status !== 'copying') {
        await dropBranch(targetOf(deps, database, current.database_name)).catch((error: unknown) => {
          throw new Problem('BAD_GATEWAY', `the branch database ${current.database_name} could not be dropped: ${(error as Error).message}`);
        });
      }
      await execute(deps, request, `branch-${current.branch_id}`, branch, { kind: 'delete', ...(expected === undefined ? {} : { ifRevision: expected }) });
      await releaseName(deps.store, reservationKeys.branch(current.database_id, current.name), current.branch_id, actorOf(caller));
      return reply.code(204).send(null);
    },
  );
}
