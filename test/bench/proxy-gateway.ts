/**
 * pgward as `pgward serve` assembles it, in the bench's process: the event store and projections
 * on a state database, the control plane (driven with app.inject), and the proxy without TLS. An
 * organization, a project whose primary database is the bench's upstream, a policy and an agent
 * are created through the real API, so the agent logs in to the proxy with SCRAM as any agent does.
 */
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createOrganization } from '../../commands/organizations/create-organization.js';
import { projectionsFor } from '../../projections/index.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { runProjection } from '../../projections/runner.js';
import { startProxy } from '../../proxy/server.js';
import { spentSince } from '../../queries/budget-usage.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import { loadConfig } from '../../src/config.js';
import { controlPlane } from '../../src/control-plane.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { buildApp } from '../../src/http/app.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore } from '../../src/store/postgres.js';
import { freePort } from '../support/free-port.js';
import { TRANSACTION_POOL } from '../support/pgward-process.js';
import type { Teardown } from './proxy-servers.js';

export interface Upstream {
  readonly port: number;
  readonly database: string;
  readonly user: string;
  readonly password: string;
}

export interface Gateway {
  readonly port: number;
  /** The agent's login, from the connection string the API returned; its policy allows every table. */
  readonly agent: { readonly user: string; readonly password: string; readonly database: string };
  /** An agent under REALISTIC_POLICY. */
  readonly governed: { readonly user: string; readonly password: string; readonly database: string };
  /** Bus messages the proxy published and the bus delivered so far (each carries a batch of decisions). */
  messages(): number;
}

/** The bench's realistic policy: read-only, an allowlist, two masked columns of the rows policyScript() reads, a row cap. */
export const REALISTIC_POLICY = {
  read_only: true,
  allowed_tables: ['public.pgbench_accounts', 'public.pgbench_branches'],
  masked_columns: { 'public.pgbench_accounts.abalance': 'null', 'public.pgbench_accounts.filler': 'hash' },
  max_rows: 100,
} as const;

/** The pool bench:proxy's gateway uses: bench:e2e's, as PgBouncer's pool of 10 for one agent. */
export const POOL_CONFIG = TRANSACTION_POOL;

function benchAuditDeps() {
  const anchor = loadAnchorKey(generateAnchorKey());
  return { keys: { keys: new Map() }, anchorPublicKey: anchor.publicKey, signer: { keyId: 'bench-anchor', privateKey: anchor.privateKey } };
}

export async function startGateway(stateUrl: string, upstream: Upstream, teardown: Teardown): Promise<Gateway> {
  const logger = pino({ level: 'silent' });
  const port = await freePort();
  const config = loadConfig({ PGWARD_STATE_URL: stateUrl, PGWARD_MASTER_KEY: randomBytes(32).toString('base64'), PGWARD_PUBLIC_HOST: '127.0.0.1', PGWARD_PROXY_PORT: String(port) });
  const keyring = parseKeyring(config.PGWARD_MASTER_KEY!);

  const store = await createPostgresEventStore(stateUrl);
  teardown.add(() => store.close());
  const pool = createPool(stateUrl, { max: 10, applicationName: 'pgward-bench' });
  teardown.add(() => pool.end());
  const projections = projectionsFor({ auditKeys: { keys: new Map() } });
  const runners = projections.map((projection) => runProjection({ store, pool, projection }));
  teardown.add(() => Promise.all(runners.map((runner) => runner.stop())));
  await Promise.all(runners.map((runner) => runner.active));

  // The audit ingest is not part of the passthrough: decisions are delivered and discarded.
  const bus = createMemoryBus();
  teardown.add(() => bus.close());
  let messages = 0;
  const consumer = await bus.consume({ durable: 'bench', maxInFlight: 64 }, async () => void messages++);
  teardown.add(() => consumer.stop());

  const proxy = await startProxy({
    store,
    bus,
    keyring,
    logger,
    metrics: new Registry(),
    host: '127.0.0.1',
    port,
    region: 'local',
    proxyId: 'bench-proxy',
    maxMessageBytes: config.PGWARD_MAX_MESSAGE_BYTES,
    loginTimeoutMs: config.PGWARD_LOGIN_TIMEOUT_MS,
    spent: (scope, day, month) => spentSince(pool, scope, day, month),
  });
  teardown.add(() => proxy.stop());

  const app = await buildApp({ logger, metrics: new Registry(), health: async () => ({}), controlPlane: controlPlane(config, keyring, store, pool, logger, projections, benchAuditDeps(), bus) });
  teardown.add(() => app.close());
  const { api_key: apiKey, org_id: orgId } = await createOrganization(store, { name: 'Bench org', plan: 'pro' }, { correlationId: 'bench', actor: 'bench' });
  const call = async (url: string, payload: object): Promise<Record<string, unknown>> => {
    const response = await app.inject({ method: 'POST', url, payload, headers: { authorization: `Bearer ${apiKey}` } });
    if (response.statusCode !== 201) throw new Error(`POST ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const database = { host: '127.0.0.1', port: upstream.port, name: upstream.database, username: upstream.user, password: upstream.password, ssl_mode: 'disable', pool_config: POOL_CONFIG };
  const { project } = (await call('/v1/projects', { name: 'bench', org_id: orgId, database })) as { project: { id: string } };
  const policy = (await call(`/v1/projects/${project.id}/policies`, { name: 'pgbench', read_only: true, allowed_tables: ['public.*'] })) as { id: string };
  const agent = (await call(`/v1/projects/${project.id}/agents`, { name: 'pgbench', policy_profile_id: policy.id })) as { connection_string: string };
  const realistic = (await call(`/v1/projects/${project.id}/policies`, { name: 'realistic', ...REALISTIC_POLICY })) as { id: string };
  const governed = (await call(`/v1/projects/${project.id}/agents`, { name: 'governed', policy_profile_id: realistic.id })) as { connection_string: string };

  const loginOf = (connectionString: string): Gateway['agent'] => {
    const login = new URL(connectionString);
    return { user: decodeURIComponent(login.username), password: decodeURIComponent(login.password), database: decodeURIComponent(login.pathname.slice(1)) };
  };
  return { port, agent: loginOf(agent.connection_string), governed: loginOf(governed.connection_string), messages: () => messages };
}
