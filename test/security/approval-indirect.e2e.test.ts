/**
 * Red team: an approval rule that holds writes to a table (`approval.tables`) must hold the writes
 * that reach it without naming it: through an updatable view (UPDATE, DELETE, INSERT), through an
 * inheritance child (whose rows are the parent's rows), on the simple and extended protocols and
 * through the hosted MCP. Before the fix they ran at once. A write to another plain table still runs.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { pendingRequest } from '../support/approval-requests.js';
import { createPolicy, registerOn } from '../support/proxy-agents.js';

let gateway: TestGateway;
let agent: AgentSecrets;

beforeAll(async () => {
  gateway = await startGateway('approval_indirect');
  const seed = new pg.Client({ connectionString: gateway.upstream.url });
  await seed.connect();
  await seed.query(`create view orders_view as select * from orders;
    create table orders_child () inherits (orders);
    insert into orders_child values (5000, 'child', 1);
    create table notes (id int primary key, body text);`);
  await seed.end();
  const policy = await createPolicy(gateway, { name: 'held orders', read_only: false, allowed_tables: ['public.*'], approval: { held_kinds: [], tables: ['public.orders'], row_threshold: null } });
  agent = await registerOn(gateway, policy, 'writer');
});
afterAll(async () => {
  await gateway?.stop();
});

const pendingFor = (sql: string) => pendingRequest(gateway, agent.credential.id, sql);

async function upstream(sql: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return (await client.query({ text: sql, rowMode: 'array' })).rows;
  } finally {
    await client.end();
  }
}

/** Sends `sql` (with `values` on the extended protocol), expects it held, rejects it: the client gets 42501 and nothing changed upstream. */
async function heldThenRejected(sql: string, values: unknown[] | undefined, check: string): Promise<void> {
  const before = await upstream(check);
  const client = new pg.Client({ connectionString: agent.connection_string });
  await client.connect();
  try {
    const running = client.query({ text: sql, ...(values ? { values } : {}) }).then(() => undefined, (error: { code?: string; message: string }) => error);
    const request = await pendingFor(sql);
    expect(request.hold_rule).toBe('approval.held_table');
    expect(request.hold_reason).toContain('through which writes may reach tables');
    const rejected = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${request.id}/reject`, payload: { reason: 'no' } });
    expect(rejected.statusCode).toBe(200);
    const error = await running;
    expect(error?.code).toBe('42501');
    expect(error?.message).toContain('rule approval.rejected');
  } finally {
    await client.end();
  }
  expect(await upstream(check)).toEqual(before);
}

describe('writes that reach a held table without naming it are held', () => {
  const cases: readonly (readonly [string, string, unknown[] | undefined, string])[] = [
    ['UPDATE of a view over it (simple protocol)', 'update orders_view set total = 1 where id = 2', undefined, 'select total from orders where id = 2'],
    ['DELETE through the view', 'delete from orders_view where id = 3', undefined, 'select count(*) from orders where id = 3'],
    ['INSERT through the view', "insert into orders_view values (4000, 'v', 1)", undefined, 'select count(*) from orders where id = 4000'],
    ['UPDATE of the view with parameters (extended protocol)', 'update orders_view set total = $1 where id = $2', [1, 9], 'select total from orders where id = 9'],
    ['INSERT into an inheritance child', "insert into orders_child values (5001, 'child', 1)", undefined, 'select count(*) from orders'],
    ['UPDATE of an inheritance child', 'update orders_child set total = 2', undefined, 'select total from orders where id = 5000'],
  ];
  for (const [what, sql, values, check] of cases) it(what, () => heldThenRejected(sql, values, check));

  it('through the hosted MCP query tool', async () => {
    const url = await listenForAgents(gateway);
    const sql = 'update orders_view set total = 1 where id = 11';
    await withAgentMcp(`${url}/mcp`, agent, async (client) => {
      const held = await callTool(client, 'query', { sql });
      expect(held.isError).toBe(true);
      expect(textOf(held)).toContain('Held for a human’s approval');
    });
    expect((await pendingFor(sql)).hold_reason).toContain('it writes public.orders_view, a view');
    expect(await upstream('select total from orders where id = 11')).toEqual([['16.5']]);
  });

  it('a write to another plain table still runs at once', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    try {
      expect((await client.query("insert into notes values (1, 'x')")).rowCount).toBe(1);
    } finally {
      await client.end();
    }
  });
});
