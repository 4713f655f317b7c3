/**
 * Regions (docs/regions.md): proxy A of region `a` relays the statements of a database whose
 * pool_region is `b` to proxy B of region `b` over a TLS 1.3 link (B's certificate pinned, the link
 * secret proven for the session), so they run on B's upstream connection; A decides and audits
 * them, once. Each proxy has its own generated TLS material; both share the state database, the
 * decision bus and the machine's PostgreSQL. When no link can be had the statement (or the login)
 * is refused, fail closed, and nothing runs on A's own connection.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { SecureContext } from 'node:tls';
import { promisify } from 'node:util';
import pg from 'pg';
import postgres from 'postgres';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LinkPeer } from '../../proxy/relay/link.js';
import { startProxy, type RunningProxy } from '../../proxy/server.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { freePort } from '../support/free-port.js';
import { relayMaterial, type RelayMaterial } from '../support/relay-material.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { auditedRuns, decisionsOfCredential, recordsText } from '../support/recorded.js';
import { missingTool } from '../support/tools.js';
import { waitFor } from '../support/wire.js';

const run = promisify(execFile);
const secret = randomBytes(32);
const otherSecret = randomBytes(32);



let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;
let databaseUrl: string;
let base: string;
let materials: RelayMaterial[] = [];
/** The peers: B of region b (the link secret), D of region d (another secret). */
let b: RunningProxy | undefined;
let d: RunningProxy | undefined;
let bMetrics: Registry;
let dMetrics: Registry;
let bPort: number;
let dPort: number;

/** A peer proxy of `region` over the gateway's state and bus, accepting links on `relayPort` with `secrets`. */
function startPeer(region: string, relayPort: number, tls: SecureContext, secrets: Buffer[], metrics: Registry): Promise<RunningProxy> {
  return freePort().then((port) =>
    startProxy({
      store: gateway.api.store,
      bus: gateway.bus,
      keyring: parseKeyring(gateway.api.masterKey),
      logger: pino({ level: 'silent' }),
      metrics,
      host: '127.0.0.1',
      port,
      tls,
      region,
      proxyId: `proxy-${region}`,
      maxMessageBytes: 1024 * 1024,
      loginTimeoutMs: 60_000,
      upstreamApplicationName: `pgward:${region}`,
      upstreamConnectTimeoutMs: 2_000,
      relay: { peers: new Map(), secrets, listen: { host: '127.0.0.1', port: relayPort, tls } },
    }),
  );
}

/** Sets the database's pool_region (the proxies' views follow the event store, and make its pools anew). */
async function placeIn(region: string): Promise<void> {
  const changed = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: base, payload: { pool_region: region } });
  expect(changed.statusCode).toBe(200);
}

