import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { runOnce } from '../support/wire.js';

let gateway: TestGateway;

async function agentWith(policy: Record<string, unknown>): Promise<AgentSecrets> {
  const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: policy });
  expect(created.statusCode).toBe(201);
  const registered = await gateway.api.call(gateway.owner.apiKey, {
    method: 'POST',
    url: `/v1/projects/${gateway.projectId}/agents`,
    payload: { name: String(policy.name), policy_profile_id: (created.json() as { id: string }).id },
  });
  return registered.json() as AgentSecrets;
}

async function upstreamState(): Promise<string> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  const { rows } = await client.query(`select (select count(*) from orders) || ':' || (select md5(string_agg(o::text, ',' order by id)) from orders o) || ':' || (select md5(string_agg(c::text, ',' order by id)) from customers c) as state`);
  await client.end();
  return rows[0].state as string;
}

function run(agent: AgentSecrets, sql: string): ReturnType<typeof runOnce> {
  return runOnce(agent.connection_string, sql);
}

beforeAll(async () => {
  gateway = await startGateway('proxy_policy');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('policy on the wire', () => {
  it('a read-only credential allowed only public.orders: writes, escapes and other tables are refused, counts run, the upstream is unchanged', async () => {
    const agent = await agentWith({ name: 'orders reader', read_only: true, allowed_tables: ['public.orders'] });
    const before = await upstreamState();
    for (const sql of ['WITH d AS (DELETE FROM public.orders RETURNING *) SELECT * FROM d', 'COMMIT; DELETE FROM public.orders', 'SELECT * FROM public.customers']) {
      const result = await run(agent, sql);
      expect(result.code).toBe('42501');
      expect(result.message).toMatch(/rule [a-z_.]+/);
    }
    expect((await run(agent, 'SELECT count(*)::int AS n FROM public.orders')).rows).toEqual([{ n: 1000 }]);
    expect(await upstreamState()).toBe(before);
  });

  it('decides and audits each text on its own when simple-protocol statements differ only in their numbers', async () => {
    const agent = await agentWith({ name: 'numbers reader', read_only: true, allowed_tables: ['public.orders', 'public.customers'], masked_columns: { 'public.customers.email': 'redact' } });
    for (const id of [1, 2, 3]) expect((await run(agent, `SELECT id FROM orders WHERE id = ${id}`)).rows).toEqual([{ id }]);
    for (const id of [4, 5]) expect((await run(agent, `SELECT id, email FROM customers WHERE id = ${id}`)).rows).toEqual([{ id, email: '[redacted]' }]);
    for (const id of [1, 2]) expect((await run(agent, `DELETE FROM orders WHERE id = ${id}`)).code).toBe('42501');
    const audited = await gateway.decisionsOf(agent.credential.id, 7);
    expect(audited.map((d) => [d.event, d.sql, d.normalized_sql, d.tables_read])).toEqual([
      ['query', 'SELECT id FROM orders WHERE id = 1', 'SELECT id FROM orders WHERE id = $1', ['public.orders']],
      ['query', 'SELECT id FROM orders WHERE id = 2', 'SELECT id FROM orders WHERE id = $1', ['public.orders']],
      ['query', 'SELECT id FROM orders WHERE id = 3', 'SELECT id FROM orders WHERE id = $1', ['public.orders']],
      ['masked', 'SELECT id, email FROM customers WHERE id = 4', 'SELECT id, email FROM customers WHERE id = $1', ['public.customers']],
      ['masked', 'SELECT id, email FROM customers WHERE id = 5', 'SELECT id, email FROM customers WHERE id = $1', ['public.customers']],
      ['blocked', 'DELETE FROM orders WHERE id = 1', 'DELETE FROM orders WHERE id = $1', []],
      ['blocked', 'DELETE FROM orders WHERE id = 2', 'DELETE FROM orders WHERE id = $1', []],
    ]);
    expect(new Set(audited.slice(0, 3).map((d) => d.query_hash)).size).toBe(1);
    expect(audited[0]!.query_hash).not.toBe(audited[3]!.query_hash);
    expect(audited.map((d) => Number(d.rows_returned))).toEqual([1, 1, 1, 1, 1, 0, 0]);
  });

  it('never shows a masked column raw, in the select list or through predicates', async () => {
    const agent = await agentWith({ name: 'customers masked', read_only: true, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } });
    const listed = await run(agent, 'SELECT id, email FROM customers ORDER BY id LIMIT 3');
    expect(listed.rows).toEqual([1, 2, 3].map((id) => ({ id, email: '[redacted]' })));
    expect((await run(agent, "SELECT count(*)::int AS n FROM customers WHERE email LIKE 'user1%'")).rows).toEqual([{ n: 0 }]);
    const whole = await run(agent, 'SELECT to_jsonb(c) FROM customers c');
    expect(whole.code).toBe('42501');
    const audited = await gateway.decisionsOf(agent.credential.id, 3);
    expect(audited.map((d) => d.event)).toEqual(['masked', 'masked', 'blocked']);
    expect(JSON.stringify(audited)).not.toMatch(/user\d+@example\.com/);
  });

  it('masks every run of a repeated extended-protocol statement, unnamed and named, whose rewritten Parse is reused', async () => {
    const agent = await agentWith({ name: 'repeated masked', read_only: true, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } });
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    try {
      const text = 'SELECT id, email FROM customers WHERE id = $1';
      const seen: unknown[] = [];
      for (const id of [1, 2, 3]) seen.push(...(await client.query(text, [id])).rows);
      for (const id of [4, 5]) seen.push(...(await client.query({ name: 'by_id', text, values: [id] })).rows);
      for (const id of [6, 7]) seen.push(...(await client.query(text, [id])).rows);
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7].map((id) => ({ id, email: '[redacted]' })));
    } finally {
      await client.end();
    }
    const audited = await gateway.decisionsOf(agent.credential.id, 7);
    expect(audited.map((d) => [d.event, d.rows_returned])).toEqual(Array.from({ length: 7 }, () => ['masked', '1']));
  });

  it('caps results at max_rows on the simple and the extended protocol, with a NOTICE and a truncated decision', async () => {
    const agent = await agentWith({ name: 'capped reader', read_only: true, allowed_tables: ['public.orders'], max_rows: 3 });
    const client = new pg.Client({ connectionString: agent.connection_string });
    const notices: string[] = [];
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    await client.connect();
    try {
      const simple = await client.query('SELECT id FROM orders ORDER BY id');
      expect(simple.rows).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
      expect(simple.rowCount).toBe(3);
      const extended = await client.query('SELECT id FROM orders WHERE id > $1 ORDER BY id', [10]);
      expect(extended.rows).toEqual([{ id: 11 }, { id: 12 }, { id: 13 }]);
      expect((await client.query('SELECT count(*)::int AS n FROM orders')).rows).toEqual([{ n: 1000 }]);
      // Several statements in one query string run capped, each result cut at the cap.
      const multi = (await client.query('SELECT 1; SELECT id FROM orders ORDER BY id')) as unknown as pg.QueryResult[];
      expect(multi.map((result) => result.rowCount)).toEqual([1, 3]);
      expect(notices).toEqual([expect.stringContaining('cut at 3 rows'), expect.stringContaining('cut at 3 rows'), expect.stringContaining('cut at 3 rows')]);
    } finally {
      await client.end();
    }

    const sql = postgres(agent.connection_string, { max: 1, onnotice: () => undefined });
    try {
      const batches: number[][] = [];
      await sql`SELECT id FROM orders ORDER BY id`.cursor(2, (rows) => void batches.push(rows.map((row) => row.id as number)));
      expect(batches).toEqual([[1, 2], [3]]);
    } finally {
      await sql.end();
    }

    // postgres.js first reads the array types from pg_type: a driver's lookup, not capped.
    const audited = await gateway.decisionsOf(agent.credential.id, 7);
    expect(audited.map((d) => [d.event, d.decision_rule, d.rows_returned])).toEqual([
      ['truncated', 'max_rows.truncated', '3'],
      ['truncated', 'max_rows.truncated', '3'],
      ['query', '', '1'],
      ['truncated', 'max_rows.truncated', '4'],
      ['query', '', expect.not.stringMatching(/^[0-3]$/)],
      ['query', '', '2'],
      ['truncated', 'max_rows.truncated', '1'],
    ]);
  });

  it('resolves names on the search_path the policy decided on, whatever default the upstream database sets', async () => {
    const agent = await agentWith({ name: 'orders only', read_only: true, allowed_tables: ['public.orders'] });
    const admin = new pg.Client({ connectionString: gateway.upstream.url });
    await admin.connect();
    const database = (await admin.query('select current_database() as name')).rows[0].name as string;
    try {
      await admin.query(`create schema shadow; create table shadow.orders (id int, secret text); insert into shadow.orders values (1, 'shadow-secret')`);
      await admin.query(`alter database "${database}" set search_path = shadow, public`);
      await gateway.restartProxy();
      const result = await run(agent, 'SELECT count(*)::int AS n FROM orders');
      expect(result.rows).toEqual([{ n: 1000 }]);
    } finally {
      await admin.query(`alter database "${database}" reset search_path`);
      await admin.query('drop schema shadow cascade');
      await admin.end();
    }
  });
});
