import type { BackPressureLimits } from '../../proxy/audit-backpressure.js';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Fanout } from '../../src/bus/fanout.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import pg from 'pg';
import { Budgets } from '../../proxy/budgets.js';
import { startProxy, type ProxyOptions, type RunningProxy } from '../../proxy/server.js';
import { spentSince } from '../../queries/budget-usage.js';
import { waitFor } from './wire.js';
import { loadTls } from '../../proxy/tls.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { Delivery, DecisionBus } from '../../src/bus/port.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { DomainCertificates } from '../../src/domains/certificates.js';
import { startApi, type TestApi } from './api.js';
import { freePort } from './free-port.js';
import { freshDatabase, type TestDatabase } from './pg.js';

export interface AgentSecrets {
  credential: { id: string; project_id: string };
  connection_string: string;
  mcp_url: string;
  mcp_token: string;
}

export interface TestGateway {
  api: TestApi;
  readonly proxy: RunningProxy;
  /** The running proxy's metrics registry, as /metrics would expose it. */
  readonly metrics: Registry;
  bus: DecisionBus;
  /** The upstream database the project's primary database points at. */
  upstream: TestDatabase;
  owner: { orgId: string; apiKey: string };
  projectId: string;
  policyId: string;
  /** Decisions (and gap markers) published so far, in arrival order. */
  decisions: Record<string, unknown>[];
  /** Wire sessions' connection marks published so far (proxy/decisions.ts SessionMark), in arrival order. */
  sessionMarks: Record<string, unknown>[];
  /** The decisions published for one credential, once there are at least `count` (within 3 s). */
  decisionsOf(credentialId: string, count: number): Promise<Record<string, unknown>[]>;
  /** Stops the proxy and starts a new one on the same port: nothing of the old one's memory survives. */
  restartProxy(): Promise<void>;
  register(name?: string): Promise<AgentSecrets>;
  stop(): Promise<void>;
}

/**
 * The control plane and the proxy over one event store, an in-process bus whose decisions the test
 * can read, and a fresh upstream database (tables `orders` and `customers`) registered as a
 * project's primary database, on the test server or on `upstreamServerUrl`; `env` adds to the
 * control plane's configuration; `logger` is the proxy's and the API's; `replicas` the proxy's replica options;
 * `more` overrides proxy options (its listen host, PROXY protocol), gives the API its trusted proxies, and may wrap the bus both publish through.
 */
