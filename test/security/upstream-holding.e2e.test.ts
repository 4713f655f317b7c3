/**
 * Issue 16, class 4: holding the upstream. A statement whose client goes away is cancelled
 * upstream; every agent statement stops at the gateway's statement timeout (the smaller of the
 * policy's statement_timeout_ms and the database's query_timeout_ms), which the agent cannot lift;
 * and one credential holds at most its share of the pool (max_connections_per_credential, default
 * half), so another credential still logs in and queries while it holds results it does not read.
 * Checked on the real upstream through pg_stat_activity.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectAgent, listenForAgents, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { connectAgentClient, createPolicy, extendedTurn, patchDatabase, registerOn } from '../support/proxy-agents.js';
import { CANCEL_GRACE_MS } from '../../proxy/statement-deadline.js';
import { loginError, waitFor } from '../support/wire.js';

const LONG = 'select count(*) as holding_long from generate_series(1, 2000000000)';
/** About a gigabyte of rows: far more than the socket buffers between the upstream and a client that does not read. */
const LARGE = "select repeat('x', 1000) as holding_large from generate_series(1, 1000000)";

let gateway: TestGateway;
let admin: pg.Client;
let mcpBase: string;

/** What identifies a statement upstream, which runs it as the gateway forwards it (functions schema-qualified): its column alias. */
const markerOf = (sql: string): string => /as (holding_\w+)/.exec(sql)![1]!;

/** Upstream backends of the proxy and the MCP running `sql` right now. */
async function running(sql: string): Promise<number> {
  const result = await admin.query<{ n: number }>(
    "select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name like 'pgward%' and state = 'active' and query like '%' || $1 || '%'",
    [markerOf(sql)],
  );
  return result.rows[0]!.n;
}


const agentWith = async (name: string, policy: Record<string, unknown>): Promise<AgentSecrets> =>
  registerOn(gateway, await createPolicy(gateway, { name, read_only: true, allowed_tables: ['public.orders'], ...policy }), name);

const failureOf = (promise: Promise<unknown>): Promise<{ code?: string; message?: string } | undefined> =>
  promise.then(
    () => undefined,
    (error: { code?: string; message?: string }) => error,
  );

beforeAll(async () => {
  gateway = await startGateway('upstream_holding');
  mcpBase = `${await listenForAgents(gateway)}/mcp`;
  admin = new pg.Client({ connectionString: gateway.upstream.url });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await gateway?.stop();
});

describe('a statement whose client goes away', () => {
  it.each(['simple', 'extended'])('is cancelled upstream (%s protocol)', async (protocol) => {
    const agent = await agentWith(`disconnect ${protocol}`, { statement_timeout_ms: 600_000 });
    const client = await connectAgentClient(agent);
    const outcome = protocol === 'simple' ? failureOf(client.query(LONG)) : extendedTurn(client, LONG);
    await waitFor(async () => (await running(LONG)) === 1, 5_000, 'the statement to run upstream');
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    await outcome.catch(() => undefined);
    // Cancelled at once, and again up to 5 s later should the first cancel reach the backend between two messages.
    await waitFor(async () => (await running(LONG)) === 0, 7_000, 'the upstream statement to stop');
  });
});

