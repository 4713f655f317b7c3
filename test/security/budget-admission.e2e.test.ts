/**
 * A daily statement budget on the wire counts every statement as it is sent to run: one prepared
 * once and executed again and again, and statements pipelined before the first of them ends, are
 * stopped at the budget like any other (53400, audited as budget_exhausted).
 */
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;

beforeAll(async () => {
  gateway = await startGateway('budget_admission');
});
afterAll(async () => {
  await gateway?.stop();
});

/** An agent whose policy allows three statements a day. */
async function threeADay(name: string): Promise<AgentSecrets> {
  const policy = await gateway.api.call(gateway.owner.apiKey, {
    method: 'POST',
    url: `/v1/projects/${gateway.projectId}/policies`,
    payload: { name: `three a day for ${name}`, read_only: true, allowed_tables: ['public.orders'], queries_per_day: 3 },
  });
  const registered = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents`, payload: { name, policy_profile_id: (policy.json() as { id: string }).id } });
  return registered.json() as AgentSecrets;
}

describe('a daily statement budget', () => {
  it('stops a statement prepared once and executed again and again', async () => {
    const agent = await threeADay('prepared');
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    try {
      const outcomes: string[] = [];
      for (let i = 0; i < 5; i++) {
        outcomes.push(await client.query({ name: 'count_orders', text: 'select count(*)::int as n from orders' }).then((r) => String(r.rows[0].n), (error: { code?: string }) => error.code ?? 'error'));
      }
      expect(outcomes).toEqual(['1000', '1000', '1000', '53400', '53400']);
    } finally {
      await client.end();
    }
    const refusals = (await gateway.decisionsOf(agent.credential.id, 5)).filter((d) => d.event === 'budget_exhausted');
    expect(refusals).toEqual([expect.objectContaining({ sql: 'select count(*)::int as n from orders', decision_rule: 'budget.queries_per_day' }), expect.objectContaining({ decision_rule: 'budget.queries_per_day' })]);
  });

  it('stops statements pipelined before the first of them ended', async () => {
    const agent = await threeADay('pipelined');
    const sql = postgres(agent.connection_string, { max: 1, prepare: false, fetch_types: false, onnotice: () => undefined });
    try {
      // postgres.js writes all ten on its one connection before reading any answer.
      const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => sql.unsafe(`select ${i} as n`).then(() => 'ran', (error: { code?: string }) => error.code ?? 'error')));
      expect(outcomes.filter((o) => o === 'ran')).toHaveLength(3);
      expect(outcomes.filter((o) => o === '53400')).toHaveLength(7);
    } finally {
      await sql.end();
    }
  });
});
