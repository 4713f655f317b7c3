import fastifySwagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject, serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Registry } from 'prom-client';
import { loadParser } from '../../proxy/policy/parser.js';
import { relayOrigin } from '../../proxy/relay/options.js';
import { databasesView, replicasView } from '../../proxy/views/proxy-views.js';
import { agentMcpRoutes } from '../mcp/agent/route.js';
import { AgentDatabases } from '../mcp/agent/upstream.js';
import { managementMcpRoutes } from '../mcp/management/route.js';
import type { ToolCallObserver } from '../mcp/tool.js';
import { dashboardRoutes } from '../dashboard/routes.js';
import { installConventions, requestId, sendProblem } from './conventions.js';
import { pruneUnusedSchemas } from './openapi.js';
import { Problem } from './problem.js';
import { installAuth, type Authenticators } from './plugins/auth.js';
import { installIdempotency, type BodySealer } from './plugins/idempotency.js';
import { installPayments } from './plugins/payments.js';
import { installRateLimit, type RateLimits } from './plugins/rate-limit.js';
import { installRequestMetrics, type RequestObserver } from './plugins/request-metrics.js';
import { agentRoutes } from './routes/agents.js';
import { anomalyRoutes } from './routes/anomalies.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { auditRoutes } from './routes/audit.js';
import { auditReportRoutes } from './routes/audit-reports.js';
import { cacheRoutes } from './routes/cache.js';
import { databaseRoutes } from './routes/databases.js';
import { demoRoutes } from './routes/demo.js';
import { domainRoutes } from './routes/domains.js';
import { branchRoutes } from './routes/branches.js';
import { dataPlaneRoutes } from './routes/data-plane.js';
import { enrollmentRoutes } from './routes/enrollments.js';
import { policyRoutes } from './routes/policies.js';
import { honeytokenRoutes } from './routes/honeytokens.js';
import { ipRuleRoutes } from './routes/ip-rules.js';
import { approvalEventRoutes } from './routes/approval-events.js';
import { approvalRoutes } from './routes/approvals.js';
import { webhookRoutes } from './routes/webhooks.js';
import { supportCaseRoutes } from './routes/support-cases.js';
import { crmRoutes } from './routes/crm.js';
import { usageRoutes } from './routes/usage.js';
import { ensureWebhookTables } from '../webhooks/schema.js';
import { policyEvaluateRoutes } from './routes/policy-evaluate.js';
import { policyReplayRoutes } from './routes/policy-replay.js';
import { policyRoleRoutes } from './routes/policy-roles.js';
import { discoveryRoutes } from './routes/discovery.js';
import { organizationRoutes } from './routes/organizations.js';
import { proxyCaRoutes } from './routes/proxy-ca.js';
import { projectRoutes } from './routes/projects.js';
import type { ApiDeps } from './routes/support.js';
import { challengeSecrets } from '../payments/challenge.js';
import type { PaymentVerifier } from '../payments/verifier.js';
import { creditBalanceRoutes } from './routes/credits.js';
import type { IdentityPlane } from '../identity/plane.js';
import { identityRoutes } from '../identity/routes.js';
import { accountRoutes } from './routes/account.js';
import { memberRoutes } from './routes/members.js';

export type PartState = { ok: true; detail?: string } | { ok: false; detail: string };

export interface ControlPlane {
  deps: ApiDeps;
  /** The identity server (docs/identity.md), mounted at /api/auth. */
  identity: IdentityPlane;
  authenticators: Authenticators;
  rateLimits: RateLimits;
  sealer: BodySealer;
  /** Settles Payment credentials of priced requests (deps.payments); the prepaid credit ledger unless the composition root plugs in another. */
  verifier?: PaymentVerifier;
}

export interface AppOptions {
  logger: FastifyBaseLogger;
  metrics: Registry;
  /** State of each part (event store, read models, bus, projector), checked on every /healthz. */
  health: () => Promise<Record<string, PartState>>;
  /** The REST API at /v1; absent in roles that serve only health and metrics. */
  controlPlane?: ControlPlane;
  /** Where every answered request and every MCP tool call is told of (the process's metrics). */
  observe?: { readonly request: RequestObserver; readonly toolCall: (server: 'agent' | 'management') => ToolCallObserver };
  /**
   * Reverse proxies whose X-Forwarded-For names the client (PGWARD_HTTP_TRUSTED_PROXIES, as CIDR
   * ranges): request.ip, which the per-address rate limit and the hosted MCP's IP rules see, is
   * then the address before the nearest trusted hop. Without it, the socket's peer.
   */
  trustProxy?: readonly string[];
}

export const BODY_LIMIT_BYTES = 2 * 1024 * 1024;

/** Longer than any path parameter the schemas accept (ids are at most 128), so an over-long one is refused by its schema, naming the field. */
const MAX_PARAM_LENGTH = 512;

/** Errors the router raises before any hook runs (bad percent-encoding, an over-long parameter): problem+json like every other error. */
function frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  void reply.header('x-request-id', request.id);
  const problem =
    error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new Problem('INVALID_INPUT', error.code === 'FST_ERR_BAD_URL' ? 'the request path is not valid percent-encoded UTF-8' : 'a path parameter is too long')
      : new Problem('INTERNAL_ERROR', `the server failed; quote request id ${request.id} when reporting it`);
  void sendProblem(reply, problem);
}

/** Whose Idempotency-Keys a request's are: its API key's, its user's, or its operator's. */
function idempotencyScope(request: FastifyRequest): string {
  if (request.operator) return `operator:${request.operator.name}`;
  return request.caller?.kind === 'api_key' ? request.caller.keyId : `${request.caller?.orgId}:${request.caller?.subject ?? ''}`;
}