describe('the statement timeout', () => {
  it('is a policy field with a documented default, shown to the agent', async () => {
    const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: { name: 'defaults' } });
    expect(created.statusCode).toBe(201);
    expect((created.json() as { statement_timeout_ms: number }).statement_timeout_ms).toBe(30_000);
    const refused = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: { name: 'unbounded', statement_timeout_ms: 0 } });
    expect(refused.statusCode).toBe(400);
    const agent = await agentWith('shown', { statement_timeout_ms: 1_234 });
    const mcp = await connectAgent(mcpBase, agent.mcp_token, 'shown');
    try {
      const permissions = await callTool(mcp, 'my_permissions');
      expect(textOf(permissions)).toContain('"statement_timeout_ms":1234');
    } finally {
      await mcp.close();
    }
  });

  it.each([
    ['simple', (client: pg.Client, sql: string) => failureOf(client.query(sql))],
    ['extended', async (client: pg.Client, sql: string) => (await extendedTurn(client, sql)).error],
  ])("cancels a policy's statement past statement_timeout_ms, whatever the agent SETs (%s protocol)", async (_protocol, run) => {
    const agent = await agentWith(`timeout ${_protocol}`, { statement_timeout_ms: 1_000 });
    const client = await connectAgentClient(agent);
    try {
      const lifts = ['SET statement_timeout = 0', "select set_config('statement_timeout', '0', false)", 'SET statement_timeout = 600000'];
      for (const lift of lifts) {
        await client.query(lift);
        const started = Date.now();
        const error = await run(client, LONG);
        expect(error?.code, lift).toBe('57014');
        expect(error?.message).toMatch(/^canceling statement due to statement timeout: this credential’s statements may run 1000 ms/);
        expect(Date.now() - started).toBeLessThan(4_000);
        // The backend reports itself idle just after the client has its error.
        await waitFor(async () => (await running(LONG)) === 0, 2_000, 'the upstream statement to stop');
        // The session goes on.
        expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
      }
      // Each lift, the long statement, the count: the audit trail says which statements the gateway cancelled.
      const cancelled = (await gateway.decisionsOf(agent.credential.id, lifts.length * 3)).filter((decision) => decision.decision_rule === 'statement_timeout');
      expect(cancelled.map((decision) => [decision.sql, decision.reason])).toEqual(
        lifts.map(() => [LONG, 'the statement ran and failed upstream. the gateway cancelled it at the statement timeout (1000 ms; rule statement_timeout).']),
      );
    } finally {
      await client.end();
    }
  });

  it("takes the database's query_timeout_ms when it is smaller", async () => {
    await patchDatabase(gateway, { query_timeout_ms: 1_000 });
    try {
      const agent = await agentWith('database timeout', { statement_timeout_ms: 600_000 });
      const client = await connectAgentClient(agent);
      try {
        await client.query('SET statement_timeout = 0');
        const started = Date.now();
        expect((await failureOf(client.query(LONG)))?.code).toBe('57014');
        expect(Date.now() - started).toBeLessThan(4_000);
      } finally {
        await client.end();
      }
    } finally {
      await patchDatabase(gateway, { query_timeout_ms: 0 });
    }
  });

  it('stops the statement of a client that stopped reading its result', async () => {
    const agent = await agentWith('stalled reader', { statement_timeout_ms: 3_000 });
    const client = await connectAgentClient(agent);
    const started = Date.now();
    const outcome = failureOf(client.query(LARGE));
    const stream = (client as unknown as { connection: { stream: { pause(): void; resume(): void } } }).connection.stream;
    stream.pause();
    // Blocked writing to the gateway, which stopped reading it while the client does not read.
    await waitFor(
      async () => (await admin.query("select 1 from pg_stat_activity where datname = current_database() and query like '%' || $1 || '%' and wait_event = 'ClientWrite'", [markerOf(LARGE)])).rowCount === 1,
      2_500,
      'the upstream backend to block writing',
    );
    await waitFor(async () => (await running(LARGE)) === 0, 3_000 + CANCEL_GRACE_MS + 3_000, 'the upstream statement to stop');
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(3_000);
    stream.resume();
    const error = await outcome;
    // PostgreSQL acts on the cancel there or not, depending on where the backend is blocked: cancelled
    // at the limit (57014), or else the session is ended and the connection dropped CANCEL_GRACE_MS
    // later (the FATAL 57014 waits behind the unread rows, so the client sees its connection end).
    if (error?.code === '57014') expect(elapsed).toBeLessThan(3_000 + CANCEL_GRACE_MS);
    else {
      expect(error?.message).toBe('Connection terminated unexpectedly');
      expect(elapsed).toBeGreaterThanOrEqual(3_000 + CANCEL_GRACE_MS - 500);
    }
    await client.end().catch(() => undefined);
  });

  it('applies on the hosted MCP query tool', async () => {
    const agent = await agentWith('mcp timeout', { statement_timeout_ms: 1_000 });
    const mcp = await connectAgent(mcpBase, agent.mcp_token, 'mcp timeout');
    try {
      const started = Date.now();
      const result = await callTool(mcp, 'query', { sql: LONG });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain('57014');
      expect(Date.now() - started).toBeLessThan(4_000);
      const briefing = await callTool(mcp, 'briefing');
      expect((briefing.structuredContent as { caps: { statement_timeout_ms: number } }).caps.statement_timeout_ms).toBe(1_000);
    } finally {
      await mcp.close();
    }
  });
});

