/**
 * Function resolution and catalog names (issue 16, classes 1 and 6) through the real proxy and the
 * hosted MCP `query` tool. The upstream holds what the red team's fixture held: `public.secrets`
 * with a token, schema `private`, and two database-defined overloads of vetted names,
 * `public.md5(integer)` (SECURITY DEFINER, reads the token) and `public.lower(integer)` (writes a
 * row). Every vetted call must run pg_catalog's function: the overloads never run, the token never
 * comes back, and the upstream is unchanged.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectAgent, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { connectAgentClient, createPolicy, registerOn } from '../support/proxy-agents.js';

const SECRET = 'SECRET-TOKEN-9f3a';

let gateway: TestGateway;
let admin: pg.Client;
let reader: AgentSecrets;
let writer: AgentSecrets;
let mcp: Client;

type Outcome = { rows: Record<string, unknown>[] } | { code: string | undefined; message: string };

async function run(agent: AgentSecrets, sql: string, mode: 'simple' | 'extended'): Promise<Outcome> {
  const client = await connectAgentClient(agent);
  try {
    const config = mode === 'extended' ? ({ text: sql, values: [], queryMode: 'extended' } as pg.QueryConfig) : sql;
    return await client.query(config).then(
      (result) => ({ rows: result.rows as Record<string, unknown>[] }),
      (error: { code?: string; message: string }) => ({ code: error.code, message: error.message }),
    );
  } finally {
    await client.end();
  }
}

/** What the upstream holds that no agent statement may change. */
async function upstreamState(): Promise<unknown> {
  const { rows } = await admin.query(`select (select count(*)::int from public.sink) as sink, (select count(*)::int from public.orders) as orders,
    (select string_agg(token, ',') from public.secrets) as secrets,
    (select data_type from information_schema.columns where table_name = 'orders' and column_name = 'total') as total_type,
    (select count(*)::int from information_schema.columns where table_name = 'orders') as order_columns,
    (select count(*)::int from pg_indexes where tablename = 'orders') as order_indexes`);
  return rows[0];
}

const UNCHANGED = { sink: 0, orders: 1000, secrets: SECRET, total_type: 'numeric', order_columns: 3, order_indexes: 1 };

beforeAll(async () => {
  gateway = await startGateway('function_resolution');
  admin = new pg.Client({ connectionString: gateway.upstream.url });
  await admin.connect();
  await admin.query(`create table public.secrets (token text not null); insert into public.secrets values ('${SECRET}');
    create table public.sink (v int);
    create schema private; create table private.hidden (id int);
    create function public.md5(integer) returns text language sql security definer as $$ select token from public.secrets limit 1 $$;
    create function public.lower(integer) returns text language sql as $$ insert into public.sink values ($1) returning 'wrote' $$;
    create function public.leak() returns text language sql security definer as $$ select token from public.secrets limit 1 $$;`);
  reader = await registerOn(
    gateway,
    await createPolicy(gateway, {
      name: 'fixture reader',
      read_only: true,
      allowed_tables: ['public.orders', 'public.customers'],
      masked_columns: { 'public.customers.email': 'redact', 'public.customers.ssn': 'redact' },
      max_rows: 50,
    }),
    'fixture reader',
  );
  writer = await registerOn(gateway, await createPolicy(gateway, { name: 'orders writer', read_only: false, allowed_tables: ['public.orders'] }), 'orders writer');
  await gateway.api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = gateway.api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  mcp = await connectAgent(`http://127.0.0.1:${address.port}/mcp`, reader.mcp_token, 'function-resolution-test');
});

afterAll(async () => {
  await mcp?.close();
  await admin?.end();
  await gateway?.stop();
});

function expectCode(outcome: Outcome, code: string, sql: string): void {
  expect('code' in outcome ? outcome.code : `rows ${JSON.stringify(outcome.rows)}`, sql).toBe(code);
  expect(JSON.stringify(outcome), sql).not.toContain(SECRET);
}

