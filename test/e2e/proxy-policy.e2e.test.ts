import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

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

async function run(agent: AgentSecrets, sql: string): Promise<{ rows?: Record<string, unknown>[]; code?: string; message?: string }> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  await client.connect();
  try {
    return { rows: (await client.query(sql)).rows };
  } catch (error) {
    return { code: (error as { code?: string }).code, message: (error as Error).message };
  } finally {
    await client.end();
  }
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

  it('never shows a masked column raw, in the select list or through predicates', async () => {
    const agent = await agentWith({ name: 'customers masked', read_only: true, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } });
    const listed = await run(agent, 'SELECT id, email FROM customers ORDER BY id LIMIT 3');
    expect(listed.rows).toEqual([1, 2, 3].map((id) => ({ id, email: '[redacted]' })));
    expect((await run(agent, "SELECT count(*)::int AS n FROM customers WHERE email LIKE 'user1%'")).rows).toEqual([{ n: 0 }]);
    const whole = await run(agent, 'SELECT to_jsonb(c) FROM customers c');
    expect(whole.code).toBe('42501');
    const audited = await (async () => {
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline) {
        const found = gateway.decisions.map((d) => d.decision as Record<string, unknown> | undefined).filter((d): d is Record<string, unknown> => d?.credential_id === agent.credential.id);
        if (found.length >= 3) return found;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return [];
    })();
    expect(audited.map((d) => d.event)).toEqual(['masked', 'masked', 'blocked']);
    expect(JSON.stringify(audited)).not.toMatch(/user\d+@example\.com/);
  });
});
