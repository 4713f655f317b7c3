import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Fanout } from '../../src/bus/fanout.js';
import { connectNatsFanout } from '../../src/bus/nats-fanout.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { connectAgent, listenForAgents } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { replicaUnavailable, startStreamingReplica, type StreamingReplica } from '../support/streaming-replica.js';
import { admin } from '../support/pg.js';
import { auditedRuns } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

const serverUrl = process.env.PGWARD_TEST_PG_URL;
const unavailable = replicaUnavailable(serverUrl);
const CHECK_MS = 200;
const READ_YOUR_WRITES_MS = 1_500;

let gateway: TestGateway;
let replica: StreamingReplica;
let agent: AgentSecrets;
let otherAgent: AgentSecrets;
let client: pg.Client;
let base: string;
let replicaId: string;
/** Chains the decisions into the audit trail, which `auditedRuns` reads over REST. */
let ingest: RunningIngest;
/** The proxy and the API as in a split deployment: each on its own NATS connection of the invalidation fan-out. */
let fanouts: Fanout[] = [];
let mcp: Client;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function onReplica(sql = 'select pg_is_in_recovery() as r', values: unknown[] = []): Promise<boolean> {
  const { rows } = await client.query<{ r: boolean }>(sql, values);
  return rows[0]!.r;
}

/** Where a read through the hosted MCP ran: true on the replica. */
async function mcpOnReplica(sql = 'select pg_is_in_recovery() as r'): Promise<boolean> {
  const result = await mcp.callTool({ name: 'query', arguments: { sql } });
  expect(result.isError ?? false).toBe(false);
  return (result.structuredContent as { rows: unknown[][] }).rows[0]![0] as boolean;
}

/** Reads answered by the replica within `ms` (the health window), tolerating the errors of reads sent to it while it went away. */
async function settlesOn(expected: boolean, ms: number): Promise<void> {
  await waitFor(() => onReplica().then((r) => r === expected, () => false), ms, `reads on ${expected ? 'the replica' : 'the primary'}`);
}