/** The application_name of the backend a fresh session through A runs on; undefined when it could not log in. */
async function runsOn(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  try {
    await client.connect();
    return (await client.query<{ app: string }>("select current_setting('application_name') as app")).rows[0]!.app;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The connection error of a login through A, or undefined when it logged in. */
async function loginError(): Promise<(Error & { code?: string }) | undefined> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  try {
    await client.connect();
    await client.end();
    return undefined;
  } catch (error) {
    return error as Error & { code?: string };
  }
}

/** Rows of the test database's pg_stat_activity, read on the test's own connection. */
async function activity<T extends pg.QueryResultRow>(sql: string, values: unknown[]): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Backends of the test database by application_name. */
async function backends(application: string): Promise<number[]> {
  const rows = await activity<{ pid: number }>('select pid from pg_stat_activity where datname = current_database() and application_name = $1 order by pid', [application]);
  return rows.map((row) => row.pid);
}

const metricValue = async (registry: Registry, name: string, labels: Record<string, string>): Promise<number> => {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = metric?.values.find((v) => Object.entries(labels).every(([key, wanted]) => v.labels[key] === wanted));
  return Number(value?.value ?? 0);
};

beforeAll(async () => {
  const [own, ofB, ofD, stranger] = (materials = await Promise.all([relayMaterial(), relayMaterial(), relayMaterial(), relayMaterial()]));
  bPort = await freePort();
  dPort = await freePort();
  const peer = (region: string, port: number, fingerprint: Buffer): [string, LinkPeer] => [region, { region, host: '127.0.0.1', port, trust: { fingerprint } }];
  const peers = new Map([
    peer('b', bPort, ofB!.fingerprint),
    // B's listener, pinned to a certificate it does not have.
    peer('c', bPort, stranger!.fingerprint),
    peer('d', dPort, ofD!.fingerprint),
  ]);
  gateway = await startGateway('regions', undefined, 60_000, {}, undefined, {}, {
    proxy: { tls: own!.tls, region: 'a', proxyId: 'proxy-a', upstreamApplicationName: 'pgward:a', upstreamConnectTimeoutMs: 2_000, relay: { peers, secrets: [secret] } },
  });
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  databaseUrl = gateway.upstream.url;
  bMetrics = new Registry();
  b = await startPeer('b', bPort, ofB!.tls, [secret], bMetrics);
  dMetrics = new Registry();
  d = await startPeer('d', dPort, ofD!.tls, [otherSecret], dMetrics);
  const listed = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
  base = `/v1/projects/${gateway.projectId}/databases/${(listed.json() as { databases: { id: string }[] }).databases[0]!.id}`;
  agent = await gateway.register('regional');
  await placeIn('b');
  await waitFor(async () => (await runsOn()) === 'pgward:b', 10_000, 'sessions through A running on B');
}, 180_000);

afterAll(async () => {
  await d?.stop();
  await b?.stop();
  await ingest?.stop();
  await gateway?.stop();
  await Promise.all(materials.map((m) => rm(m.dir, { recursive: true, force: true })));
}, 60_000);

describe('a database of another region', () => {
  it('runs a node-postgres statement through A on B’s upstream connection, audited once by A as relayed to b', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    const locker = new pg.Client({ connectionString: databaseUrl });
    await locker.connect();
    try {
      const sql = "select current_setting('application_name') as app, count(*)::int as n from orders";
      // Held on a lock the test takes, the statement shows in pg_stat_activity under the connection that runs it.
      await locker.query('begin; lock table orders in access exclusive mode');
      const ran = client.query<{ app: string; n: number }>(sql);
      await waitFor(async () => (await waiting('pgward:b')) === 1, 5_000, 'the relayed statement waiting on B’s connection');
      expect(await waiting('pgward:a')).toBe(0);
      await locker.query('commit');
      expect((await ran).rows).toEqual([{ app: 'pgward:b', n: 1000 }]);
      expect(await backends('pgward:a')).toEqual([]);
      // The extended protocol goes the same way.
      const bound = await client.query<{ app: string }>("select current_setting('application_name') as app where $1::int = 1", [1]);
      expect(bound.rows).toEqual([{ app: 'pgward:b' }]);

      const [entry] = await auditedRuns(gateway, agent.credential.id, sql, 1);
      expect(entry).toMatchObject({ region: 'a', ran_on: 'relay', replica_id: null, upstream_region: 'b', event: 'query' });
      // Exactly one decision of it reached the bus: B publishes none.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(decisionsOfCredential(gateway, agent.credential.id).filter((decision) => recordsText(decision.sql, sql))).toHaveLength(1);
      expect(await auditedRuns(gateway, agent.credential.id, sql, 1)).toHaveLength(1);
      expect(await metricValue(bMetrics, 'pgward_relay_links', { peer_region: 'a' })).toBeGreaterThan(0);
    } finally {
      await locker.end();
      await client.end();
    }
  });

  it.skipIf(missingTool('psql') !== undefined)('runs psql through A on B’s upstream connection', async () => {
    const { stdout } = await run('psql', [agent.connection_string, '-Atc', "select current_setting('application_name')"]);
    expect(stdout.trim()).toBe('pgward:b');
  });

  it('cancels a relayed statement on B’s upstream (postgres.js cancel)', async () => {
    const sql = postgres(agent.connection_string, { max: 1, onnotice: () => undefined });
    const locker = new pg.Client({ connectionString: databaseUrl });
    await locker.connect();
    try {
      const text = 'select count(*) from orders where id > 0';
      await locker.query('begin; lock table orders in access exclusive mode');
      const waits = sql.unsafe(text);
      const outcome = waits.then(
        () => 'ran',
        (error: { code?: string }) => error.code,
      );
      await waitFor(async () => (await waiting('pgward:b')) === 1, 5_000, 'the relayed statement waiting on B’s connection');
      waits.cancel();
      expect(await outcome).toBe('57014');
      // Cancelled on the upstream while the lock is still held: it waits no more.
      expect(await waiting('pgward:b')).toBe(0);
    } finally {
      await locker.end();
      await sql.end();
    }
  });
});

describe('the peer’s upstream connection after a link', () => {
  /** Sets the database's pool_config, and waits for a session through A to run on B again (both proxies make their pools anew). */
  async function setPool(pool: object): Promise<void> {
    const changed = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: base, payload: { pool_config: pool } });
    expect(changed.statusCode).toBe(200);
    await waitFor(async () => (await runsOn()) === 'pgward:b', 10_000, 'sessions through A running on B');
  }

  it('goes back to B’s pool, reset, when A closes its idle link: the next session through A runs on the same backend, without the last one’s settings', async () => {
    const before = ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: base })).json() as { pool_config: object }).pool_config;
    // One connection each side, closed by A after 1.5 s idle: B keeps it 1.5 s more for the next link.
    await setPool({ mode: 'transaction', max_connections: 1, min_connections: 0, idle_timeout_ms: 1_500, acquire_timeout_ms: 5_000 });
    try {
      const first = new pg.Client({ connectionString: agent.connection_string });
      await first.connect();
      await first.query("set lock_timeout = '7s'");
      expect((await first.query<{ lock_timeout: string }>("select current_setting('lock_timeout') as lock_timeout")).rows).toEqual([{ lock_timeout: '7s' }]);
      const [pid] = await backends('pgward:b');
      await first.end();
      await waitFor(async () => (await metricValue(bMetrics, 'pgward_relay_links', { peer_region: 'a' })) === 0, 5_000, 'A closing its idle link');
      // B's pool keeps the backend: its link ended idle.
      expect(await backends('pgward:b')).toEqual([pid]);
      const next = new pg.Client({ connectionString: agent.connection_string });
      await next.connect();
      try {
        expect((await next.query<{ lock_timeout: string }>("select current_setting('lock_timeout') as lock_timeout")).rows).toEqual([{ lock_timeout: '0' }]);
        expect(await backends('pgward:b')).toEqual([pid]);
      } finally {
        await next.end();
      }
    } finally {
      await setPool(before);
    }
  });
});