/** The HTTP surface. The composition root decides what backs it. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: options.logger,
    // Probes and scrapes would drown the request log.
    logController: new LogController({ disableRequestLogging: (request) => request.url === '/healthz' || request.url === '/metrics' }),
    bodyLimit: BODY_LIMIT_BYTES,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: frameworkError,
    genReqId: requestId,
    ...(options.trustProxy ? { trustProxy: [...options.trustProxy] } : {}),
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  if (options.observe) installRequestMetrics(app, options.observe.request);
  installConventions(app);

  app.get('/healthz', { schema: { hide: true } }, async (_request, reply) => {
    const parts = await options.health();
    const ok = Object.values(parts).every((part) => part.ok);
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'degraded', parts });
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    return reply.type(options.metrics.contentType).send(await options.metrics.metrics());
  });

  const plane = options.controlPlane;
  if (plane) {
    // The identity server's tables are made meanwhile (its routes are registered once they exist).
    const identityReady = plane.identity.migrate();
    identityReady.catch(() => undefined);
    // The hosted agent MCP decides statements with the proxy's grammar, also in a process without a proxy (the API worker).
    await loadParser();
    await app.register(fastifySwagger, {
      openapi: {
        openapi: '3.1.0',
        info: { title: 'pgward control API', version: '1.0.0', license: { name: 'UNLICENSED', identifier: 'LicenseRef-pgward' }, description: 'Administers projects, databases, policy profiles and agent credentials. Errors are RFC 9457 problem details.' },
        servers: [{ url: '/' }],
        components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An organization API key (pgw_org_...) or a JWT from the identity provider' } } },
        security: [{ bearer: [] }],
      },
      transform: jsonSchemaTransform,
      transformObject: jsonSchemaTransformObject,
    });
    installRateLimit(app, plane.rateLimits);
    installAuth(app, plane.authenticators);
    installPayments(app, {
      ...(plane.deps.payments ? { settings: plane.deps.payments } : {}),
      ...(plane.verifier ? { verifier: plane.verifier } : {}),
      secrets: challengeSecrets(plane.deps.keyring),
      authenticators: plane.authenticators,
      pool: plane.deps.pool,
      now: plane.deps.now,
    });
    await installIdempotency(app, plane.deps.pool, idempotencyScope, plane.sealer);
    await identityReady;
    await identityRoutes(app, plane.identity);
    const api = app.withTypeProvider<ZodTypeProvider>();
    discoveryRoutes(api);
    organizationRoutes(api, plane.deps, plane.identity.issuer);
    proxyCaRoutes(api, plane.deps);
    projectRoutes(api, plane.deps);
    databaseRoutes(api, plane.deps);
    cacheRoutes(api, plane.deps);
    // The hosted agent MCP and the policy what-if decide on the same upstream pools and catalog snapshots.
    // The MCP routes reads as the proxy does, over views and a replica monitor of its own (docs/replicas.md#the-hosted-mcp).
    const { replicas } = plane.deps;
    const routingViews = replicas && { databases: databasesView(plane.deps.store), replicas: replicasView(plane.deps.store) };
    if (routingViews) await Promise.all([routingViews.databases.start(), routingViews.replicas.start()]);
    const relay = relayOrigin(plane.deps.decisions.region, plane.deps.decisions.publisherId, plane.deps.relay);
    const databases = new AgentDatabases(plane.deps.pool, plane.deps.keyring, app.log, relay, replicas && routingViews && { views: routingViews, options: replicas });
    app.addHook('onClose', async () => {
      await databases.close();
      if (routingViews) await Promise.all([routingViews.databases.stop(), routingViews.replicas.stop()]);
    });
    policyRoutes(api, plane.deps);
    policyEvaluateRoutes(api, plane.deps, databases);
    policyReplayRoutes(api, plane.deps, databases);
    policyRoleRoutes(api, plane.deps);
    honeytokenRoutes(api, plane.deps);
    ipRuleRoutes(api, plane.deps);
    domainRoutes(api, plane.deps);
    branchRoutes(api, plane.deps);
    approvalRoutes(api, plane.deps);
    approvalEventRoutes(api, plane.deps);
    // The deliveries list reads the delivering role's tables, which may not have run yet.
    await ensureWebhookTables(plane.deps.pool);
    webhookRoutes(api, plane.deps);
    anomalyRoutes(api, plane.deps);
    apiKeyRoutes(api, plane.deps);
    auditRoutes(api, plane.deps);
    auditReportRoutes(api, plane.deps);
    agentRoutes(api, plane.deps);
    demoRoutes(api, plane.deps);
    supportCaseRoutes(api, plane.deps);
    crmRoutes(api, plane.deps);
    usageRoutes(api, plane.deps);
    creditBalanceRoutes(api, plane.deps);
    enrollmentRoutes(api, plane.deps);
    dataPlaneRoutes(api, plane.deps);
    accountRoutes(api, plane.deps, plane.identity);
    memberRoutes(api, plane.deps, plane.identity);
    managementMcpRoutes(api, plane.identity.publicUrl, options.observe?.toolCall('management'));
    agentMcpRoutes(api, plane.deps, databases, options.observe?.toolCall('agent'));
    dashboardRoutes(app);
    app.get('/v1/openapi.json', { schema: { hide: true }, config: { public: true } }, async () => pruneUnusedSchemas(app.swagger()));
  }
  return app;
}