describe.skipIf(unavailable !== undefined)(`read replicas: auto_read_routing against a real streaming replica${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  beforeAll(async () => {
    const subject = `pgward.test.cache.${randomUUID()}`;
    fanouts = await Promise.all([0, 1].map(() => connectNatsFanout({ url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', subject })));
    gateway = await startGateway(
      'replicas',
      serverUrl,
      60_000,
      // The API's hosted MCP probes and routes with the proxy's settings.
      { PGWARD_REPLICA_CHECK_MS: String(CHECK_MS), PGWARD_REPLICA_FAILURES: '10', PGWARD_REPLICA_SUCCESSES: '2', PGWARD_REPLICA_MAX_LAG_MS: '30000', PGWARD_READ_YOUR_WRITES_MS: String(READ_YOUR_WRITES_MS) },
      undefined,
      {
        checkIntervalMs: CHECK_MS,
        // Ten failed probes (2 s) to leave: the reads sent to it meanwhile show the fallback to the primary.
        thresholds: { failuresToEject: 10, successesToRestore: 2, maxLagMs: 30_000 },
        readYourWritesMs: READ_YOUR_WRITES_MS,
      },
      { proxy: { cacheFanout: fanouts[0]! }, apiCacheFanout: fanouts[1]! },
    );
    ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
    replica = await startStreamingReplica(serverUrl!);
    const listed = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
    const databaseId = (listed.json() as { databases: { id: string }[] }).databases[0]!.id;
    base = `/v1/projects/${gateway.projectId}/databases/${databaseId}`;
    const added = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `${base}/replicas`, payload: { host: '127.0.0.1', port: replica.port, ssl_mode: 'disable' } });
    expect(added.statusCode).toBe(201);
    replicaId = (added.json() as { id: string }).id;
    agent = await gateway.register('reader');
    otherAgent = await gateway.register('other reader');
    client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    mcp = await connectAgent(`${await listenForAgents(gateway)}/mcp`, agent.mcp_token, 'pgward-replicas-test');
  }, 300_000);

  afterAll(async () => {
    await client?.end().catch(() => undefined);
    await mcp?.close();
    await ingest?.stop();
    await gateway?.stop();
    await Promise.all(fanouts.map((fanout) => fanout.close()));
    await replica?.destroy();
  }, 120_000);

  it('sends nothing to the replica while the database does not route reads', async () => {
    // The replica is registered and up: only auto_read_routing sends reads to it.
    await new Promise((resolve) => setTimeout(resolve, CHECK_MS * 4));
    expect(await onReplica()).toBe(false);
    expect(await mcpOnReplica()).toBe(false);
  });

  it('with auto_read_routing, a SELECT outside a transaction runs on the replica, on both protocols', async () => {
    const changed = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: base, payload: { auto_read_routing: true } });
    expect(changed.statusCode).toBe(200);
    await settlesOn(true, 10_000);
    expect(await onReplica('select pg_is_in_recovery() as r where $1::int = 1', [1])).toBe(true);
    const { rows } = await client.query<{ n: string }>('select count(*) as n from orders');
    expect(rows[0]!.n).toBe('1000');
  });

  it('records where each statement ran: the replica and its id for a routed SELECT, the primary for a write (StatementDecided v2)', async () => {
    const read = 'select count(*) as n from orders where id < 100';
    const write = "update orders set customer = customer where id = 1";
    await settlesOn(true, 10_000);
    await new Promise((resolve) => setTimeout(resolve, READ_YOUR_WRITES_MS + 100));
    await client.query(read);
    await client.query(write);
    const [routed] = await auditedRuns(gateway, agent.credential.id, read, 1);
    expect(routed).toMatchObject({ event: 'query', ran_on: 'replica', replica_id: replicaId, region: 'local', upstream_region: 'local', cache_status: 'bypass' });
    const [written] = await auditedRuns(gateway, agent.credential.id, write, 1);
    expect(written).toMatchObject({ ran_on: 'primary', replica_id: null, upstream_region: 'local' });
    await new Promise((resolve) => setTimeout(resolve, READ_YOUR_WRITES_MS + 100));
  });

  it('a write runs on the primary, and the session reads its own writes from the primary for the window', async () => {
    await client.query("insert into orders values (5001, 'ryw', 1)");
    expect(await onReplica()).toBe(false);
    const { rows } = await client.query<{ customer: string; r: boolean }>('select customer, pg_is_in_recovery() as r from orders where id = 5001');
    expect(rows).toEqual([{ customer: 'ryw', r: false }]);
    await new Promise((resolve) => setTimeout(resolve, READ_YOUR_WRITES_MS + 100));
    expect(await onReplica()).toBe(true);
    // Streamed: the replica has the row too.
    await waitFor(async () => (await client.query('select 1 from orders where id = 5001')).rowCount === 1, 20_000, 'the row on the replica');
  });

  it('a transaction, and a statement with the primary hint, run on the primary', async () => {
    expect(await onReplica('/* pgward:primary */ select pg_is_in_recovery() as r')).toBe(false);
    expect(await onReplica('select pg_is_in_recovery() as r /* PGWARD:PRIMARY */')).toBe(false);
    await client.query('begin');
    expect(await onReplica()).toBe(false);
    await client.query('commit');
    await new Promise((resolve) => setTimeout(resolve, READ_YOUR_WRITES_MS + 100));
    expect(await onReplica()).toBe(true);
  });

  /**
   * Runs `work` with the replica's replay paused once it has replayed everything so far: a read
   * routed to it would not see a write made meanwhile (its lag stays under maxLagMs, so it stays in
   * rotation).
   */
  async function replayPaused(work: () => Promise<void>): Promise<void> {
    const url = new URL(gateway.upstream.url);
    url.port = String(replica.port);
    const standby = new pg.Client({ connectionString: url.toString() });
    await standby.connect();
    try {
      const marker = `marker ${randomUUID()}`;
      await admin(gateway.upstream.url, (primary) => primary.query('update orders set customer = $1 where id = 3', [marker]));
      await waitFor(async () => (await standby.query('select 1 from orders where id = 3 and customer = $1', [marker])).rowCount === 1, 20_000, 'the marker on the replica');
      await standby.query('select pg_wal_replay_pause()');
      await work();
    } finally {
      await standby.query('select pg_wal_replay_resume()');
      await standby.end();
    }
  }

  // Issue 22 (hole 1): the window was per session. A pooled client whose read went out on another
  // connection than its write, or an agent whose write went through the hosted MCP, read from a
  // replica that had not replayed the write yet.
  it('another session of the same credential (a pool’s other connection) reads the write from the primary; another credential’s reads stay on the replica', async () => {
    const other = new pg.Client({ connectionString: otherAgent.connection_string });
    const pool = new pg.Pool({ connectionString: agent.connection_string, max: 2 });
    await other.connect();
    const [writing, reading] = [await pool.connect(), await pool.connect()];
    try {
      await sleep(READ_YOUR_WRITES_MS + 200);
      expect((await reading.query<{ r: boolean }>('select pg_is_in_recovery() as r')).rows[0]!.r).toBe(true);
      await replayPaused(async () => {
        await writing.query("update orders set customer = 'pooled' where id = 5001");
        const { rows } = await reading.query<{ customer: string; r: boolean }>('select customer, pg_is_in_recovery() as r from orders where id = 5001');
        expect(rows).toEqual([{ customer: 'pooled', r: false }]);
        expect((await other.query<{ r: boolean }>('select pg_is_in_recovery() as r')).rows[0]!.r).toBe(true);
        // The extended protocol is held alike.
        await writing.query({ text: 'update orders set customer = $1 where id = 5001', values: ['pooled again'] });
        const extended = await reading.query<{ customer: string; r: boolean }>({ text: 'select customer, pg_is_in_recovery() as r from orders where id = $1', values: [5001] });
        expect(extended.rows).toEqual([{ customer: 'pooled again', r: false }]);
      });
      await sleep(READ_YOUR_WRITES_MS + 200);
      expect((await reading.query<{ r: boolean }>('select pg_is_in_recovery() as r')).rows[0]!.r).toBe(true);
    } finally {
      writing.release();
      reading.release();
      await pool.end();
      await other.end();
    }
  });

  it('a write through the hosted MCP holds the credential’s wire reads on the primary (split: the note crosses NATS)', async () => {
    await sleep(READ_YOUR_WRITES_MS + 200);
    await settlesOn(true, 10_000);
    await replayPaused(async () => {
      const update = await mcp.callTool({ name: 'query', arguments: { sql: "update orders set customer = 'from mcp' where id = 5001" } });
      expect((update.structuredContent as { command: string }).command).toBe('UPDATE 1');
      const { rows } = await client.query<{ customer: string; r: boolean }>('select customer, pg_is_in_recovery() as r from orders where id = 5001');
      expect(rows).toEqual([{ customer: 'from mcp', r: false }]);
    });
    await sleep(READ_YOUR_WRITES_MS + 200);
    expect(await onReplica()).toBe(true);
  });

  // Red team (redteam3): the window opened when a write was decided, not when it ran and ended. An
  // Execute of a write prepared earlier (a named statement: Bind and Execute only) opened none, and a
  // write that waited longer than the window (a row lock) let the very next read go to a replica.
  it('an Execute of a write prepared earlier keeps the next read on the primary', async () => {
    const bump = { name: 'bump', text: 'update orders set total = total + 1 where id = $1' };
    await client.query({ ...bump, values: [1] });
    await sleep(READ_YOUR_WRITES_MS + 200);
    expect(await onReplica()).toBe(true);
    // Bind and Execute of the statement prepared above: no Parse, so nothing is decided anew.
    expect((await client.query({ ...bump, values: [1] })).rowCount).toBe(1);
    expect(await onReplica()).toBe(false);
    await sleep(READ_YOUR_WRITES_MS + 200);
    expect(await onReplica()).toBe(true);
  });

  for (const queryMode of ['simple', 'extended'] as const) {
    it(`a write that runs longer than the window keeps the next read on the primary (${queryMode} protocol)`, async () => {
      const locker = new pg.Client({ connectionString: gateway.upstream.url });
      await locker.connect();
      try {
        await locker.query('begin');
        await locker.query('select 1 from orders where id = 2 for update');
        const id = queryMode === 'simple' ? '2' : '$1';
        const writing = client.query({ text: `update orders set customer = 'waited ${queryMode}' where id = ${id}`, ...(queryMode === 'extended' ? { values: [2] } : {}), queryMode } as pg.QueryConfig);
        await sleep(READ_YOUR_WRITES_MS + 500);
        await locker.query('commit');
        expect((await writing).rowCount).toBe(1);
        expect(await onReplica()).toBe(false);
        const { rows } = await client.query<{ customer: string }>('select customer from orders where id = 2');
        expect(rows).toEqual([{ customer: `waited ${queryMode}` }]);
        await sleep(READ_YOUR_WRITES_MS + 200);
        expect(await onReplica()).toBe(true);
      } finally {
        await locker.end();
      }
    });
  }

  describe('the hosted MCP routes its reads as the wire does', () => {
    it('a read runs on the replica, in turn, and is audited ran_on replica with its replica_id', async () => {
      await sleep(READ_YOUR_WRITES_MS + 200);
      await waitFor(() => mcpOnReplica().then((r) => r, () => false), 10_000, 'MCP reads on the replica');
      const read = 'select pg_is_in_recovery() as r, count(*) as n from orders where id < 50';
      const result = await mcp.callTool({ name: 'query', arguments: { sql: read } });
      expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual([[true, '49']]);
      const [routed] = await auditedRuns(gateway, agent.credential.id, read, 1, 'mcp');
      expect(routed).toMatchObject({ event: 'query', ran_on: 'replica', replica_id: replicaId, upstream_region: 'local' });
    });

    it('caches nothing of a database that routes reads: a repeated read runs on the replica again, cache_status bypass', async () => {
      const read = 'select count(*) as n from orders where id < 7';
      for (let i = 0; i < 2; i += 1) {
        const result = await mcp.callTool({ name: 'query', arguments: { sql: read } });
        expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual([['6']]);
      }
      const entries = await auditedRuns(gateway, agent.credential.id, read, 2, 'mcp');
      expect(entries.map((entry) => [entry.ran_on, entry.replica_id, entry.cache_status])).toEqual([
        ['replica', replicaId, 'bypass'],
        ['replica', replicaId, 'bypass'],
      ]);
    });

    it('a write runs on the primary, audited so, and the credential’s next MCP read reads it from the primary within the window', async () => {
      await sleep(READ_YOUR_WRITES_MS + 200);
      expect(await mcpOnReplica()).toBe(true);
      const write = "update orders set customer = 'mcp ryw' where id = 5001";
      await replayPaused(async () => {
        const update = await mcp.callTool({ name: 'query', arguments: { sql: write } });
        expect((update.structuredContent as { command: string }).command).toBe('UPDATE 1');
        const read = await mcp.callTool({ name: 'query', arguments: { sql: 'select customer, pg_is_in_recovery() as r from orders where id = 5001' } });
        expect((read.structuredContent as { rows: unknown[][] }).rows).toEqual([['mcp ryw', false]]);
        // Another credential's wire reads stay on the replica.
        const other = new pg.Client({ connectionString: otherAgent.connection_string });
        await other.connect();
        expect((await other.query<{ r: boolean }>('select pg_is_in_recovery() as r')).rows[0]!.r).toBe(true);
        await other.end();
      });
      const [written] = await auditedRuns(gateway, agent.credential.id, write, 1, 'mcp');
      expect(written).toMatchObject({ ran_on: 'primary', replica_id: null });
      await sleep(READ_YOUR_WRITES_MS + 200);
      expect(await mcpOnReplica()).toBe(true);
    });

    it('a wire write of the credential holds its MCP reads on the primary (split: the note crosses NATS)', async () => {
      await sleep(READ_YOUR_WRITES_MS + 200);
      expect(await mcpOnReplica()).toBe(true);
      await replayPaused(async () => {
        await client.query("update orders set customer = 'wire ryw' where id = 5001");
        const read = await mcp.callTool({ name: 'query', arguments: { sql: 'select customer, pg_is_in_recovery() as r from orders where id = 5001' } });
        expect((read.structuredContent as { rows: unknown[][] }).rows).toEqual([['wire ryw', false]]);
      });
      await sleep(READ_YOUR_WRITES_MS + 200);
      expect(await mcpOnReplica()).toBe(true);
    });

    it('the primary hint runs an MCP read on the primary', async () => {
      expect(await mcpOnReplica('/* pgward:primary */ select pg_is_in_recovery() as r')).toBe(false);
      expect(await mcpOnReplica('select pg_is_in_recovery() as r /* PGWARD:Primary */')).toBe(false);
      expect(await mcpOnReplica()).toBe(true);
    });
  });

  it('the replica stopped: reads fall back to the primary within the health window; restarted: they return', async () => {
    await new Promise((resolve) => setTimeout(resolve, READ_YOUR_WRITES_MS + 100));
    expect(await onReplica()).toBe(true);
    await replica.stop();
    // Still in rotation for a moment: a read that gets no connection from the replica runs on the primary.
    for (let i = 0; i < 5; i += 1) expect(await onReplica()).toBe(false);
    for (let i = 0; i < 3; i += 1) expect(await mcpOnReplica()).toBe(false);
    await waitFor(async () => (await gateway.metrics.getSingleMetric('pgward_proxy_replica_healthy')!.get()).values[0]?.value === 0, 5_000, 'the replica out of rotation');
    for (let i = 0; i < 5; i += 1) expect(await onReplica()).toBe(false);
    expect(await mcpOnReplica()).toBe(false);
    await replica.start();
    await settlesOn(true, 10_000);
    await waitFor(() => mcpOnReplica().then((r) => r, () => false), 10_000, 'MCP reads back on the replica');
    const metrics = await gateway.metrics.getMetricsAsJSON();
    const routed = metrics.find((metric) => metric.name === 'pgward_proxy_routed_statements_total')!.values;
    expect(routed.find((value) => value.labels.target === 'replica')!.value).toBeGreaterThan(0);
    const transitions = metrics.find((metric) => metric.name === 'pgward_proxy_replica_transitions_total')!.values;
    expect(transitions.find((value) => value.labels.to === 'out')!.value).toBe(1);
    expect(transitions.find((value) => value.labels.to === 'in')!.value).toBe(2);
  }, 60_000);
});
