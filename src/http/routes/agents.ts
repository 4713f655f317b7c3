import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { credential, isExpired, type Secrets } from '../../../commands/credentials/credential.js';
import { evolveCredential, type CredentialRow } from '../../../projections/credentials.js';
import { evolveDatabase, type DatabaseRow } from '../../../projections/databases.js';
import { findCredential, listCredentials, type CredentialView } from '../../../queries/credentials.js';
import { createScramVerifier } from '../../crypto/scram.js';
import { displayPrefix, newSecret, sha256Hex } from '../../crypto/tokens.js';
import { PrincipalType } from '../../events/credentials.js';
import { text } from '../../events/fields.js';
import { newId } from '../../ids.js';
import type { Caller } from '../plugins/auth.js';
import type { HumanRole } from '../../events/organizations.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { agentCredentialDiscovery } from './discovery.js';
import { IpRuleListsBody, IpRuleListsView, storedLists } from './ip-rules.js';
import { visiblePolicy } from './policies.js';
import { fold, visibleProject, visibleOrganization } from './projects.js';
import { execute, errorResponses, etag, IdParam, ifMatch, iso, requireRole, Timestamp, type Api, type ApiDeps, foldStream } from './support.js';

const AGENT_TOKEN_PREFIX = 'pgw_agt_';

const ProjectParams = z.object({ project_id: IdParam('project id') });
const AgentParams = ProjectParams.extend({ agent_id: IdParam('agent credential id') });

const CreateAgentCredentialRequest = z
  .strictObject({
    name: text(128, 1),
    policy_profile_id: IdParam('policy profile enforced for both secrets'),
    principal_type: PrincipalType.default('agent'),
    expires_at: z.iso.datetime({ offset: true }).nullable().default(null).describe('Must be in the future; null or absent means it never expires'),
  })
  .meta({ title: 'CreateAgentCredentialRequest' });

const UpdateAgentCredentialRequest = z
  .strictObject({
    name: CreateAgentCredentialRequest.shape.name.optional().describe('A new label'),
    status: z.enum(['active', 'disabled']).optional().describe('`disabled` throws the kill-switch; `active` re-enables'),
    ip_rules: IpRuleListsBody.optional().describe(
      'The credential’s own IP allow and deny lists, replaced whole (an absent list is empty). They apply beside the project’s: a connection must pass both (docs/http-api.md#ip-rules)',
    ),
  })
  .refine((body) => body.name !== undefined || body.status !== undefined || body.ip_rules !== undefined, { message: 'name at least one of name, status and ip_rules' })
  .meta({ title: 'UpdateAgentCredentialRequest' });