describe('a vetted name runs pg_catalog’s function, never a database-defined overload', () => {
  // pg_catalog.md5(integer) and pg_catalog.lower(integer) do not exist: 42883, and nothing ran.
  const reads = [
    'select md5(1)',
    'SELECT MD5(1)',
    'select "md5"(1)',
    'select md5(id) from orders where id = 1',
    'select id from orders where md5(id) = $$x$$',
    'select string_agg(md5(id), $$,$$) from orders',
    'select m from (select md5(1) as m) s',
    'with t as (select md5(1) as m) select m from t',
    'select coalesce(md5(1), $$none$$)',
    'select count(*) from orders group by md5(id)',
    'select id from orders order by md5(id) limit 1',
    'select exists (select 1 where md5(1) is not null)',
    'explain select md5(1)',
    'select lower(5)',
    'select lower(id) from orders limit 1',
  ];
  for (const mode of ['simple', 'extended'] as const) {
    it(`on the ${mode} protocol: the overloads never run (42883) and the token never comes back`, async () => {
      for (const sql of reads) expectCode(await run(reader, sql, mode), '42883', sql);
      expect(await upstreamState()).toEqual(UNCHANGED);
    });
  }

  it('a schema-qualified call of another schema is refused by the policy (42501, read_only.function)', async () => {
    for (const mode of ['simple', 'extended'] as const) {
      for (const sql of ['select public.md5(1)', 'select public.leak()', 'select private.f()']) {
        const outcome = await run(reader, sql, mode);
        expectCode(outcome, '42501', sql);
        expect('message' in outcome && outcome.message).toMatch(/^function \S+ is not a built-in \(pg_catalog\) function \(rule read_only\.function\)/);
      }
    }
    expect(await upstreamState()).toEqual(UNCHANGED);
  });

  it('under a write-capable policy, a vetted name neither writes elsewhere nor copies the secret into an allowed table', async () => {
    const writes = [
      'select lower(7)',
      'alter table orders alter column total type text using md5(1)',
      'alter table orders add column tag text default lower(7)',
      'alter table orders add column tag text default md5(1)',
      'create index on orders (lower(id))',
      'update orders set customer = md5(1) where id = 1',
      'insert into orders values (5000, md5(1), 1)',
      'delete from orders where lower(id) = $$wrote$$',
    ];
    for (const mode of ['simple', 'extended'] as const) {
      for (const sql of writes) expectCode(await run(writer, sql, mode), '42883', sql);
    }
    expect(await upstreamState()).toEqual(UNCHANGED);
    expect((await admin.query(`select count(*)::int as n from orders where customer = '${SECRET}'`)).rows).toEqual([{ n: 0 }]);
  });

  it('on the hosted MCP query tool alike', async () => {
    for (const sql of ['select md5(1)', 'select lower(5)', 'select md5(id) from orders limit 1']) {
      const result = await callTool(mcp, 'query', { sql });
      expect(result.isError, sql).toBe(true);
      expect(textOf(result), sql).toMatch(/^The database refused the statement \(SQLSTATE 42883\)/);
      expect(JSON.stringify(result), sql).not.toContain(SECRET);
    }
    const refused = await callTool(mcp, 'query', { sql: 'select public.md5(1)' });
    expect(textOf(refused)).toMatch(/^Refused by the policy \(decision_rule read_only\.function, SQLSTATE 42501\): function public\.md5 is not a built-in/);
    expect(await upstreamState()).toEqual(UNCHANGED);
  });
});

