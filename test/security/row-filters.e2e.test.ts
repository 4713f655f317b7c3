/**
 * Issue 19's row filters through the real proxy (node-postgres on the simple and extended
 * protocol, postgres.js) and the hosted agent MCP (the official MCP SDK client): with
 * `tenant_id = 7` on public.orders, no read at any depth returns a tenant-8 row, UPDATE and DELETE
 * change tenant-7 rows only (the upstream is checked after each), and what could reach the rows
 * unfiltered (INSERT, SET of the filter column, views, inheritance children, COPY) is refused.
 * A filter naming the session's credential (`agent_id = pgward.credential_id()`) shows two agents
 * on one policy their own rows only, through one pooled upstream connection and the decision cache.
 */
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { createPolicy, patchDatabase, registerOn, withAgentClient } from '../support/proxy-agents.js';
import { recordedFor } from '../support/recorded.js';

let gateway: TestGateway;
let mcpUrl: string;
let agent: AgentSecrets;

const POLICY = {
  name: 'tenant 7',
  read_only: false,
  allowed_tables: ['public.*', 'app.*'],
  masked_columns: { 'public.customers.email': 'redact' },
  row_filters: { 'public.orders': 'tenant_id = 7', 'public.TenantNotes': '"Tenant" = 7 AND note IS NOT NULL' },
};

type Mode = 'simple' | 'extended';

beforeAll(async () => {
  gateway = await startGateway('row_filters');
  await admin(gateway.upstream.url, (client) =>
    client.query(`alter table orders add column tenant_id int not null default 8; update orders set tenant_id = 7 where id % 10 = 0; alter table orders add column agent_id text not null default '';
      create table orders_extra () inherits (orders); insert into orders_extra values (5001, 'x', 1, 8);
      create view orders_view as select * from orders;
      create table "TenantNotes" ("Tenant" int, note text); insert into "TenantNotes" values (7, 'mine'), (8, 'theirs'), (7, null);
      create schema app; create table app.orders (id int, tenant_id int); insert into app.orders values (1, 8);`),
  );
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
  agent = await registerAgentWith(gateway, POLICY);
});
afterAll(async () => {
  await gateway?.stop();
});

const upstream = <T>(sql: string): Promise<T[]> => admin(gateway.upstream.url, async (client) => (await client.query(sql)).rows as T[]);

/** Each read and the one row it must return: every count is of tenant-7 rows only (100 of the 1,000 orders). */
const READS: readonly (readonly [string, Record<string, unknown>])[] = [
  ['select count(*)::int as n, min(tenant_id) as lo, max(tenant_id) as hi from orders', { n: 100, lo: 7, hi: 7 }],
  ['select count(*)::int as n from "public"."orders" as o join orders p using (id)', { n: 100 }],
  ['select count(*)::int as n from orders natural join orders x', { n: 100 }],
  ['select count(o.id)::int as n, count(*)::int as m from generate_series(1, 1000) g left join orders o on o.id = g', { n: 100, m: 1000 }],
  ['select count(*)::int as n from orders o right join orders p on p.id = o.id + 10', { n: 100 }],
  ['with t as (select * from orders) select count(*)::int as n from t', { n: 100 }],
  ['select count(*)::int as n from (select id from orders where total > 0) s', { n: 100 }],
  ['select count(*)::int as n from generate_series(1, 1000) g where exists (select 1 from orders where id = g)', { n: 100 }],
  ['select count(*)::int as n from generate_series(1, 1000) g where g in (select id from orders)', { n: 100 }],
  ['select (select count(*)::int from orders) as n', { n: 100 }],
  ['select count(*)::int as n from (select id from orders union all select id from only orders) u', { n: 200 }],
  ['select count(*)::int as n from (select id from orders except select id from orders where id > 500) x', { n: 50 }],
  ['with recursive r(id) as (select min(id) from orders union all select o.id from orders o join r on o.id = r.id + 1) select count(*)::int as n from r', { n: 1 }],
  ['select count(*)::int as n from generate_series(1, 1000) g, lateral (select id from orders where id = g) x', { n: 100 }],
  ['select count(*)::int as n from orders where id = 1 or tenant_id = 8 or true', { n: 100 }],
  ['select count(*)::int as n from "TenantNotes"', { n: 1 }],
  ['select count(*)::int as n from app.orders', { n: 1 }],
];

const REFUSALS: readonly (readonly [string, string])[] = [
  ["insert into orders values (6000, 'x', 1, 7)", 'row_filters.write'],
  ['update orders set tenant_id = 8 where id = 40', 'row_filters.write'],
  ['select * from orders_view', 'row_filters.indirect'],
  ['select * from orders_extra', 'row_filters.child'],
  ['select * from orders tablesample system (100)', 'row_filters.unsupported'],
];

