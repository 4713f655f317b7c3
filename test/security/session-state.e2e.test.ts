/**
 * Issue 16, class 3: session state crossing credentials. A statement that changes the upstream
 * session beyond its transaction (SET, set_config(..., false), in any spelling, on either protocol)
 * pins the connection to the client's session, which resets it (DISCARD ALL) before another
 * session gets it; every other way to leave state behind is refused. One pooled connection
 * (max_connections 1) serves two credentials in turn, and the test checks on the upstream that it
 * is the same backend each time.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectAgent, listenForAgents, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { connectAgentClient, createPolicy, extendedTurn, patchDatabase, registerOn } from '../support/proxy-agents.js';

let gateway: TestGateway;
let admin: pg.Client;
let first: AgentSecrets;
let second: AgentSecrets;
let writer: AgentSecrets;
let mcpBase: string;
/** What a fresh session of the pool shows for each setting the tests change. */
const defaults = new Map<string, string>();
const SETTINGS = ['statement_timeout', 'timezone', 'datestyle', 'application_name'];

/** The upstream backends serving the proxy and the hosted MCP (not this test's own connection). */
async function upstreamBackends(): Promise<number[]> {
  const result = await admin.query<{ pid: number }>(
    "select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid() and application_name like 'pgward%' order by pid",
  );
  return result.rows.map((row) => row.pid);
}

async function settingsOf(client: pg.Client): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  // SHOW names its column as PostgreSQL spells the setting (TimeZone, DateStyle).
  for (const name of SETTINGS) seen.set(name, Object.values((await client.query<Record<string, string>>(`SHOW ${name}`)).rows[0]!)[0]!);
  return seen;
}

/** Runs `change` as the first credential, then checks as the second, on the one pooled connection, that nothing of it is left. */
async function secondSeesDefaults(change: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const a = await connectAgentClient(first);
  const backend = await upstreamBackends();
  expect(backend).toHaveLength(1);
  try {
    await change(a);
  } finally {
    await a.end();
  }
  const b = await connectAgentClient(second);
  try {
    expect(await settingsOf(b)).toEqual(defaults);
    // statement_timeout 1 ms would fail this with 57014.
    expect((await b.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
    // The same backend, reset rather than replaced.
    expect(await upstreamBackends()).toEqual(backend);
  } finally {
    await b.end();
  }
}

beforeAll(async () => {
  gateway = await startGateway('session_state');
  await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 1, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } });
  const reader = await createPolicy(gateway, { name: 'reader', read_only: true, allowed_tables: ['public.orders'] });
  first = await registerOn(gateway, reader, 'first');
  second = await registerOn(gateway, reader, 'second');
  writer = await registerOn(gateway, await createPolicy(gateway, { name: 'writer', read_only: false, allowed_tables: ['public.orders'] }), 'writer');
  mcpBase = `${await listenForAgents(gateway)}/mcp`;
  admin = new pg.Client({ connectionString: gateway.upstream.url });
  await admin.connect();
  const probe = await connectAgentClient(second);
  for (const [name, value] of await settingsOf(probe)) defaults.set(name, value);
  await probe.end();
});
afterAll(async () => {
  await admin?.end();
  await gateway?.stop();
});

