/**
 * Regions (docs/regions.md): proxy A of region `a` relays the statements of a database whose
 * pool_region is `b` to proxy B of region `b` over a TLS 1.3 link (B's certificate pinned, the link
 * secret proven for the session), so they run on B's upstream connection; A decides and audits
 * them, once. The hosted MCP of A's process (the api, configured by PGWARD_REGION,
 * PGWARD_REGION_PEERS and PGWARD_RELAY_SECRET as a deployment's) relays the same way. Each proxy
 * has its own generated TLS material; both share the state database, the decision bus and the
 * machine's PostgreSQL. When no link can be had the statement (or the login) is refused, fail
 * closed, on the wire and on MCP, and nothing runs on A's own connection.
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
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
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
/** A's hosted MCP endpoint. */
let mcpUrl: string;
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
  const pinned: [region: string, port: number, fingerprint: Buffer][] = [
    ['b', bPort, ofB!.fingerprint],
    // B's listener, pinned to a certificate it does not have.
    ['c', bPort, stranger!.fingerprint],
    ['d', dPort, ofD!.fingerprint],
  ];
  const peers = new Map(pinned.map(([region, port, fingerprint]): [string, LinkPeer] => [region, { region, host: '127.0.0.1', port, trust: { fingerprint } }]));
  // A's hosted MCP reads the same peers from its process's configuration, as a deployment's does.
  const apiEnv = {
    PGWARD_REGION: 'a',
    PGWARD_RELAY_SECRET: secret.toString('base64url'),
    PGWARD_REGION_PEERS: JSON.stringify(Object.fromEntries(pinned.map(([region, port, fingerprint]) => [region, { host: '127.0.0.1', port, fingerprint: `sha256:${fingerprint.toString('hex')}` }]))),
  };
  gateway = await startGateway('regions', undefined, 60_000, apiEnv, undefined, {}, {
    proxy: { tls: own!.tls, region: 'a', proxyId: 'proxy-a', upstreamApplicationName: 'pgward:a', upstreamConnectTimeoutMs: 2_000, relay: { peers, secrets: [secret] } },
  });
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
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
  it('runs a query of A’s hosted MCP on B’s upstream connection, audited once by A as relayed to b', async () => {
    const locker = new pg.Client({ connectionString: databaseUrl });
    await locker.connect();
    try {
      const sql = "select current_setting('application_name') as app, count(*)::int as n from orders where id > 0";
      await locker.query('begin; lock table orders in access exclusive mode');
      const ran = withAgentMcp(mcpUrl, agent, (mcp) => callTool(mcp, 'query', { sql }));
      await waitFor(async () => (await waiting('pgward:b')) === 1, 10_000, 'the MCP’s relayed statement waiting on B’s connection');
      expect(await waiting('pgward:a')).toBe(0);
      await locker.query('commit');
      const result = await ran;
      expect(result.isError, textOf(result)).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ rows: [['pgward:b', 1000]], event: 'query' });
      // The MCP opened no connection of its own to the database, nor did proxy A.
      expect(await backends('pgward-mcp')).toEqual([]);
      expect(await backends('pgward:a')).toEqual([]);

      const [entry] = await auditedRuns(gateway, agent.credential.id, sql, 1, 'mcp');
      expect(entry).toMatchObject({ source: 'mcp', region: 'a', ran_on: 'relay', replica_id: null, upstream_region: 'b', event: 'query', cache_status: 'bypass' });
      // Exactly one decision of it reached the bus: B publishes none.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(decisionsOfCredential(gateway, agent.credential.id).filter((decision) => recordsText(decision.sql, sql))).toHaveLength(1);
      expect(await auditedRuns(gateway, agent.credential.id, sql, 1, 'mcp')).toHaveLength(1);
    } finally {
      await locker.end();
    }
  });

  it('keeps a masked column masked through the relay, and answers the repeat from A’s cache', async () => {
    const masked = await registerAgentWith(gateway, { name: 'emails redacted', read_only: true, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'redact' } });
    const sql = 'select id, email from customers order by id limit 2';
    const results = await withAgentMcp(mcpUrl, masked, async (mcp) => [await callTool(mcp, 'query', { sql }), await callTool(mcp, 'query', { sql })]);
    for (const result of results) {
      expect(result.isError, textOf(result)).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ rows: [[1, '[redacted]'], [2, '[redacted]']], event: 'masked', decision_rule: 'masked_columns.masked' });
      expect(JSON.stringify(result)).not.toMatch(/user\d+@example\.com/);
    }
    const entries = await auditedRuns(gateway, masked.credential.id, sql, 2, 'mcp');
    expect(entries.map((e) => [e.event, e.cache_status, e.ran_on, e.upstream_region, e.region])).toEqual([
      ['masked', 'miss', 'relay', 'b', 'a'],
      ['masked', 'hit', 'cache', null, 'a'],
    ]);
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

  let mcpStatements = 0;
  /** A query through A's hosted MCP, once its view has the database's new region, is refused with `code` under `rule` (readable, naming no host, pin or secret), audited blocked with ran_on null; the MCP opened no connection of its own. */
  async function mcpRefused(code: string, rule: string, says: RegExp): Promise<void> {
    let result: Awaited<ReturnType<typeof callTool>> | undefined;
    let sql = '';
    await waitFor(async () => {
      sql = `select count(*) from orders where id < ${++mcpStatements}`;
      result = await withAgentMcp(mcpUrl, agent, (mcp) => callTool(mcp, 'query', { sql }));
      return textOf(result).includes(`(decision_rule ${rule}, SQLSTATE ${code})`);
    }, 10_000, `an MCP query refused ${rule}`);
    expect(result!.isError).toBe(true);
    const lead = `The statement did not run (decision_rule ${rule}, SQLSTATE ${code}): `;
    expect(textOf(result!).slice(0, lead.length)).toBe(lead);
    expect(textOf(result!)).toMatch(says);
    expect(textOf(result!)).not.toMatch(/127\.0\.0\.1|sha256|fingerprint|secret|proxy-|:mcp/);
    expect(result!._meta).toMatchObject({ 'pgward/decision': { event: 'blocked', decision_rule: rule, sqlstate: code } });
    const [entry] = await auditedRuns(gateway, agent.credential.id, sql, 1, 'mcp');
    expect(entry).toMatchObject({ event: 'blocked', decision_rule: rule, ran_on: null, upstream_region: null, region: 'a' });
    expect(await backends('pgward-mcp')).toEqual([]);
  }

  it('refuses 08004 region.peer_untrusted when the peer’s certificate is not the pinned one', async () => {
    await placeIn('c');
    await loginRefused('08004', 'region.peer_untrusted', /region c.*did not prove its identity/);
    await mcpRefused('08004', 'region.peer_untrusted', /region c.*did not prove its identity/);
  });

  it('refuses 08004 region.peer_refused when the peer does not accept the link secret (it counts bad_proof)', async () => {
    const before = await metricValue(dMetrics, 'pgward_relay_refused_total', { reason: 'bad_proof' });
    await placeIn('d');
    await loginRefused('08004', 'region.peer_refused', /region d.*refused the gateway’s link/);
    await mcpRefused('08004', 'region.peer_refused', /region d.*refused the gateway’s link/);
    expect(await metricValue(dMetrics, 'pgward_relay_refused_total', { reason: 'bad_proof' })).toBeGreaterThan(before);
  });

  it('refuses 58000 region.no_peer for a region no peer is configured for', async () => {
    await placeIn('z');
    await loginRefused('58000', 'region.no_peer', /region z.*no link configured/);
    await mcpRefused('58000', 'region.no_peer', /region z.*no link configured/);
  });

  it('refuses 08001 region.peer_no_upstream when B cannot connect to the database', async () => {
    const { port, password } = new URL(databaseUrl);
    // A new address needs the password in the same request (the trust-authenticated test server takes any).
    const moveTo = (to: number) => gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: base, payload: { port: to, password: decodeURIComponent(password) || 'trust' } });
    await placeIn('b');
    expect((await moveTo(await freePort())).statusCode).toBe(200);
    try {
      await loginRefused('08001', 'region.peer_no_upstream', /region b.*no connection to it free/);
      await mcpRefused('08001', 'region.peer_no_upstream', /region b.*no connection to it free/);
    } finally {
      expect((await moveTo(Number(port || 5432))).statusCode).toBe(200);
    }
  });

  it('refuses a statement 08001 region.peer_unreachable once B is stopped, and nothing runs on A’s own connection; an MCP statement B was running when it stopped may have run, on the relay', async () => {
    await placeIn('b');
    await waitFor(async () => (await runsOn()) === 'pgward:b', 10_000, 'sessions through A running on B again');
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    const locker = new pg.Client({ connectionString: databaseUrl });
    await locker.connect();
    try {
      expect((await client.query<{ app: string }>("select current_setting('application_name') as app")).rows).toEqual([{ app: 'pgward:b' }]);
      const held = 'select count(*)::int as n from orders where id > 1';
      await locker.query('begin; lock table orders in access exclusive mode');
      const broken = withAgentMcp(mcpUrl, agent, (mcp) => callTool(mcp, 'query', { sql: held }));
      await waitFor(async () => (await waiting('pgward:b')) === 1, 10_000, 'the MCP’s relayed statement waiting on B’s connection');
      await b!.stop();
      b = undefined;
      const lost = await broken;
      expect(lost.isError).toBe(true);
      expect(textOf(lost)).toBe('The connection to this credential’s database was lost after the statement was sent: it may have run (a write may have been committed), but its result could not be read.');
      const [mayHaveRun] = await auditedRuns(gateway, agent.credential.id, held, 1, 'mcp');
      expect(mayHaveRun).toMatchObject({ event: 'query', ran_on: 'relay', upstream_region: 'b', region: 'a', reason: expect.stringMatching(/^the connection closed before the statement's end was seen; it may have run\./) });
      await locker.query('commit');
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
      await mcpRefused('08001', 'region.peer_unreachable', /region b.*cannot reach that region’s data plane/);
    } finally {
      await locker.end();
      await client.end().catch(() => undefined);
    }
  });
});