describe('catalog names through reg* types are catalog reads', () => {
  const lookups = [
    "select 'public.secrets'::regclass::oid",
    "select 'private.nonexistent'::regclass",
    "select 'private.hidden'::regclass",
    'select g::oid::regclass from generate_series(16384, 17000) g',
    "select cast('public.secrets' as regclass)",
    "select regclass 'public.secrets'",
    "select '{public.secrets}'::regclass[]",
    "select to_regclass('public.secrets')",
    "select 'public.md5(integer)'::regprocedure",
    "select 'private'::regnamespace",
    'select tableoid::regclass from orders limit 1',
  ];
  for (const mode of ['simple', 'extended'] as const) {
    it(`on the ${mode} protocol: refused alike whether the name exists or not (42501, allowed_tables.catalog)`, async () => {
      for (const sql of lookups) {
        const outcome = await run(reader, sql, mode);
        expectCode(outcome, '42501', sql);
        expect('message' in outcome && outcome.message, sql).toMatch(/^pg_catalog\.pg_\w+ is a system catalog read by .+ \(rule allowed_tables\.catalog\)\. Compare names as text, or ask for a policy with allow_catalog\.$/);
        expect('message' in outcome && outcome.message, sql).not.toMatch(/secrets|hidden|nonexistent|does not exist/);
      }
    });
  }

  it('on the hosted MCP query tool alike', async () => {
    for (const sql of ["select 'public.secrets'::regclass::oid", "select 'private.nonexistent'::regclass"]) {
      const result = await callTool(mcp, 'query', { sql });
      expect(textOf(result), sql).toMatch(/^Refused by the policy \(decision_rule allowed_tables\.catalog, SQLSTATE 42501\): pg_catalog\.pg_class is a system catalog read by a cast to regclass/);
    }
  });
});

describe('analyst functions run with correct output', () => {
  const cases: [string, Record<string, unknown>[]][] = [
    ["select current_setting('TimeZone') = current_setting('timezone') as same", [{ same: true }]],
    [`select * from jsonb_to_recordset('[{"a":1,"b":"x"},{"a":2,"b":"y"}]') as x(a int, b text)`, [{ a: 1, b: 'x' }, { a: 2, b: 'y' }]],
    [`select id, customer, total from jsonb_populate_record(null::orders, '{"id": 7, "customer": "c7", "total": 3}')`, [{ id: 7, customer: 'c7', total: '3' }]],
    ["select to_tsvector('english', 'The quick foxes') @@ to_tsquery('english', 'fox') as hit, plainto_tsquery('english', 'quick foxes')::text as q", [{ hit: true, q: "'quick' & 'fox'" }]],
    ['select make_interval(days => 3)::text as i', [{ i: '3 days' }]],
    ['select pg_size_pretty(1024::bigint) as s', [{ s: '1024 bytes' }]],
    ['select lower(email) as e, md5(customer) = md5(customer) as same from customers, orders where customers.id = 1 and orders.id = 1', [{ e: '[redacted]', same: true }]],
    ['select count(*)::int as n, max(total) as m from orders where id > 990', [{ n: 10, m: '1500.0' }]],
    // pg_typeof runs as text: the same output, and no type-name lookup (no existence oracle).
    ["select pg_typeof(1), pg_typeof(1) = 'private.nonexistent' as missing, pg_typeof(1) = 'private.hidden' as existing", [{ pg_typeof: 'integer', missing: false, existing: false }]],
  ];
  for (const mode of ['simple', 'extended'] as const) {
    it(`on the ${mode} protocol`, async () => {
      for (const [sql, rows] of cases) expect(await run(reader, sql, mode), sql).toEqual({ rows });
      // The same statements with other numbers come from the shape cache: still rewritten, still right.
      expect(await run(reader, 'select count(*)::int as n, max(total) as m from orders where id > 995', mode)).toEqual({ rows: [{ n: 5, m: '1500.0' }] });
      expect(await run(reader, "select current_setting('app.secret', true)", mode)).toMatchObject({ code: '42501' });
    });
  }

  it('on the hosted MCP query tool', async () => {
    const result = await callTool(mcp, 'query', { sql: 'select make_interval(days => 3)::text as i, pg_size_pretty(1024::bigint) as s' });
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ rows: [['3 days', '1024 bytes']] });
  });
});
