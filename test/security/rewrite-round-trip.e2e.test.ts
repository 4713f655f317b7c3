/**
 * Red team, round 6: `timezone(zone, ts)`, a vetted function, was refused (statement.rewrite_failed)
 * wherever it was written as a call: the proxy qualifies vetted calls (`pg_catalog.timezone(...)`)
 * and the deparser wrote that as `ts AT TIME ZONE zone`, which parses back as another tree. So was
 * `ts AT TIME ZONE ('U' || 'TC')` in a statement rewritten for its masks, written back without the
 * parentheses its zone needs, and a subscript of an array built of a masked column,
 * `(ARRAY[email])[1]`, written back without its parentheses (masked_columns.rewrite_failed). Each
 * now runs, masked, on node-postgres simple and extended (the zone also as a parameter) and the
 * hosted MCP `query` tool.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { withAgentClient } from '../support/proxy-agents.js';
import { wireOutcome, type WireOutcome } from '../support/wire-outcome.js';

let gateway: TestGateway;
let reader: AgentSecrets;
let mcpUrl: string;

beforeAll(async () => {
  gateway = await startGateway('rewrite_round_trip');
  reader = await registerAgentWith(gateway, { name: 'reader', read_only: true, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'partial' } });
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

const onWire = (sql: string, mode: 'simple' | 'extended'): Promise<WireOutcome> => withAgentClient(reader, (client) => wireOutcome(client, sql, mode));

const ROW = { utc: '2026-01-02 03:04:05' };

const statements: readonly (readonly [string, string, Record<string, unknown>[]])[] = [
  ["timezone('UTC', ts)", "SELECT timezone('UTC', timestamptz '2026-01-02 03:04:05+00')::text AS utc", [ROW]],
  ['ts AT TIME ZONE, its zone in parentheses, in a masked rewrite', "SELECT (timestamptz '2026-01-02 03:04:05+00' AT TIME ZONE ('U' || 'TC'))::text AS utc, email FROM customers WHERE id = 1", [{ ...ROW, email: 'u***' }]],
  ['timezone() beside a masked column', "SELECT timezone('UTC', timestamptz '2026-01-02 03:04:05+00')::text AS utc, email FROM customers WHERE id = 1", [{ ...ROW, email: 'u***' }]],
  ['a subscript of an array of a masked column', 'SELECT (ARRAY[email, email])[2] AS second FROM customers WHERE id = 1', [{ second: 'u***' }]],
];

describe('statements whose rewrite the deparser wrote as another tree run, masked', () => {
  for (const [what, sql, expected] of statements) {
    it(`${what}: simple, extended and MCP`, async () => {
      for (const mode of ['simple', 'extended'] as const) expect(await onWire(sql, mode), mode).toEqual({ rows: expected });
      const result = await withAgentMcp(mcpUrl, reader, (client) => callTool(client, 'query', { sql }));
      expect(result.isError ?? false).toBe(false);
      expect((result.structuredContent as { rows: unknown[] }).rows).toEqual(expected.map((row) => Object.values(row)));
    });
  }

  it('the zone as a bound parameter: timezone($1, ts) on the extended protocol', async () => {
    const rows = await withAgentClient(reader, async (client) => (await client.query("SELECT timezone($1, timestamptz '2026-01-02 03:04:05+00')::text AS utc", ['UTC'])).rows);
    expect(rows).toEqual([ROW]);
  });
});
