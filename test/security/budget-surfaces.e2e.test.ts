/**
 * Issue 16, class 10: a credential's budget is one budget whichever way its statements come in.
 * With queries_per_day = 3, the wire and the hosted MCP of one process count against one tally:
 * three statements pipelined on the wire leave nothing for an MCP batch sent right after, and the
 * other way round. (Across processes the tally is re-read from the trail every BUDGET_REFRESH_MS:
 * test/unit/budgets.unit.test.ts.)
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenForAgents, registerAgentWith } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;
let base: string;

const threeADay = (name: string): Promise<AgentSecrets> => registerAgentWith(gateway, { name, read_only: true, allowed_tables: ['public.orders'], queries_per_day: 3 });

/** One POST carrying a JSON-RPC batch of `query` calls; each answer as 'ran' or the refusal's rule. */
async function mcpBatch(token: string, sqls: readonly string[]): Promise<string[]> {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-03-26' },
    body: JSON.stringify(sqls.map((sql, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { name: 'query', arguments: { sql } } }))),
  });
  expect(response.status).toBe(200);
  const answers = (await response.json()) as { id: number; result: CallToolResult }[];
  return answers.sort((a, b) => a.id - b.id).map((answer) => (answer.result.isError ? String((answer.result._meta?.['pgward/decision'] as { decision_rule?: string } | undefined)?.decision_rule) : 'ran'));
}

/** Statements pipelined on one wire connection (postgres.js writes them all before reading), each as 'ran' or its SQLSTATE. */
async function wirePipelined(secrets: AgentSecrets, sqls: readonly string[]): Promise<string[]> {
  const sql = postgres(secrets.connection_string, { max: 1, prepare: false, fetch_types: false, onnotice: () => undefined });
  try {
    return await Promise.all(sqls.map((text) => sql.unsafe(text).then(() => 'ran', (error: { code?: string }) => error.code ?? 'error')));
  } finally {
    await sql.end();
  }
}

/** Statements one after another on the simple protocol. */
async function wireSimple(secrets: AgentSecrets, sqls: readonly string[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: secrets.connection_string });
  await client.connect();
  try {
    const outcomes: string[] = [];
    for (const text of sqls) outcomes.push(await client.query(text).then(() => 'ran', (error: { code?: string }) => error.code ?? 'error'));
    return outcomes;
  } finally {
    await client.end();
  }
}

const THREE = ['select 1 as n', 'select 2 as n', 'select 3 as n'];

beforeAll(async () => {
  gateway = await startGateway('budget_surfaces');
  base = await listenForAgents(gateway);
});
afterAll(async () => {
  await gateway?.stop();
});

describe('one daily budget across the wire and the hosted MCP', () => {
  it('wire then MCP: three pipelined on the wire, then an MCP batch right after runs none (the reproducer)', async () => {
    const agent = await threeADay('wire first');
    expect(await wirePipelined(agent, THREE)).toEqual(['ran', 'ran', 'ran']);
    expect(await mcpBatch(agent.mcp_token, THREE)).toEqual(['budget.queries_per_day', 'budget.queries_per_day', 'budget.queries_per_day']);
  });

  it('MCP then wire: an MCP batch of three, then the wire, pipelined or not, runs none', async () => {
    const agent = await threeADay('mcp first');
    expect(await mcpBatch(agent.mcp_token, THREE)).toEqual(['ran', 'ran', 'ran']);
    expect(await wirePipelined(agent, THREE)).toEqual(['53400', '53400', '53400']);
    expect(await wireSimple(agent, ['select 4 as n'])).toEqual(['53400']);
  });

  it('split between them: two on the wire leave one for the MCP batch, and none for the wire after it', async () => {
    const agent = await threeADay('split');
    expect(await wireSimple(agent, ['select 1 as n', 'select 2 as n'])).toEqual(['ran', 'ran']);
    // JSON-RPC lets a server answer a batch's calls concurrently (the SDK does): which one runs is not ordered.
    expect((await mcpBatch(agent.mcp_token, THREE)).sort()).toEqual(['budget.queries_per_day', 'budget.queries_per_day', 'ran']);
    expect(await wirePipelined(agent, ['select 5 as n'])).toEqual(['53400']);
  });

  it('wire and MCP at the same moment still run three in all', async () => {
    const agent = await threeADay('together');
    const [onWire, onMcp] = await Promise.all([wirePipelined(agent, THREE), mcpBatch(agent.mcp_token, THREE)]);
    expect([...onWire, ...onMcp].filter((outcome) => outcome === 'ran')).toHaveLength(3);
    const audited = await gateway.decisionsOf(agent.credential.id, 6);
    expect(audited.filter((d) => d.event === 'budget_exhausted')).toHaveLength(3);
    expect(audited.filter((d) => d.event === 'query')).toHaveLength(3);
  });
});