export async function startGateway(
  label: string,
  upstreamServerUrl?: string,
  loginTimeoutMs = 60_000,
  env: NodeJS.ProcessEnv = {},
  logger: Logger = pino({ level: 'silent' }),
  replicas: ProxyOptions['replicas'] = {},
  more: { readonly proxy?: Partial<ProxyOptions>; readonly trustProxy?: readonly string[]; readonly publishVia?: (bus: DecisionBus) => DecisionBus; readonly apiCacheFanout?: Fanout; readonly mcpBackPressureLimits?: BackPressureLimits } = {},
): Promise<TestGateway> {
  const proxyPort = await freePort();
  const bus = createMemoryBus();
  // What the proxy and the control plane publish through: the bus, or a test's wrapper of it (the test's own consumer and ingest read the bus).
  const publishing = more.publishVia?.(bus) ?? bus;
  // As in one `pgward serve` process: the proxy and the hosted MCP count budgets against one tally (the pool is the API's, known once it runs).
  const readModels: { pool?: pg.Pool } = {};
  const budgets = new Budgets((scope, day, month) => spentSince(readModels.pool!, scope, day, month), () => undefined);
  // The proxy's generated TLS material: GET /v1/proxy/ca.pem serves its CA.
  const tlsDir = await mkdtemp(join(tmpdir(), 'pgward-tls-'));
  const api = await startApi(label, { PGWARD_PUBLIC_HOST: '127.0.0.1', PGWARD_PROXY_PORT: String(proxyPort), PGWARD_DATA_DIR: tlsDir, ...env }, { bus: publishing, budgets, logger, ...(more.trustProxy ? { trustProxy: more.trustProxy } : {}), ...(more.apiCacheFanout ? { cacheFanout: more.apiCacheFanout } : {}), ...(more.mcpBackPressureLimits ? { mcpBackPressureLimits: more.mcpBackPressureLimits } : {}) });
  readModels.pool = api.pool;
  const upstream = await freshDatabase(`${label}_up`, upstreamServerUrl);
  const seed = new pg.Client({ connectionString: upstream.url });
  await seed.connect();
  await seed.query(`create table orders (id int primary key, customer text not null, total numeric not null);
    insert into orders select g, 'c' || (g % 10), g * 1.5 from generate_series(1, 1000) g;
    create table customers (id int primary key, email text not null);
    insert into customers select g, 'user' || g || '@example.com' from generate_series(1, 10) g;`);
  await seed.end();
  const decisions: Record<string, unknown>[] = [];
  const sessionMarks: Record<string, unknown>[] = [];
  const consumer = await bus.consume({ durable: 'test', maxInFlight: 64 }, async (delivery: Delivery) => {
    const record = JSON.parse(Buffer.from(delivery.data).toString('utf8')) as Record<string, unknown>;
    // One record per decision, whether it travelled alone or in a batch.
    if (record.kind === 'batch') decisions.push(...(record.decisions as unknown[]).map((decision) => ({ kind: 'decision', decision })));
    else if (record.kind === 'sessions') sessionMarks.push(...(record.sessions as Record<string, unknown>[]));
    else decisions.push(record);
  });
  const keyring = parseKeyring(api.masterKey);
  const tls = await loadTls({ dataDir: tlsDir, hosts: ['127.0.0.1'] });
  let metrics = new Registry();
  // A restarted proxy is a new process: it keeps no tally of the one before.
  let launches = 0;
  const launch = (): Promise<RunningProxy> => startProxy({
    ...(launches++ === 0 ? { budgets } : {}),
    tls,
    ...(env.PGWARD_DOMAIN_CERT_DIR ? { domainCertificates: new DomainCertificates(env.PGWARD_DOMAIN_CERT_DIR) } : {}),
    store: api.store,
    bus: publishing,
    keyring,
    logger,
    metrics: (metrics = new Registry()),
    host: '127.0.0.1',
    port: proxyPort,
    region: 'local',
    proxyId: 'test-proxy',
    maxMessageBytes: 1024 * 1024,
    loginTimeoutMs,
    spent: (scope, day, month) => spentSince(api.pool, scope, day, month),
    replicas,
    ...more.proxy,
  });
  let proxy = await launch();
  const owner = await api.org('pro');
  const target = new URL(upstream.url);
  const created = await api.call(owner.apiKey, {
    method: 'POST',
    url: '/v1/projects',
    payload: {
      name: label,
      org_id: owner.orgId,
      database: {
        host: target.hostname,
        port: Number(target.port || 5432),
        name: target.pathname.slice(1),
        username: decodeURIComponent(target.username),
        password: decodeURIComponent(target.password) || 'trust',
        ssl_mode: 'disable',
      },
    },
  });
  const projectId = (created.json() as { project: { id: string } }).project.id;
  const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'everything', read_only: false, allowed_tables: ['public.*'] } });
  const policyId = (policy.json() as { id: string }).id;
  return {
    api,
    get proxy() {
      return proxy;
    },
    get metrics() {
      return metrics;
    },
    async restartProxy() {
      await proxy.stop();
      proxy = await launch();
    },
    bus,
    upstream,
    owner,
    projectId,
    policyId,
    decisions,
    sessionMarks,
    async decisionsOf(credentialId, count) {
      const of = () => decisions.map((d) => d.decision as Record<string, unknown> | undefined).filter((d): d is Record<string, unknown> => d?.credential_id === credentialId);
      await waitFor(() => of().length >= count, 3000, `${count} decisions of ${credentialId}`);
      return of();
    },
    async register(name = 'agent') {
      const response = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name, policy_profile_id: policyId } });
      if (response.statusCode !== 201) throw new Error(`register failed: ${response.body}`);
      return response.json() as AgentSecrets;
    },
    async stop() {
      await proxy.stop();
      await consumer.stop();
      await bus.close();
      await api.stop();
      await upstream.drop();
      await rm(tlsDir, { recursive: true, force: true });
    },
  };
}
