import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Budgets, sessionBudgets } from '../../../proxy/budgets.js';
import { DecisionPublisher } from '../../../proxy/decisions.js';
import { AuditBackPressure } from '../../../proxy/audit-backpressure.js';
import { evolvePolicyRoles, upstreamChoice, type PolicyRoles, type UpstreamChoice } from '../../../proxy/views/policy-roles.js';
import type { PolicyRow } from '../../../projections/policies.js';
import type { EventStore } from '../../store/port.js';
import { INGEST_DURABLE } from '../../bus/port.js';
import { projectOrganization, spentSince } from '../../../queries/budget-usage.js';
import type { Plan } from '../../events/organizations.js';
import { plans } from '../../plans.js';
import { findPolicy } from '../../../queries/policies.js';
import { IdParam, type Api, type ApiDeps } from '../../http/routes/support.js';
import { loadAgentDocs, type DocsLibrary } from '../docs.js';
import type { ToolCallObserver } from '../tool.js';
import { serveMcp } from '../transport.js';
import { IP_RULES_RULE } from '../../../proxy/ip-rules.js';
import { mcpDecision } from './audit.js';
import { authenticateAgent, requireAllowedAddress } from './auth.js';
import { normalAddress } from '../../net/cidr.js';
import type { AgentContext, AgentServices } from './context.js';
import { AgentCache } from './cache.js';
import { cacheControlsView } from '../../../proxy/views/proxy-views.js';
import { requestHoneytokens } from './honeytokens.js';
import { createAgentServer } from './server.js';
import type { AgentDatabases } from './upstream.js';
import { masksWithHash } from '../../../proxy/policy/hash-key.js';
import { sandboxBranchOf } from '../../../proxy/sandbox.js';
import { readyBranches } from '../../../queries/branches.js';

/** As the proxy chooses: a read-only policy's pool, as the role provisioned for it on this database when there is one. */
export async function upstreamOf(store: EventStore, policy: PolicyRow | undefined, databaseId: string): Promise<UpstreamChoice> {
  // Only a read-only policy's roles are used: skip reading its stream otherwise.
  const roles = policy?.read_only ? (await store.readStream(`policy-${policy.policy_id}`)).reduce<PolicyRoles | undefined>((row, event) => evolvePolicyRoles(row, event) ?? undefined, undefined) : undefined;
  return upstreamChoice(policy, roles, databaseId);
}

/** Decisions waiting for the bus at most; beyond, they are dropped and reported in a gap marker, as on the wire. */
const DECISION_BUFFER = 10_000;

/**
 * The hosted agent MCP (spec §4.7): `POST /mcp` on the project host, whose project the agent token
 * names, and `POST /v1/projects/{project_id}/mcp` in single-host setups. Each request authenticates
 * its agent token itself (not the org API-key hook), then gets a stateless server over the
 * credential, its policy and honeytokens.
 */
export function agentMcpRoutes(app: Api, deps: ApiDeps, databases: AgentDatabases, observe?: ToolCallObserver): void {
  const bootEpoch = Math.floor(Date.now() / 1000);
  const decisions = new DecisionPublisher(deps.decisions.bus, { proxyId: deps.decisions.publisherId, bootEpoch }, DECISION_BUFFER, (error) =>
    app.log.warn({ err: error }, 'decision bus refused an MCP record; retrying'),
  );
  // The audit's back-pressure, as on the wire (docs/architecture.md): the requests of the agents that cause ingest's backlog wait while it catches up.
  const backPressure = new AuditBackPressure(() => deps.decisions.bus.backlog(INGEST_DURABLE), {}, deps.decisions.backPressureLimits);
  backPressure.start();
  const budgets =
    deps.budgets ??
    new Budgets(
    (scope, day, month) => spentSince(deps.pool, scope, day, month),
    (error, scope) => app.log.warn({ err: error, scope }, 'could not read what a budget scope spent; its MCP statements are refused until it can'),
  );
  let docs: Promise<DocsLibrary> | undefined;
  const cache = new AgentCache(cacheControlsView(deps.store));
  // The fan-out's notes of writes made elsewhere (the proxies, other API processes) open their credentials' windows here too.
  const unshare = deps.cacheFanout && cache.caches.share(deps.cacheFanout, (credentialId) => databases.reads?.writes.wrote(credentialId));
  app.addHook('onClose', async () => {
    unshare?.();
    backPressure.stop();
    await cache.stop();
    await decisions.close();
  });

  const services = async (): Promise<AgentServices> => ({ pool: deps.pool, databases, decisions, auditHold: backPressure, budgets, region: deps.decisions.region, docs: await (docs ??= loadAgentDocs()), store: deps.store, cache });

  const serve = async (request: FastifyRequest, reply: FastifyReply, projectId?: string): Promise<void> => {
    const credential = await authenticateAgent(deps, request, projectId);
    await backPressure.clear(credential.credential_id);
    const clientIp = normalAddress(request.ip);
    // The request id may be the client's own X-Request-Id: prefixed with the credential, no agent can put its records in another's session.
    const sessionId = `mcp.${credential.credential_id}.${request.id}`.slice(0, 128);
    await requireAllowedAddress(deps.pool, request, credential, clientIp, (reason) =>
      decisions.publish(mcpDecision({ credential, sessionId, region: deps.decisions.region, clientIp }, { event: 'auth_failed', sql: '', kind: '', rule: IP_RULES_RULE, reason, ran: false })),
    );
    const policy = await findPolicy(deps.pool, credential.project_id, credential.policy_profile_id);
    const org = await projectOrganization(deps.pool, credential.project_id);
    const credentialBudgets = sessionBudgets(budgets, () => (org ? { id: org.org_id, plan: org.plan, terms: plans[org.plan as Plan] } : undefined));
    await credentialBudgets.prepare(credential);
    const context: AgentContext = {
      services: await services(),
      credential,
      policy,
      honeytokens: await requestHoneytokens(deps.pool, deps.store, policy, request.id, request.log),
      hashKey: masksWithHash(policy) ? await deps.hashKeys.load(credential.project_id).catch((error: unknown) => void request.log.warn({ err: error }, 'could not read the project’s hash key; statements a hash mask applies to are refused')) : undefined,
      budgets: credentialBudgets,
      upstream: { ...(await upstreamOf(deps.store, policy, credential.database_id)), branch: sandboxBranchOf(policy, await readyBranches(deps.pool, credential.database_id), credential.database_id) },
      sessionId,
      clientIp,
      log: request.log,
    };
    await serveMcp(request, reply, createAgentServer(context, observe));
  };

  app.post('/mcp', { schema: { hide: true } }, (request, reply) => serve(request, reply));
  app.post(
    '/v1/projects/:project_id/mcp',
    // Agent tokens are not org API keys: this route authenticates them itself.
    { schema: { hide: true, params: z.object({ project_id: IdParam('project id') }) }, config: { public: true } },
    (request, reply) => serve(request, reply, request.params.project_id),
  );
}
