/**
 * Read routing of a relayed database (docs/regions.md#read-routing) against a real streaming
 * replica of the machine's PostgreSQL: proxy A of region `a` routes a database kept in region `b`
 * with auto_read_routing; its reads outside transactions go over read links, on which proxy B takes
 * a healthy replica's connection of its own replica monitor; writes, transactions and the reads of
 * the read-your-writes window go over primary links. A decides and audits each statement where it
 * really ran.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import pg from 'pg';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy, type RunningProxy } from '../../proxy/server.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { freePort } from '../support/free-port.js';
import { connectAgent, listenForAgents } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { auditedRuns } from '../support/recorded.js';
import { relayMaterial, type RelayMaterial } from '../support/relay-material.js';
import { replicaUnavailable, startStreamingReplica, type StreamingReplica } from '../support/streaming-replica.js';
import { waitFor } from '../support/wire.js';

const serverUrl = process.env.PGWARD_TEST_PG_URL;
const unavailable = replicaUnavailable(serverUrl);
const secret = randomBytes(32);
const CHECK_MS = 200;
const READ_YOUR_WRITES_MS = 1_500;
const replicaOptions = { checkIntervalMs: CHECK_MS, thresholds: { failuresToEject: 3, successesToRestore: 2, maxLagMs: 30_000 }, readYourWritesMs: READ_YOUR_WRITES_MS };

let gateway: TestGateway;
let ingest: RunningIngest;
let b: RunningProxy | undefined;
let bMetrics: Registry;
let replica: StreamingReplica;
let replicaId: string;
let agent: AgentSecrets;
let client: pg.Client;
let materials: RelayMaterial[] = [];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function inRecovery(sql = 'select pg_is_in_recovery() as r'): Promise<boolean> {
  const { rows } = await client.query<{ r: boolean }>(sql);
  return rows[0]!.r;
}

async function settlesOn(expected: boolean, ms: number): Promise<void> {
  await waitFor(() => inRecovery().then((r) => r === expected, () => false), ms, `reads on ${expected ? 'B’s replica' : 'B’s primary'}`);
}

describe.skipIf(unavailable !== undefined)(`a relayed database’s reads on the peer’s replica${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  beforeAll(async () => {
    const [own, ofB] = (materials = await Promise.all([relayMaterial(), relayMaterial()]));
    const bPort = await freePort();
    // The API's hosted MCP is in region a too, and reaches b over its own relay links.
    const apiEnv = {
      PGWARD_REGION: 'a',
      PGWARD_REGION_PEERS: JSON.stringify({ b: { host: '127.0.0.1', port: bPort, fingerprint: `sha256:${ofB!.fingerprint.toString('hex')}` } }),
      PGWARD_RELAY_SECRET: secret.toString('base64url'),
      PGWARD_REPLICA_CHECK_MS: String(CHECK_MS),
      PGWARD_READ_YOUR_WRITES_MS: String(READ_YOUR_WRITES_MS),
    };
    gateway = await startGateway('relayreads', serverUrl, 60_000, apiEnv, undefined, replicaOptions, {
      proxy: {
        tls: own!.tls,
        region: 'a',
        proxyId: 'proxy-a',
        upstreamApplicationName: 'pgward:a',
        upstreamConnectTimeoutMs: 2_000,
        relay: { peers: new Map([['b', { region: 'b', host: '127.0.0.1', port: bPort, trust: { fingerprint: ofB!.fingerprint } }]]), secrets: [secret] },
      },
    });
    ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
    bMetrics = new Registry();
    b = await startProxy({
      store: gateway.api.store,
      bus: gateway.bus,
      keyring: parseKeyring(gateway.api.masterKey),
      logger: pino({ level: 'silent' }),
      metrics: bMetrics,
      host: '127.0.0.1',
      port: await freePort(),
      tls: ofB!.tls,
      region: 'b',
      proxyId: 'proxy-b',
      maxMessageBytes: 1024 * 1024,
      loginTimeoutMs: 60_000,
      upstreamApplicationName: 'pgward:b',
      upstreamConnectTimeoutMs: 2_000,
      replicas: replicaOptions,
      relay: { peers: new Map(), secrets: [secret], listen: { host: '127.0.0.1', port: bPort, tls: ofB!.tls } },
    });
    replica = await startStreamingReplica(serverUrl!);
    const listed = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
    const base = `/v1/projects/${gateway.projectId}/databases/${(listed.json() as { databases: { id: string }[] }).databases[0]!.id}`;
    const added = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `${base}/replicas`, payload: { host: '127.0.0.1', port: replica.port, ssl_mode: 'disable' } });
    expect(added.statusCode).toBe(201);
    replicaId = (added.json() as { id: string }).id;
    const changed = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: base, payload: { pool_region: 'b', auto_read_routing: true } });
    expect(changed.statusCode).toBe(200);
    agent = await gateway.register('relayed reader');
    await waitFor(
      async () => {
        const probe = new pg.Client({ connectionString: agent.connection_string });
        try {
          await probe.connect();
          return (await probe.query<{ app: string }>("select current_setting('application_name') as app")).rows[0]!.app === 'pgward:b';
        } catch {
          return false;
        } finally {
          await probe.end().catch(() => undefined);
        }
      },
      10_000,
      'sessions through A running on B',
    );
    client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
  }, 300_000);

  afterAll(async () => {
    await client?.end().catch(() => undefined);
    await b?.stop();
    await ingest?.stop();
    await gateway?.stop();
    await replica?.destroy();
    await Promise.all(materials.map((m) => rm(m.dir, { recursive: true, force: true })));
  }, 120_000);

  it('runs a read through A on B’s replica, audited by A as that replica’s in region b; A probes no replica of its own', async () => {
    await settlesOn(true, 10_000);
    const sql = "select pg_is_in_recovery() as r, current_setting('application_name') as app where 1 = 1";
    expect((await client.query(sql)).rows).toEqual([{ r: true, app: 'pgward:b' }]);
    // The extended protocol goes the same way.
    expect((await client.query('select pg_is_in_recovery() as r where $1::int = 1', [1])).rows).toEqual([{ r: true }]);
    const [entry] = await auditedRuns(gateway, agent.credential.id, sql, 1);
    expect(entry).toMatchObject({ event: 'query', region: 'a', ran_on: 'replica', replica_id: replicaId, upstream_region: 'b' });
    const probes = (await gateway.metrics.getSingleMetric('pgward_proxy_replica_probes_total')!.get()).values;
    expect(probes.reduce((sum, value) => sum + value.value, 0)).toBe(0);
  });

  it('runs a write on B’s primary (audited relay, b), then the credential’s reads there for the read-your-writes window', async () => {
    await sleep(READ_YOUR_WRITES_MS + 100);
    const write = 'update orders set customer = customer where id = 1';
    await client.query(write);
    expect(await inRecovery()).toBe(false);
    const [written] = await auditedRuns(gateway, agent.credential.id, write, 1);
    expect(written).toMatchObject({ event: 'query', region: 'a', ran_on: 'relay', replica_id: null, upstream_region: 'b' });
    await sleep(READ_YOUR_WRITES_MS + 100);
    expect(await inRecovery()).toBe(true);
  });

  it('runs a transaction’s reads and a read with the primary hint on B’s primary', async () => {
    await sleep(READ_YOUR_WRITES_MS + 100);
    expect(await inRecovery('/* pgward:primary */ select pg_is_in_recovery() as r')).toBe(false);
    await client.query('begin');
    try {
      expect(await inRecovery()).toBe(false);
    } finally {
      await client.query('commit');
    }
    await sleep(READ_YOUR_WRITES_MS + 100);
    expect(await inRecovery()).toBe(true);
  });

  it('the hosted MCP reads a relayed database on B’s replica over a read link, audited as that replica’s in region b; its writes on B’s primary', async () => {
    const mcp = await connectAgent(`${await listenForAgents(gateway)}/mcp`, agent.mcp_token, 'pgward-relayed-replicas-test');
    try {
      await sleep(READ_YOUR_WRITES_MS + 100);
      const read = "select pg_is_in_recovery() as r, current_setting('application_name') as app where 2 = 2";
      const result = await mcp.callTool({ name: 'query', arguments: { sql: read } });
      expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual([[true, 'pgward:b']]);
      const [entry] = await auditedRuns(gateway, agent.credential.id, read, 1, 'mcp');
      expect(entry).toMatchObject({ event: 'query', region: 'a', ran_on: 'replica', replica_id: replicaId, upstream_region: 'b' });
      const write = 'update orders set customer = customer where id = 2';
      await mcp.callTool({ name: 'query', arguments: { sql: write } });
      const after = await mcp.callTool({ name: 'query', arguments: { sql: 'select pg_is_in_recovery() as r' } });
      expect((after.structuredContent as { rows: unknown[][] }).rows).toEqual([[false]]);
      const [written] = await auditedRuns(gateway, agent.credential.id, write, 1, 'mcp');
      expect(written).toMatchObject({ region: 'a', ran_on: 'relay', replica_id: null, upstream_region: 'b' });
    } finally {
      await mcp.close();
    }
  });

  it('falls back to B’s primary once B’s replica is stopped, and returns to it once it is back', async () => {
    await sleep(READ_YOUR_WRITES_MS + 100);
    expect(await inRecovery()).toBe(true);
    await replica.stop();
    await settlesOn(false, 10_000);
    await replica.start();
    await settlesOn(true, 20_000);
  }, 60_000);
});