const run = (client: pg.Client, sql: string, mode: Mode): Promise<pg.QueryResult> =>
  mode === 'simple' ? client.query(sql) : client.query({ text: sql, queryMode: 'extended' } as pg.QueryConfig);

describe('reads see tenant-7 rows only, at every depth', () => {
  for (const mode of ['simple', 'extended'] as const) {
    it(`node-postgres, ${mode} protocol`, async () => {
      await withAgentClient(agent, async (client) => {
        for (const [sql, row] of READS) expect((await run(client, sql, mode)).rows, sql).toEqual([row]);
        const rows = (await run(client, 'select o.*, c.email from orders o left join customers c on c.id = o.id / 10 order by o.id limit 3', mode)).rows;
        expect(rows.map((r: { id: number; tenant_id: number; email: string | null }) => [r.id, r.tenant_id, r.email])).toEqual([[10, 7, '[redacted]'], [20, 7, '[redacted]'], [30, 7, '[redacted]']]);
      });
    });
  }

  it('postgres.js', async () => {
    const sql = postgres(agent.connection_string, { max: 1, onnotice: () => undefined });
    try {
      expect(await sql`select count(*)::int as n from orders where id > ${0}`).toEqual([{ n: 100 }]);
      expect(await sql`select id, tenant_id from orders where id in (${1}, ${10}) order by id`).toEqual([{ id: 10, tenant_id: 7 }]);
      for (const [text, row] of READS) expect([...(await sql.unsafe(text))], text).toEqual([row]);
    } finally {
      await sql.end();
    }
  });

  it('the hosted MCP query tool', async () => {
    await withAgentMcp(mcpUrl, agent, async (client) => {
      for (const [sql, row] of READS) {
        const result = await callTool(client, 'query', { sql });
        expect(result.isError, `${sql}: ${textOf(result)}`).toBeFalsy();
        expect((result.structuredContent as { rows: unknown[][] }).rows, sql).toEqual([Object.values(row)]);
      }
      // validate_sql decides as query does, without showing the text the statement runs as (it holds the predicate).
      expect((await callTool(client, 'validate_sql', { sql: READS[0]![0] })).structuredContent).toMatchObject({ allowed: true, event: 'query', decision_rule: 'row_filters.filtered', runs_as: null });
      expect((await callTool(client, 'validate_sql', { sql: 'select id from app.orders' })).structuredContent).toMatchObject({ allowed: true, runs_as: 'select id from app.orders' });
    });
    expect(await recordedFor(gateway, agent.credential.id, 'mcp', READS[0]![0])).toMatchObject({ event: 'query', decision_rule: 'row_filters.filtered' });
  });

  it('audits the filtered read as a query with rule row_filters.filtered, and a masked one as masked', async () => {
    expect(await recordedFor(gateway, agent.credential.id, 'wire', READS[0]![0])).toMatchObject({
      event: 'query', decision_rule: 'row_filters.filtered', reason: "rows of public.orders limited by the policy's row filters (rule row_filters.filtered).",
    });
    expect(await recordedFor(gateway, agent.credential.id, 'wire', 'select o.*, c.email from orders o left join customers c on c.id = o.id / 10 order by o.id limit 3')).toMatchObject({
      event: 'masked', decision_rule: 'masked_columns.masked',
    });
  });
});