describe('a session-level change pins the connection and is reset before another credential uses it', () => {
  it.each([
    ["set_config(..., false), the red team's reproducer", "select set_config('statement_timeout', '1', false)"],
    ['set_config of timezone, datestyle and application_name in one select', "select set_config('timezone', 'Pacific/Chatham', false), set_config('datestyle', 'German', false), set_config('application_name', 'evil', false)"],
    ['set_config with a computed is_local', "select set_config('TimeZone', 'Asia/Kathmandu', 1 > 2)"],
    ['set_config inside a subquery', "select 1 from (select set_config('statement_timeout', '1', false)) s"],
    ['SET after a leading comment', "/* tune */ SET statement_timeout = 1"],
    ['SET as the second statement of a query string', "select 1; set datestyle = 'German'"],
    ['SET SESSION', "SET SESSION TIME ZONE 'Pacific/Chatham'"],
  ])('simple protocol: %s', async (_label, sql) => {
    await secondSeesDefaults(async (client) => {
      await client.query(sql);
      // The change is in force for the session that made it.
      const now = await settingsOf(client);
      expect(now).not.toEqual(defaults);
    });
  });

  it('simple protocol: set_config inside a committed transaction', async () => {
    await secondSeesDefaults(async (client) => {
      await client.query('begin');
      await client.query("select set_config('datestyle', 'German', false)");
      await client.query('commit');
      expect((await client.query('show datestyle')).rows[0].DateStyle).toBe('German, DMY');
    });
  });

  it.each([
    ['SET', 'SET statement_timeout = 1'],
    ['set_config', "select set_config('application_name', 'evil', false)"],
  ])('extended protocol: %s', async (_label, sql) => {
    await secondSeesDefaults(async (client) => {
      const outcome = await extendedTurn(client, sql);
      expect(outcome.error).toBeUndefined();
      expect(await settingsOf(client)).not.toEqual(defaults);
    });
  });

  it('extended protocol: set_config with the value as a parameter', async () => {
    await secondSeesDefaults(async (client) => {
      await client.query('select set_config($1, $2, false)', ['statement_timeout', '1']).catch(() => undefined);
      await client.query("select set_config('timezone', $1, false)", ['Pacific/Chatham']);
      expect((await client.query('show timezone')).rows[0].TimeZone).toBe('Pacific/Chatham');
    });
  });

  it('SET LOCAL and set_config(..., true) leave nothing behind and do not pin', async () => {
    const a = await connectAgentClient(first);
    try {
      await a.query('begin');
      await a.query('set local statement_timeout = 1');
      await a.query('rollback');
      await a.query("select set_config('timezone', 'Pacific/Chatham', true)");
      expect(await settingsOf(a)).toEqual(defaults);
      // Not pinned: with one pooled connection, the second credential logs in while the first is still connected.
      const b = await connectAgentClient(second);
      expect(await settingsOf(b)).toEqual(defaults);
      await b.end();
    } finally {
      await a.end();
    }
  });
});

describe('other session state is refused', () => {
  it.each([
    ['LISTEN', 'LISTEN channel', '42501', 'statement.notify'],
    ['PREPARE', 'PREPARE p AS SELECT 1', '42501', 'statement.prepare'],
    ['a cursor WITH HOLD', 'DECLARE c CURSOR WITH HOLD FOR SELECT id FROM orders', '0A000', 'parse.unsupported'],
    ['a session advisory lock', 'SELECT pg_advisory_lock(42)', '42501', 'function.not_allowed'],
    ['a temporary table', 'CREATE TEMP TABLE scratch (a int)', '42501', 'allowed_tables.temp'],
    ['DISCARD', 'DISCARD ALL', '42501', 'statement.setting'],
    ['set_config of a name that is not a constant', "SELECT set_config(lower('STATEMENT_TIMEOUT'), '1', false)", '42501', 'statement.setting'],
  ])('%s, on both protocols', async (_label, sql, sqlstate, rule) => {
    const client = await connectAgentClient(writer);
    try {
      const simple = await client.query(sql).then(
        () => undefined,
        (error: { code?: string; message?: string }) => error,
      );
      expect(simple?.code).toBe(sqlstate);
      expect(simple?.message).toContain(`rule ${rule}`);
      const extended = await extendedTurn(client, sql);
      expect(extended.error?.code).toBe(sqlstate);
    } finally {
      await client.end();
    }
    const left = await admin.query(
      "select (select count(*)::int from pg_locks l join pg_database d on d.oid = l.database where l.locktype = 'advisory' and d.datname = current_database()) as locks, (select count(*)::int from pg_class where relpersistence = 't' and relname = 'scratch') as temps, (select count(*)::int from pg_listening_channels()) as channels",
    );
    expect(left.rows).toEqual([{ locks: 0, temps: 0, channels: 0 }]);
  });
});

describe('the hosted MCP query tool', () => {
  it("runs each call on a connection reset afterwards: the second credential's call sees defaults", async () => {
    const a = await connectAgent(mcpBase, first.mcp_token, 'first');
    const b = await connectAgent(mcpBase, second.mcp_token, 'second');
    try {
      const changed = await callTool(a, 'query', { sql: "select set_config('statement_timeout', '1', false) as t, set_config('timezone', 'Pacific/Chatham', false) as z" });
      expect(changed.isError, textOf(changed)).toBeFalsy();
      const seen = await callTool(b, 'query', { sql: 'show timezone' });
      expect((seen.structuredContent as { rows: unknown[][] }).rows).toEqual([[defaults.get('timezone')]]);
      const counted = await callTool(b, 'query', { sql: 'select count(*)::int as n from orders' });
      expect(counted.isError, textOf(counted)).toBeFalsy();
      expect((counted.structuredContent as { rows: unknown[][] }).rows).toEqual([[1000]]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
