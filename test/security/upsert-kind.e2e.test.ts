/**
 * Red team: `INSERT ... ON CONFLICT DO UPDATE` updates the rows it conflicts with (PostgreSQL asks
 * for UPDATE privilege on them), so every rule on the kind `update` applies to it: statement_allow
 * without `update` (an append-only policy) and statement_deny of `update` refuse it, and an approval
 * rule holding updates holds it; on psql and node-postgres (extended, with parameters), nested in a
 * WITH, and through the hosted MCP. Before the fix it was only an insert: it overwrote rows.
 * `ON CONFLICT DO NOTHING` changes no row and stays an insert.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { pendingRequest } from '../support/approval-requests.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { adminRows } from '../support/pg.js';
import { createPolicy, registerOn } from '../support/proxy-agents.js';
import { runOnce } from '../support/wire.js';

let gateway: TestGateway;
let appendOnly: AgentSecrets;
let denier: AgentSecrets;
let held: AgentSecrets;

beforeAll(async () => {
  gateway = await startGateway('upsert_kind');
  const policy = (name: string, more: Record<string, unknown>) => createPolicy(gateway, { name, read_only: false, allowed_tables: ['public.*'], ...more });
  appendOnly = await registerOn(gateway, await policy('append only', { statement_allow: ['select', 'insert'] }), 'append');
  denier = await registerOn(gateway, await policy('no updates', { statement_deny: ['update'] }), 'denier');
  held = await registerOn(gateway, await policy('held updates', { approval: { held_kinds: ['update'], row_threshold: null } }), 'held');
});
afterAll(async () => {
  await gateway?.stop();
});

const total = async (id: number): Promise<number> => Number((await adminRows<{ t: string }>(gateway.upstream.url, `select total::text as t from orders where id = ${id}`))[0]!.t);

const upserts: readonly (readonly [string, string, unknown[] | undefined])[] = [
  ['psql-style simple query', "insert into orders values (1, 'x', 0) on conflict (id) do update set total = 0", undefined],
  ['extended protocol with parameters', 'insert into orders values ($1, $2, $3) on conflict (id) do update set total = excluded.total', [2, 'x', 0]],
  ['nested in a WITH', "with w as (insert into orders values (3, 'x', 0) on conflict on constraint orders_pkey do update set total = 0 returning 1) select count(*) from w", undefined],
  ['with a WHERE on the update', "insert into orders as o values (4, 'x', 0) on conflict (id) do update set total = 0 where o.id = 4", undefined],
];

describe('INSERT ... ON CONFLICT DO UPDATE is an update', () => {
  upserts.forEach(([how, sql, values], index) => {
    const id = index + 1;
    it(`statement_allow without update and statement_deny of update refuse it (${how})`, async () => {
      for (const [agent, rule] of [[appendOnly, 'statement_kind.not_allowed'], [denier, 'statement_kind.denied']] as const) {
        const client = new pg.Client({ connectionString: agent.connection_string });
        await client.connect();
        const error = await client.query({ text: sql, ...(values ? { values } : {}) }).then(() => undefined, (e: { code?: string; message: string }) => e);
        await client.end();
        expect(error?.code).toBe('42501');
        expect(error?.message).toContain(`runs an update as an INSERT ... ON CONFLICT DO UPDATE, and this credential's policy`);
        expect(error?.message).toContain(`(rule ${rule})`);
      }
      expect(await total(id)).toBe(id * 1.5);
    });
  });

  it('an approval rule holding updates holds it', async () => {
    const sql = "insert into orders values (5, 'x', 0) on conflict (id) do update set total = 0";
    const client = new pg.Client({ connectionString: held.connection_string });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const running = client.query(sql).then(() => 'it ran', (e: { code?: string }) => e.code);
      const request = await pendingRequest(gateway, held.credential.id, sql);
      expect(request.hold_rule).toBe('approval.held_kind');
      expect(request.hold_reason).toContain('it runs a statement of kind update');
      expect((await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${request.id}/reject`, payload: { reason: 'no' } })).statusCode).toBe(200);
      expect(await running).toBe('42501');
    } finally {
      await client.end();
    }
    expect(await total(5)).toBe(7.5);
  });

  it('through the hosted MCP query tool: refused for the append-only policy', async () => {
    const url = await listenForAgents(gateway);
    await withAgentMcp(`${url}/mcp`, appendOnly, async (client) => {
      const result = await callTool(client, 'query', { sql: "insert into orders values (6, 'x', 0) on conflict (id) do update set total = 0" });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain('decision_rule statement_kind.not_allowed, SQLSTATE 42501');
    });
    expect(await total(6)).toBe(9);
  });

  it('ON CONFLICT DO NOTHING and a plain INSERT stay inserts', async () => {
    expect(await runOnce(appendOnly.connection_string, "insert into orders values (7, 'x', 0) on conflict (id) do nothing")).toEqual({ rows: [] });
    expect(await runOnce(appendOnly.connection_string, "insert into orders values (7001, 'x', 0)")).toEqual({ rows: [] });
    expect(await total(7)).toBe(10.5);
  });
});