describe('writes change tenant-7 rows only', () => {
  it('UPDATE and DELETE ... RETURNING on the wire (both protocols) and on MCP; tenant-8 rows are untouched upstream', async () => {
    const before = await upstream<{ n: number; sum: string }>('select count(*)::int as n, sum(total)::text as sum from orders where tenant_id = 8');
    await withAgentClient(agent, async (client) => {
      expect((await run(client, 'update orders set total = total + 1 where id in (1, 10) returning id, tenant_id', 'simple')).rows).toEqual([{ id: 10, tenant_id: 7 }]);
      expect((await run(client, 'with u as (update orders o set total = 0 from orders p where p.id = o.id and o.id between 1 and 30 returning o.id) select id from u order by id', 'extended')).rows).toEqual([{ id: 10 }, { id: 20 }, { id: 30 }]);
      expect((await run(client, 'delete from orders where id in (2, 20) returning id', 'extended')).rows).toEqual([{ id: 20 }]);
      expect((await run(client, 'with d as (delete from orders where id = 3 or id = 30 returning id) select * from d', 'simple')).rows).toEqual([{ id: 30 }]);
      expect((await run(client, 'update orders set total = 5', 'simple')).rowCount).toBe(98);
    });
    await withAgentMcp(mcpUrl, agent, async (client) => {
      const result = await callTool(client, 'query', { sql: 'with d as (delete from orders where id < 45 returning id) select id from d order by id' });
      expect(result.isError, textOf(result)).toBeFalsy();
      expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual([[10], [40]]);
    });
    expect(await upstream('select count(*)::int as n, sum(total)::text as sum from orders where tenant_id = 8')).toEqual(before);
    expect(await upstream('select count(*)::int as n from orders where tenant_id = 7')).toEqual([{ n: 96 }]);
    expect(await upstream('select count(*)::int as n from only orders where total <> 5 and tenant_id = 7')).toEqual([{ n: 0 }]);
    expect(await upstream('select count(*)::int as n from orders_extra')).toEqual([{ n: 1 }]);
  });

  it('refuses what could reach rows outside the filter, with 42501 and the rule, and changes nothing', async () => {
    const before = await upstream('select * from orders order by id');
    for (const mode of ['simple', 'extended'] as const) {
      await withAgentClient(agent, async (client) => {
        for (const [sql, rule] of REFUSALS) {
          await expect(run(client, sql, mode), sql).rejects.toMatchObject({ code: '42501', message: expect.stringContaining(`(rule ${rule})`) });
        }
      });
    }
    await withAgentMcp(mcpUrl, agent, async (client) => {
      const result = await callTool(client, 'query', { sql: REFUSALS[0]![0] });
      expect(textOf(result)).toContain('(decision_rule row_filters.write, SQLSTATE 42501)');
      const permissions = (await callTool(client, 'my_permissions')).structuredContent as { policy: Record<string, unknown> };
      expect(permissions.policy.row_filtered_tables).toEqual(['public.orders', 'public.TenantNotes']);
      expect(JSON.stringify(permissions)).not.toContain('tenant_id = 7');
    });
    await withAgentClient(agent, async (client) => {
      // The search path cannot be moved to make `orders` another table (or the filtered one another name).
      await expect(client.query('set search_path = app, public')).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule statement.setting)') });
      expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 96 }]);
      expect((await client.query('select count(*)::int as n from public.orders')).rows).toEqual([{ n: 96 }]);
    });
    expect(await upstream('select * from orders order by id')).toEqual(before);
    expect(await recordedFor(gateway, agent.credential.id, 'wire', REFUSALS[0]![0])).toMatchObject({ event: 'blocked', decision_rule: 'row_filters.write' });
  });
});

describe('the policy document', () => {
  const create = (row_filters: unknown) =>
    gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: { name: `bad ${JSON.stringify(row_filters)}`.slice(0, 120), row_filters } });

  it('refuses a predicate that is not a vetted expression on the table’s own columns, with 400 and the reason', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ 'public.orders': 'tenant_id = (select 7)' }, 'it contains a subquery'],
      [{ 'public.orders': 'true) union (select 1' }, 'does not parse'],
      [{ 'public.orders': 'true union select * from customers' }, 'not one boolean expression'],
      [{ 'public.orders': 'orders.tenant_id = 7' }, 'other than by its bare name'],
      [{ 'public.orders': 'pg_sleep(1) is not null' }, 'function pg_sleep is not on the vetted function list'],
      [{ 'public.orders': 'random() < 0.5' }, 'it calls random'],
      [{ 'public.orders': 'count(*) > 0' }, 'it calls the aggregate count'],
      [{ 'public.orders': 'tenant_id = $1' }, 'parameter'],
      [{ 'public.*': 'true' }, 'Invalid key in record'],
    ];
    for (const [filters, message] of cases) {
      const response = await create(filters);
      expect(response.statusCode, JSON.stringify(filters)).toBe(400);
      expect(response.body, JSON.stringify(filters)).toContain(message);
    }
    const accepted = await create({ 'public.orders': "tenant_id = 7 and lower(customer) <> 'x'" });
    expect(accepted.statusCode, accepted.body).toBe(201);
    expect((accepted.json() as { row_filters: unknown }).row_filters).toEqual({ 'public.orders': "tenant_id = 7 and lower(customer) <> 'x'" });
  });
});