describe('the relay listener', () => {
  it('names PGWARD_RELAY_PORT when its port is taken, and the proxy does not start', async () => {
    await expect(startPeer('x', bPort, materials[1]!.tls, [secret], new Registry())).rejects.toThrow(`cannot listen on 127.0.0.1:${bPort} (PGWARD_RELAY_PORT): address already in use`);
  });
});

describe('the hosted MCP', () => {
  it('relays nothing yet: it refuses a database of another region 58000 region.no_peer and opens no connection to it', async () => {
    const result = await withAgentMcp(`${await listenForAgents(gateway)}/mcp`, agent, (mcp) => callTool(mcp, 'query', { sql: 'select count(*) from orders' }));
    expect(result.isError).toBe(true);
    // Refused at the catalog read, the first thing it needs of the database.
    expect(textOf(result)).toContain('(decision_rule region.no_peer, SQLSTATE 58000): this credential’s database is kept in region b, and the gateway has no link configured to that region’s data plane.');
    expect(await backends('pgward-mcp')).toEqual([]);
  });
});

/** Backends of `application` waiting on the test's lock of orders (the gateway runs the statement's text as its policy rewrote it). */
async function waiting(application: string): Promise<number> {
  const rows = await activity<{ n: number }>("select count(*)::int as n from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock' and query ilike '%from orders%'", [application]);
  return rows[0]!.n;
}

describe('fail closed: no link, no statement', () => {
  /** A login through A, once A's view has the database's new region, is refused FATAL with `code`, audited under `rule`; A opened no connection of its own. */
  async function loginRefused(code: string, rule: string, says: RegExp): Promise<void> {
    let login: Awaited<ReturnType<typeof loginError>>;
    await waitFor(async () => (login = await loginError())?.code === code, 10_000, `a login refused ${code}`);
    expect(login!.message).toMatch(says);
    expect(login!.message).not.toMatch(/127\.0\.0\.1|sha256|fingerprint|secret|proxy-/);
    await waitFor(() => decisionsOfCredential(gateway, agent.credential.id).some((decision) => decision.decision_rule === rule && decision.event === 'auth_failed' && decision.ran_on === null), 3_000, `a ${rule} decision`);
    expect(await backends('pgward:a')).toEqual([]);
  }

  it('refuses 08004 region.peer_untrusted when the peer’s certificate is not the pinned one', async () => {
    await placeIn('c');
    await loginRefused('08004', 'region.peer_untrusted', /region c.*did not prove its identity/);
  });

  it('refuses 08004 region.peer_refused when the peer does not accept the link secret (it counts bad_proof)', async () => {
    const before = await metricValue(dMetrics, 'pgward_relay_refused_total', { reason: 'bad_proof' });
    await placeIn('d');
    await loginRefused('08004', 'region.peer_refused', /region d.*refused the gateway’s link/);
    expect(await metricValue(dMetrics, 'pgward_relay_refused_total', { reason: 'bad_proof' })).toBeGreaterThan(before);
  });

  it('refuses 58000 region.no_peer for a region no peer is configured for', async () => {
    await placeIn('z');
    await loginRefused('58000', 'region.no_peer', /region z.*no link configured/);
  });

  it('refuses a statement 08001 region.peer_unreachable once B is stopped, and nothing runs on A’s own connection', async () => {
    await placeIn('b');
    await waitFor(async () => (await runsOn()) === 'pgward:b', 10_000, 'sessions through A running on B again');
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    try {
      expect((await client.query<{ app: string }>("select current_setting('application_name') as app")).rows).toEqual([{ app: 'pgward:b' }]);
      await b!.stop();
      b = undefined;
      // Once A finds B gone (a fresh login is refused), the session's parked link is gone too.
      await waitFor(async () => (await loginError())?.code === '08001', 10_000, 'logins refused 08001 with B stopped');
      const sql = 'select count(*) from orders where id < 10';
      const refused = await client.query(sql).then(
        () => undefined,
        (error: Error & { code?: string }) => error,
      );
      expect(refused?.code).toBe('08001');
      expect(refused?.message).toMatch(/region b.*cannot reach that region’s data plane/);
      const [entry] = await auditedRuns(gateway, agent.credential.id, sql, 1);
      expect(entry).toMatchObject({ event: 'blocked', decision_rule: 'region.peer_unreachable', ran_on: null, upstream_region: null, region: 'a' });
      expect(await backends('pgward:a')).toEqual([]);
    } finally {
      await client.end().catch(() => undefined);
    }
  });
});
