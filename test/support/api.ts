import type { BackPressureLimits } from '../../proxy/audit-backpressure.js';
import type { Budgets } from '../../proxy/budgets.js';
import type { Fanout } from '../../src/bus/fanout.js';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import type pg from 'pg';
import { pino, type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createOrganization } from '../../commands/organizations/create-organization.js';
import { ANOMALY_WINDOWS } from '../../projections/anomaly-windows.js';
import { projectionsFor } from '../../projections/index.js';
import { startAnomalyRaiser } from '../../src/anomalies/raiser.js';
import { runProjection, type RunningProjection } from '../../projections/runner.js';
import type { HmacKeyring } from '../../src/audit/chain.js';
import { auditKeysFrom } from '../../src/audit/keys.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { DecisionBus } from '../../src/bus/port.js';
import { loadConfig } from '../../src/config.js';
import { controlPlane } from '../../src/control-plane.js';
import { relayLinks } from '../../proxy/relay/options.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import type { Plan } from '../../src/events/organizations.js';
import { buildApp, type ControlPlane } from '../../src/http/app.js';
import { closeApp } from '../../src/http/close-app.js';
import { createMetrics } from '../../src/metrics.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { inject } from 'vitest';
import { admin, freshDatabase, withDatabase, type TestDatabase } from './pg.js';

export interface TestApi {
  app: FastifyInstance;
  store: PostgresEventStore;
  /** The API's metrics, as its /metrics serves them. */
  metrics: Registry;
  pool: pg.Pool;
  database: TestDatabase;
  /** The keyring specification the control plane seals with (the proxy opens with it). */
  masterKey: string;
  /** The audit anchor key (PKCS#8 PEM) checkpoints are signed with. */
  anchorPem: string;
  /** Creates an organization through the real command and returns its owner key. */
  org(plan?: Plan, features?: string[]): Promise<{ orgId: string; apiKey: string }>;
  /** app.inject with `Authorization: Bearer <key>` and a JSON body. */
  call(key: string, options: InjectOptions): Promise<LightMyRequestResponse>;
  /** Creates a project (its primary database the local `postgres`) through the API; its id. */
  project(owner: { orgId: string; apiKey: string }, name?: string): Promise<string>;
  stop(): Promise<void>;
}

function testAuditDeps(anchorPem: string, keys: HmacKeyring) {
  const anchor = loadAnchorKey(anchorPem);
  return { keys, anchorPublicKey: anchor.publicKey, signer: { keyId: 'pgward-audit-anchor', privateKey: anchor.privateKey } };
}

type ApiOptions = { bus?: DecisionBus; budgets?: Budgets; logger?: Logger; trustProxy?: readonly string[]; cacheFanout?: Fanout; mcpBackPressureLimits?: BackPressureLimits };

let templateMade: Promise<void> | undefined;

/**
 * A state database for a test API: a copy of the run's template (the global setup names it and drops
 * it at the end), which an API started once on it and stopped again: its event store, read models,
 * webhook and idempotency tables and the identity server's tables are there, so an API's start only
 * checks them (the identity server's fingerprint, src/identity/server.ts) instead of making them in
 * every test file's database. The first worker that needs it makes it, under an advisory lock.
 */
async function stateDatabase(label: string): Promise<TestDatabase> {
  const serverUrl = inject('pgUrl');
  const template = inject('stateTemplate');
  templateMade ??= admin(serverUrl, async (client) => {
    // Released when this session ends, after the template's own connections are closed: CREATE DATABASE ... TEMPLATE refuses a template in use.
    await client.query('select pg_advisory_lock(hashtext($1))', [template]);
    if ((await client.query('select 1 from pg_database where datname = $1', [template])).rowCount) return;
    await client.query(`create database ${template}`);
    const api = await startApiOn({ url: withDatabase(serverUrl, template), name: template, drop: async () => undefined });
    await api.stop();
  });
  await templateMade;
  return freshDatabase(label, serverUrl, template);
}