describe('a filter on the session’s credential: agent_id = pgward.credential_id()', () => {
  let a: AgentSecrets;
  let b: AgentSecrets;
  let policyId: string;
  const mine = 'select id from orders order by id';

  beforeAll(async () => {
    policyId = await createPolicy(gateway, { name: 'own rows', read_only: false, allowed_tables: ['public.*'], row_filters: { 'public.orders': 'agent_id = pgward.credential_id()' } });
    a = await registerOn(gateway, policyId, 'agent a');
    b = await registerOn(gateway, policyId, 'agent b');
    await admin(gateway.upstream.url, (client) =>
      client.query("update orders set agent_id = case when id between 101 and 103 then $1 when id between 104 and 106 then $2 else '' end", [a.credential.id, b.credential.id]),
    );
    // One upstream connection serves both agents' sessions, turn by turn.
    await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 1, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } });
  });

  const ids = (result: pg.QueryResult) => result.rows.map((row: { id: number }) => row.id);

  it('each agent reads its own rows, interleaved on both protocols, through one pooled connection', async () => {
    await withAgentClient(a, (ca) =>
      withAgentClient(b, async (cb) => {
        for (const mode of ['simple', 'extended', 'simple'] as const) {
          expect(ids(await run(ca, mine, mode)), `a ${mode}`).toEqual([101, 102, 103]);
          expect(ids(await run(cb, mine, mode)), `b ${mode}`).toEqual([104, 105, 106]);
          expect(ids(await run(cb, 'select o.id from orders o join orders p using (id) where o.id between 100 and 110 order by 1', mode))).toEqual([104, 105, 106]);
          expect(ids(await run(ca, 'select o.id from orders o join orders p using (id) where o.id between 100 and 110 order by 1', mode))).toEqual([101, 102, 103]);
        }
        // A named prepared statement of a is never b's, and b's of the same name and text never a's.
        const prepared = { name: 'mine', text: 'select id from orders where id > $1 order by id', values: [0] };
        expect(ids(await ca.query(prepared))).toEqual([101, 102, 103]);
        expect(ids(await cb.query(prepared))).toEqual([104, 105, 106]);
        expect(ids(await ca.query(prepared))).toEqual([101, 102, 103]);
        expect(ids(await cb.query({ ...prepared, values: [104] }))).toEqual([105, 106]);
      }),
    );
  });

  it('each agent reads its own rows on the hosted MCP query tool; the predicate is never shown', async () => {
    for (const [agentSecrets, expected] of [[a, [[101], [102], [103]]], [b, [[104], [105], [106]]], [a, [[101], [102], [103]]]] as const) {
      await withAgentMcp(mcpUrl, agentSecrets, async (client) => {
        const result = await callTool(client, 'query', { sql: mine });
        expect(result.isError, textOf(result)).toBeFalsy();
        expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual(expected);
        expect((await callTool(client, 'validate_sql', { sql: mine })).structuredContent).toMatchObject({ allowed: true, decision_rule: 'row_filters.filtered', runs_as: null });
        const permissions = JSON.stringify((await callTool(client, 'my_permissions')).structuredContent);
        expect(permissions).toContain('"row_filtered_tables":["public.orders"]');
        expect(permissions).not.toContain('credential_id()');
        // The reserved function is the policy's alone: an agent's statement may not call it.
        const called = await callTool(client, 'query', { sql: 'select pgward.credential_id()' });
        expect(called.isError).toBe(true);
        expect(textOf(called)).toContain('SQLSTATE 42501');
      });
    }
  });

  it('UPDATE and DELETE change the agent’s own rows only; the upstream shows it', async () => {
    await withAgentClient(a, (ca) =>
      withAgentClient(b, async (cb) => {
        expect(ids(await run(ca, 'update orders set total = -1 returning id', 'extended')).sort()).toEqual([101, 102, 103]);
        expect(ids(await run(cb, 'delete from orders where id in (101, 104) returning id', 'simple'))).toEqual([104]);
        expect((await run(cb, 'update orders set total = -1 where id = 102', 'extended')).rowCount).toBe(0);
        expect((await run(ca, 'delete from orders where id = 105', 'simple')).rowCount).toBe(0);
        await expect(run(ca, "update orders set agent_id = 'x' where id = 101", 'simple')).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule row_filters.write)') });
      }),
    );
    await withAgentMcp(mcpUrl, b, async (client) => {
      const result = await callTool(client, 'query', { sql: 'delete from orders where id in (102, 105) returning id' });
      expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual([[105]]);
    });
    expect(await upstream('select id, agent_id, total::int from only orders where id between 101 and 106 order by id')).toEqual([
      { id: 101, agent_id: a.credential.id, total: -1 },
      { id: 102, agent_id: a.credential.id, total: -1 },
      { id: 103, agent_id: a.credential.id, total: -1 },
      { id: 106, agent_id: b.credential.id, total: 159 },
    ]);
  });

  it('the policy document refuses other pgward.* calls, arguments, and session values outside a row filter, with 400 and the reason', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ row_filters: { 'public.orders': 'agent_id = pgward.user_id()' } }, 'the only session values are pgward.credential_id() and pgward.project_id()'],
      [{ row_filters: { 'public.orders': "agent_id = pgward.credential_id('x')" } }, 'pgward.credential_id() takes no arguments'],
      [{ row_filters: { 'public.orders': 'agent_id = credential_id()' } }, 'function credential_id is not on the vetted function list'],
    ];
    for (const [payload, message] of cases) {
      const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: { name: 'bad session value', ...payload } });
      expect(response.statusCode, JSON.stringify(payload)).toBe(400);
      expect(response.body, JSON.stringify(payload)).toContain(message);
    }
  });
});