describe('one credential cannot take the whole pool', () => {
  it('ten sessions of one credential holding unread results leave connections for another credential', async () => {
    await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 1_000 } });
    const hog = await agentWith('hog', {});
    const other = await agentWith('other', {});
    const hogs: pg.Client[] = [];
    try {
      for (let i = 0; i < 10; i++) hogs.push(await connectAgentClient(hog));
      const outcomes = hogs.map((client) => {
        const outcome = failureOf(client.query(LARGE));
        // Stops reading: the upstream backend blocks once the buffers between them are full.
        (client as unknown as { connection: { stream: { pause(): void } } }).connection.stream.pause();
        return outcome;
      });
      // Half the pool (the default max_connections_per_credential) runs the hog's statements; the rest of its sessions wait.
      await waitFor(async () => (await running(LARGE)) === 5, 10_000, 'five of the hog’s statements to run');
      expect(await loginError(hog.connection_string)).toBe('53300');
      const started = Date.now();
      const client = await connectAgentClient(other);
      try {
        expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
      } finally {
        await client.end();
      }
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(await running(LARGE)).toBe(5);
      for (const client of hogs) (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
      await Promise.all(outcomes);
      await waitFor(async () => (await running(LARGE)) === 0, 10_000, 'the hog’s statements to stop');
    } finally {
      for (const client of hogs) await client.end().catch(() => undefined);
      await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } });
    }
  });

  it("refuses a credential's statement beyond its limit with 53300, and serves it once one of its connections is free", async () => {
    await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 4, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 1_500, max_connections_per_credential: 1 } });
    try {
      const agent = await agentWith('one at a time', {});
      const [first, second] = [await connectAgentClient(agent), await connectAgentClient(agent)];
      try {
        await first.query('begin');
        await first.query('select 1');
        const refused = await failureOf(second.query('select count(*) from orders'));
        expect(refused?.code).toBe('53300');
        expect(refused?.message).toContain('max_connections_per_credential');
        await first.query('commit');
        expect((await second.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
      } finally {
        await first.end();
        await second.end();
      }
    } finally {
      await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } });
    }
  });

  it('holds on the hosted MCP too: a second call of the credential is refused while another credential is served', async () => {
    await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 4, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 1_500, max_connections_per_credential: 1 } });
    const busy = await agentWith('mcp busy', { statement_timeout_ms: 3_000 });
    const other = await agentWith('mcp other', {});
    const [a, b] = [await connectAgent(mcpBase, busy.mcp_token, 'busy'), await connectAgent(mcpBase, other.mcp_token, 'other')];
    try {
      const long = callTool(a, 'query', { sql: LONG });
      await waitFor(async () => (await running(LONG)) === 1, 5_000, 'the long statement to run upstream');
      const second = await callTool(a, 'query', { sql: 'select count(*)::int as n from orders' });
      expect(second.isError).toBe(true);
      expect(textOf(second)).toContain('max_connections_per_credential');
      const served = await callTool(b, 'query', { sql: 'select count(*)::int as n from orders' });
      expect((served.structuredContent as { rows: unknown[][] }).rows).toEqual([[1000]]);
      expect((await long).isError).toBe(true);
    } finally {
      await a.close();
      await b.close();
      await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } });
    }
  });
});
