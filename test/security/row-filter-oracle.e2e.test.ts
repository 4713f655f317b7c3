/**
 * Red team, round 6: a row filter's stand-in subquery, `(SELECT * FROM ONLY orders WHERE <filter>)`,
 * was pulled up into the agent's statement, so the planner ordered the agent's own WHERE by cost
 * with the filter's: under a costlier filter (an IN list) `WHERE 100 / (id - 777) > -1000` ran on
 * filtered rows and answered `division by zero`, telling that a row the filter hides exists (an
 * error oracle on hidden rows). The stand-in now ends in OFFSET 0, which PostgreSQL neither pulls
 * up nor pushes quals into: the agent's predicates see only the rows the filter allows. On
 * node-postgres simple and extended and the hosted MCP `query` tool.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { withAgentClient } from '../support/proxy-agents.js';
import { wireOutcome, type WireOutcome } from '../support/wire-outcome.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let mcpUrl: string;

/** Hides the orders of customers c0 and c7 (ids ending in 0 or 7): 800 of the 1,000 rows stay. */
const FILTER = "customer IN ('c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c8', 'c9')";

beforeAll(async () => {
  gateway = await startGateway('row_filter_oracle');
  agent = await registerAgentWith(gateway, { name: 'tenant', read_only: true, allowed_tables: ['public.*'], row_filters: { 'public.orders': FILTER } });
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

const onWire = (sql: string, mode: 'simple' | 'extended'): Promise<WireOutcome> => withAgentClient(agent, (client) => wireOutcome(client, sql, mode));

/** Each divides by zero on the hidden order 777 alone: run on the filtered rows, none fails. */
const probes = [
  ['a WHERE of its own', 'SELECT count(*)::int AS n FROM orders WHERE 100 / (id - 777) > -1000'],
  ['a WHERE over a join', 'SELECT count(*)::int AS n FROM orders o JOIN customers c ON c.id = o.id % 10 + 1 WHERE 100 / (o.id - 777) > -1000'],
  ['a WHERE in a subquery', 'SELECT count(*)::int AS n FROM (SELECT id FROM orders WHERE 100 / (id - 777) > -1000) s'],
] as const;

describe('an error the agent’s predicate raises tells nothing of the rows a row filter hides', () => {
  for (const [what, sql] of probes) {
    it(`${what}: the 800 allowed rows, never division by zero; simple, extended and MCP`, async () => {
      for (const mode of ['simple', 'extended'] as const) expect(await onWire(sql, mode), mode).toEqual({ rows: [{ n: 800 }] });
      const result = await withAgentMcp(mcpUrl, agent, (client) => callTool(client, 'query', { sql }));
      expect(result.isError ?? false).toBe(false);
      expect((result.structuredContent as { rows: unknown[] }).rows).toEqual([[800]]);
    });
  }

  it('an allowed row still fails the agent’s own predicate as it would on PostgreSQL', async () => {
    expect(await onWire('SELECT count(*)::int AS n FROM orders WHERE 100 / (id - 771) > -1000', 'simple')).toEqual({ code: '22012', message: 'division by zero' });
  });
});