const AgentCredential = z
  .object({
    id: z.string(),
    project_id: z.string(),
    policy_profile_id: z.string(),
    name: z.string(),
    pg_username: z.string().describe('Postgres user name presented to the proxy'),
    status: z.enum(['active', 'disabled', 'revoked']).describe('As stored; expiry does not change it, see `expired`'),
    principal_type: PrincipalType,
    auth_method: z.enum(['cleartext', 'scram-sha-256']),
    last_used_at: Timestamp.nullable(),
    expires_at: Timestamp.nullable(),
    ip_rules: IpRuleListsView.describe('The credential’s own IP rules, checked beside its project’s; both lists empty when none were set'),
    expired: z.boolean().describe('True from the instant expires_at passes, computed at read time: the credential is then refused whatever `status` says'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'AgentCredential' });
type AgentCredential = z.infer<typeof AgentCredential>;

export const AgentCredentialSecrets = z
  .object({
    credential: AgentCredential,
    connection_string: z.string().describe('postgresql://<pg_username>:<password>@<host>:<port>/<database>; shown once'),
    mcp_url: z.string().describe('Hosted agent MCP endpoint'),
    mcp_token: z.string().describe('Bearer token for the hosted MCP endpoint; shown once'),
  })
  .meta({ id: 'AgentCredentialSecrets' });

function toAgentCredential(row: CredentialView, now: Date): AgentCredential {
  return {
    id: row.credential_id,
    project_id: row.project_id,
    policy_profile_id: row.policy_profile_id,
    name: row.name,
    pg_username: row.pg_username,
    status: row.status,
    principal_type: row.principal_type as AgentCredential['principal_type'],
    auth_method: 'scram-sha-256',
    last_used_at: row.last_used_at === null ? null : iso(row.last_used_at),
    expires_at: row.expires_at === null ? null : iso(row.expires_at),
    ip_rules: { allow: [...row.ip_rules.allow], deny: [...row.ip_rules.deny] },
    expired: row.expired_at !== null || isExpired(row.expires_at, now.toISOString()),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** A new password and MCP token, and what is stored instead of them. */
export function issueSecrets(): { password: string; token: string; stored: Secrets } {
  const password = randomBytes(32).toString('base64url');
  const token = newSecret(AGENT_TOKEN_PREFIX);
  return { password, token, stored: { scram: createScramVerifier(password), token_hash: sha256Hex(token), token_prefix: displayPrefix(token) } };
}

export function secretsBody(deps: ApiDeps, row: CredentialRow, database: DatabaseRow, issued: { password: string; token: string }) {
  const userinfo = `${encodeURIComponent(row.pg_username)}:${encodeURIComponent(issued.password)}`;
  return {
    credential: toAgentCredential(row, deps.now()),
    connection_string: `postgresql://${userinfo}@${deps.publicHost}:${deps.proxyPort}/${encodeURIComponent(database.name)}`,
    mcp_url: deps.mcpUrl,
    mcp_token: issued.token,
  };
}

/** The caller, once its role suffices and its organization has the `agent-gateway` feature (spec §4.2, §9). */
async function agentCaller(deps: ApiDeps, request: FastifyRequest, minimum: HumanRole): Promise<Caller> {
  const caller = requireRole(request, minimum);
  const feature = agentCredentialDiscovery.feature_flag;
  if (!(await visibleOrganization(deps, caller.orgId))?.features.includes(feature)) {
    throw new Problem('PLAN_LIMIT_REACHED', `agent credentials need the ${feature} feature, which the organization’s plan does not include`);
  }
  return caller;
}

/** The project's databases in registration order, from its stream (authoritative, and current right after a write). */
export async function projectDatabases(deps: ApiDeps, projectId: string): Promise<Map<string, DatabaseRow>> {
  const databases = new Map<string, DatabaseRow>();
  for (const event of await deps.store.readStream(`project-${projectId}`)) {
    const { database_id: id } = JSON.parse(Buffer.from(event.data).toString('utf8')) as { database_id?: string };
    const row = id === undefined ? null : evolveDatabase(databases.get(id), event);
    if (id !== undefined && row) databases.set(id, row);
  }
  return databases;
}

/** A missing policy is a fault of the request body, so it answers 400 naming the field rather than 404. */
async function policyIdOf(deps: ApiDeps, orgId: string, projectId: string, policyId: string): Promise<string> {
  try {
    return (await visiblePolicy(deps, orgId, projectId, policyId)).policy_id;
  } catch (error) {
    if (error instanceof Problem && error.code === 'NOT_FOUND') {
      throw new Problem('INVALID_INPUT', `policy profile ${policyId} not found in project ${projectId}`, { errors: [{ field: 'policy_profile_id', message: 'names no policy profile of this project' }] });
    }
    throw error;
  }
}

function notFound(projectId: string, agentId: string): Problem {
  return new Problem('NOT_FOUND', `agent credential ${agentId} not found in project ${projectId}`);
}

function credentialFromStream(deps: ApiDeps, agentId: string): Promise<CredentialRow | undefined> {
  return foldStream(deps, `credential-${agentId}`, evolveCredential);
}

/** For reads: the read model, or the stream when it has not caught up yet. Another organization's credential reads like a missing one. */
async function visibleCredential(deps: ApiDeps, orgId: string, projectId: string, agentId: string): Promise<CredentialView> {
  await visibleProject(deps, orgId, projectId);
  const row = (await findCredential(deps.pool, projectId, agentId)) ?? (await credentialFromStream(deps, agentId));
  if (row?.project_id !== projectId) throw notFound(projectId, agentId);
  return row;
}

/** For writes: the credential as its stream has it, the start of the response's fold. */
async function storedCredential(deps: ApiDeps, orgId: string, projectId: string, agentId: string): Promise<CredentialRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await credentialFromStream(deps, agentId);
  if (row?.project_id !== projectId) throw notFound(projectId, agentId);
  return row;
}

export function agentRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/projects/:project_id/agents',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'registerAgentCredential',
        summary: 'Register an agent credential: a Postgres login and an MCP token under one policy',
        description:
          'Returns the connection string (with the password) and the MCP token once; only a SCRAM-SHA-256 verifier and a token hash are stored. ' +
          'Send an Idempotency-Key: a retry with it gets this same response, secrets included, and creates nothing more.',
        tags: ['agents'],
        params: ProjectParams,
        body: CreateAgentCredentialRequest,
        response: {
          201: AgentCredentialSecrets,
          ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE'),
        },
      },
    },
    async (request, reply) => {
      const caller = await agentCaller(deps, request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const body = request.body;
      const expiresAt = body.expires_at === null ? null : new Date(body.expires_at).toISOString();
      if (isExpired(expiresAt, deps.now().toISOString())) {
        throw new Problem('INVALID_INPUT', `expires_at ${body.expires_at} is not in the future`, { errors: [{ field: 'expires_at', message: 'must be in the future' }] });
      }
      const policyId = await policyIdOf(deps, caller.orgId, projectId, body.policy_profile_id);
      const database = [...(await projectDatabases(deps, projectId)).values()].find((row) => row.status === 'active');
      if (!database) throw new Problem('CONFLICT', `project ${projectId} has no database to connect a credential to`);
      const credentialId = newId('agt_');
      const issued = issueSecrets();
      const result = await execute(deps, request, `credential-${credentialId}`, credential, {
        kind: 'register',
        credential: {
          credential_id: credentialId,
          project_id: projectId,
          database_id: database.database_id,
          policy_profile_id: policyId,
          name: body.name,
          pg_username: credentialId,
          principal_type: body.principal_type,
          ...issued.stored,
          expires_at: expiresAt,
        },
      });
      const row = fold(evolveCredential, result.recorded);
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/agents/${credentialId}`);
      return reply.code(201).send(secretsBody(deps, row, database, issued));
    },
  );

  app.get(
    '/v1/projects/:project_id/agents',
    {
      schema: {
        operationId: 'listAgentCredentials',
        summary: 'List a project’s agent credentials (never their secrets)',
        description: 'Revoked credentials are listed too, with status `revoked`.',
        tags: ['agents'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ agents: z.array(AgentCredential), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = await agentCaller(deps, request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listCredentials(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.credential_id);
      const now = deps.now();
      return { agents: page.items.map((row) => toAgentCredential(row, now)), next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/projects/:project_id/agents/:agent_id',
    {
      schema: {
        operationId: 'getAgentCredential',
        summary: 'Get an agent credential (never its secrets)',
        tags: ['agents'],
        params: AgentParams,
        response: { 200: AgentCredential, ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = await agentCaller(deps, request, 'viewer');
      const row = await visibleCredential(deps, caller.orgId, request.params.project_id, request.params.agent_id);
      etag(reply, row.revision);
      return toAgentCredential(row, deps.now());
    },
  );

  app.patch(
    '/v1/projects/:project_id/agents/:agent_id',
    {
      schema: {
        operationId: 'updateAgentCredential',
        summary: 'Rename an agent credential, set its own IP rules, or throw its kill-switch (disable, enable again)',
        description:
          'Asking for the name or status the credential already has changes nothing and answers 200. A revoked credential, or enabling an expired one, ' +
          'answers 409 INVALID_STATE and changes nothing. Honours If-Match.',
        tags: ['agents'],
        params: AgentParams,
        body: UpdateAgentCredentialRequest,
        response: { 200: AgentCredential, ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = await agentCaller(deps, request, 'member');
      const { project_id: projectId, agent_id: agentId } = request.params;
      const before = await storedCredential(deps, caller.orgId, projectId, agentId);
      const { ip_rules: rules, ...rest } = request.body;
      const result = await execute(deps, request, `credential-${agentId}`, credential, { kind: 'update', ...rest, ...(rules ? { ipRules: storedLists(rules) } : {}), ifRevision: ifMatch(request) });
      const row = fold(evolveCredential, result.recorded, before);
      etag(reply, row.revision);
      return toAgentCredential(row, deps.now());
    },
  );

  app.post(
    '/v1/projects/:project_id/agents/:agent_id/rotate',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'rotateAgentCredential',
        summary: 'Rotate an agent credential: a new password and MCP token, same id and policy',
        description:
          'The old password and token stop working at once. Only an active, unexpired credential can be rotated (409 INVALID_STATE otherwise). ' +
          'The new secrets are shown once; a retry with the same Idempotency-Key gets this same response. Honours If-Match.',
        tags: ['agents'],
        params: AgentParams,
        response: {
          200: AgentCredentialSecrets,
          ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT'),
        },
      },
    },
    async (request, reply) => {
      const caller = await agentCaller(deps, request, 'member');
      const { project_id: projectId, agent_id: agentId } = request.params;
      const before = await storedCredential(deps, caller.orgId, projectId, agentId);
      const database = (await projectDatabases(deps, projectId)).get(before.database_id);
      if (database?.status !== 'active') throw new Problem('CONFLICT', `the credential’s database ${before.database_id} was removed; register a new credential`);
      const issued = issueSecrets();
      const result = await execute(deps, request, `credential-${agentId}`, credential, { kind: 'rotate', secrets: issued.stored, ifRevision: ifMatch(request) });
      const row = fold(evolveCredential, result.recorded, before);
      // A retry whose events were stored already (same Idempotency-Key, hence same event ids) gets those events, not these secrets.
      if (row.token_hash !== issued.stored.token_hash) throw new Problem('CONFLICT', 'this rotation was already served; its secrets were shown then and cannot be shown again');
      etag(reply, row.revision);
      return secretsBody(deps, row, database, issued);
    },
  );

  app.delete(
    '/v1/projects/:project_id/agents/:agent_id',
    {
      schema: {
        operationId: 'revokeAgentCredential',
        summary: 'Revoke an agent credential, permanently',
        description: 'Both secrets stop working at once and live connections are dropped. Revoking a revoked credential answers 409 INVALID_STATE. Honours If-Match.',
        tags: ['agents'],
        params: AgentParams,
        response: { 204: z.null().describe('Revoked'), ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = await agentCaller(deps, request, 'admin');
      const { project_id: projectId, agent_id: agentId } = request.params;
      await storedCredential(deps, caller.orgId, projectId, agentId);
      await execute(deps, request, `credential-${agentId}`, credential, { kind: 'revoke', ifRevision: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );
}