/** The control plane with the hosted MCP's audit back-pressure marks a test sets, else as built. */
function withMcpLimits(plane: ControlPlane, limits: BackPressureLimits | undefined): ControlPlane {
  return limits ? { ...plane, deps: { ...plane.deps, decisions: { ...plane.deps.decisions, backPressureLimits: limits } } } : plane;
}

/** The real control plane (composition, plugins, routes, projections) over a fresh database; `env` is its configuration (PGWARD_AUDIT_HMAC_KEYS keys the audit chain). */
export async function startApi(label: string, env: NodeJS.ProcessEnv = {}, options: ApiOptions = {}): Promise<TestApi> {
  return startApiOn(await stateDatabase(label), env, options);
}

async function startApiOn(database: TestDatabase, env: NodeJS.ProcessEnv = {}, options: ApiOptions = {}): Promise<TestApi> {
  const store = await createPostgresEventStore(database.url);
  const config = loadConfig({ PGWARD_STATE_URL: database.url, PGWARD_MASTER_KEY: randomBytes(32).toString('base64'), PGWARD_PUBLIC_HOST: 'gateway.test', ...env });
  const auditKeys = auditKeysFrom(config);
  const projections = projectionsFor({ auditKeys });
  // As in serve: each projection runner keeps one connection for its advisory lock.
  const pool = createPool(database.url, { max: 10 + projections.length });
  const anchorPem = generateAnchorKey();
  // The hosted agent MCP publishes its decisions here; the test gateway passes the proxy's bus.
  const bus = options.bus ?? createMemoryBus();
  const logger = options.logger ?? pino({ level: 'silent' });
  // As in serve: the anomaly raiser runs beside the projections, woken by the anomaly windows' batches.
  const raiser = startAnomalyRaiser({ store, pool, logger });
  const runners: RunningProjection[] = projections.map((projection) => runProjection({ store, pool, projection, hooks: { onBatch: (name) => name === ANOMALY_WINDOWS && raiser.wake() } }));
  await Promise.all(runners.map((r) => r.active));
  const metrics = createMetrics('api');
  const app = await buildApp({
    logger,
    metrics: metrics.registry,
    observe: metrics.observe,
    health: async () => ({}),
    ...(options.trustProxy ? { trustProxy: options.trustProxy } : {}),
    controlPlane: withMcpLimits(controlPlane(config, parseKeyring(config.PGWARD_MASTER_KEY!), store, pool, logger, projections, testAuditDeps(anchorPem, auditKeys), bus, options.budgets, options.cacheFanout, await relayLinks(config)), options.mcpBackPressureLimits),
  });
  return {
    app,
    store,
    metrics: metrics.registry,
    pool,
    database,
    masterKey: config.PGWARD_MASTER_KEY!,
    anchorPem,
    async org(plan = 'pro', features) {
      const created = await createOrganization(store, { name: 'Test org', plan, ...(features ? { features } : {}) }, { correlationId: 'test', actor: 'test' });
      return { orgId: created.org_id, apiKey: created.api_key };
    },
    call(key, options) {
      return app.inject({ ...options, headers: { authorization: `Bearer ${key}`, ...(options.headers ?? {}) } });
    },
    async project(owner, name = 'P') {
      const created = await app.inject({
        method: 'POST',
        url: '/v1/projects',
        headers: { authorization: `Bearer ${owner.apiKey}` },
        payload: { name, org_id: owner.orgId, database: { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' } },
      });
      if (created.statusCode !== 201) throw new Error(`creating project ${name}: ${created.statusCode} ${created.body}`);
      return (created.json() as { project: { id: string } }).project.id;
    },
    async stop() {
      // A client that connected and sent nothing (a data plane stopped mid-reconnect) would hold a plain close.
      await closeApp(app, 1_000);
      if (!options.bus) await bus.close();
      await Promise.all(runners.map((r) => r.stop()));
      await raiser.stop();
      await store.close();
      await pool.end();
      await database.drop();
    },
  };
}
