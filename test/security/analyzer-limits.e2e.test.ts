/**
 * Issue 16, class 8: a statement too deep or too large for the policy analyzer is refused with
 * SQLSTATE 54001 (rule parse.too_complex), on the wire (simple and extended) and on MCP alike: never
 * an internal error, the session lives on, and the refusal is audited. Each shape below nests the
 * parse tree its own way, or makes the analysis work more than its budget (parse tree nodes,
 * name-binding steps) within the 64 KB size limit; flat shapes analysts write (long AND/OR chains,
 * IN lists) run.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectAgent, listenForAgents, registerAgentWith, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { recordedFor } from '../support/recorded.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let wire: pg.Client;
let mcp: Client;

const terms = (n: number, term: (i: number) => string, separator: string): string => Array.from({ length: n }, (_, i) => term(i)).join(separator);

/** Statements nested past the analyzer's limit, each under the 64 KB size limit. */
const TOO_DEEP: Record<string, string> = {
  'a 4,000-term || chain (the reproducer)': `select ${terms(4_000, (i) => `'a${i % 10}'`, ' || ')} from orders`,
  'a 1,000-term + chain': `select ${terms(1_000, () => 'id', ' + ')} from orders`,
  '300 nested scalar subqueries': `select ${'(select '.repeat(300)}1${')'.repeat(300)} from orders`,
  '300 nested derived tables': `select id from ${'(select id from '.repeat(300)}orders${') s'.repeat(300)}`,
  '300 nested CASEs': `select ${'case when id = 1 then '.repeat(300)}1${' end'.repeat(300)} from orders`,
  '1,000 nested ARRAYs': `select ${'array['.repeat(1_000)}1${']'.repeat(1_000)} from orders`,
  'a 1,000-step JSON path': `select '{}'::jsonb${terms(1_000, (i) => ` -> 'k${i % 10}'`, '')} from orders`,
  '1,000 UNIONs': terms(1_000, (i) => `select ${i}`, ' union '),
  '1,000 NOTs': `select id from orders where ${'not '.repeat(1_000)}true`,
  '1,000 nested COALESCEs': `select ${'coalesce('.repeat(1_000)}id${', 0)'.repeat(1_000)} from orders`,
  '12,000 parentheses (past the grammar’s own stack)': `select ${'('.repeat(12_000)}1${')'.repeat(12_000)} from orders`,
};

/** Statements under the size limit and the depth limit that need more work than the analyzer's budget. */
const TOO_MUCH: Record<string, string> = {
  'a select list of 8,000 names (past the node limit)': `select ${terms(8_000, () => 'id', ', ')} from orders`,
  '4,000 ANDed comparisons (past the node limit)': `select count(*) from orders where ${terms(4_000, (i) => `id <> ${i}`, ' and ')}`,
  '2,400 names over 2,400 FROM items (past the binding budget)': `select ${terms(2_400, () => 'id', ', ')} from ${terms(2_400, (i) => `orders o${i}`, ', ')}`,
  '2,000 scalar subqueries over 2,000 FROM items': `select ${terms(2_000, () => '(select id)', ', ')} from ${terms(2_000, (i) => `orders o${i}`, ', ')}`,
  'masked names over 2,100 FROM items': `select ${terms(2_100, () => 'email', ', ')} from ${terms(2_100, (i) => `customers c${i}`, ', ')}`,
  '4,000 references to a masked column (its rewrite past the node limit)': `select ${terms(4_000, () => 'email', ', ')} from customers`,
  '2,000 derived tables': `select 1 from ${terms(2_000, (i) => `(select id from orders) s${i}`, ', ')}`,
};

const CASES = { ...TOO_DEEP, ...TOO_MUCH };

const REASON =
  /^the statement (is nested more than 1000 levels deep|is nested too deeply for the SQL grammar|is too complex for the policy analyzer|has more than 40000 parse tree nodes|would have more than 40000 parse tree nodes once its 4000 references to masked columns are masked|needs more than 500000 steps to bind its column names \(column references times the FROM items in scope\)) \(rule parse\.too_complex\)\. Split it into (simpler|several smaller) statements/;

/** How long a refusal may take, round trip and audit included: it is decided without running the statement's whole analysis. */
const REFUSED_WITHIN_MS = 1_500;

const decisionOn = (sql: string, source: 'wire' | 'mcp') => recordedFor(gateway, agent.credential.id, source, sql);

async function upstreamOrders(): Promise<number> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>('select count(*)::int as n from orders')).rows[0]!.n;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  gateway = await startGateway('analyzer_limits');
  agent = await registerAgentWith(gateway, { name: 'deep', read_only: true, allowed_tables: ['public.orders', 'public.customers'], masked_columns: { 'public.customers.email': 'redact' }, max_rows: 50 });
  wire = new pg.Client({ connectionString: agent.connection_string });
  await wire.connect();
  mcp = await connectAgent(`${await listenForAgents(gateway)}/mcp`, agent.mcp_token, 'deep');
});
afterAll(async () => {
  await wire?.end();
  await mcp?.close();
  await gateway?.stop();
});

describe('statements too deep for the analyzer', () => {
  it.each(Object.entries(CASES))('%s: 54001 on the simple protocol within a bounded time, audited, and the session answers the next query', async (_what, sql) => {
    expect(Buffer.byteLength(sql)).toBeLessThan(64 * 1024);
    const started = performance.now();
    const error = (await wire.query(sql).then(() => undefined, (e: unknown) => e)) as { code?: string; message?: string; severity?: string } | undefined;
    expect(performance.now() - started).toBeLessThan(REFUSED_WITHIN_MS);
    expect(error?.code).toBe('54001');
    expect(error?.severity).toBe('ERROR');
    expect(error?.message).toMatch(REASON);
    expect((await wire.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
    expect(await decisionOn(sql, 'wire')).toMatchObject({ event: 'blocked', decision_rule: 'parse.too_complex' });
  });

  it.each(Object.entries(CASES))('%s: 54001 on the extended protocol within a bounded time, and the session answers the next query', async (_what, sql) => {
    const started = performance.now();
    const error = (await wire.query({ text: sql, values: [] }).then(() => undefined, (e: unknown) => e)) as { code?: string; message?: string } | undefined;
    expect(performance.now() - started).toBeLessThan(REFUSED_WITHIN_MS);
    expect(error?.code).toBe('54001');
    expect(error?.message).toMatch(REASON);
    expect((await wire.query({ text: 'select count(*)::int as n from orders where id > $1', values: [0] })).rows).toEqual([{ n: 1000 }]);
  });

  it.each(Object.entries(CASES))('%s: refused on MCP with the rule and SQLSTATE within a bounded time, audited', async (_what, sql) => {
    const started = performance.now();
    const refused = await callTool(mcp, 'query', { sql });
    expect(performance.now() - started).toBeLessThan(REFUSED_WITHIN_MS);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^Refused by the policy \(decision_rule parse\.too_complex, SQLSTATE 54001\): the statement /);
    expect(refused._meta?.['pgward/decision']).toMatchObject({ event: 'blocked', decision_rule: 'parse.too_complex', sqlstate: '54001' });
    expect(await decisionOn(sql, 'mcp')).toMatchObject({ event: 'blocked', decision_rule: 'parse.too_complex' });
    const next = await callTool(mcp, 'query', { sql: 'select count(*)::int as n from orders' });
    expect(next.structuredContent).toMatchObject({ rows: [[1000]] });
  });

  it('a masked column deep in a chain just under the limit is still masked, not an internal error', async () => {
    const sql = `select ${terms(400, () => 'email', ' || ')} as e from customers where id = 1`;
    const { rows } = await wire.query(sql);
    expect(rows).toHaveLength(1);
    expect(String(rows[0].e)).not.toMatch(/@example\.com/);
  });

  it('flat shapes analysts write run: 2,500 ANDs, 2,500 ORs and a 10,000-item IN list', async () => {
    expect((await wire.query(`select count(*)::int as n from orders where ${terms(2_500, (i) => `id <> ${i + 2000}`, ' and ')}`)).rows).toEqual([{ n: 1000 }]);
    expect((await wire.query(`select count(*)::int as n from orders where ${terms(2_500, (i) => `id = ${i}`, ' or ')}`)).rows).toEqual([{ n: 1000 }]);
    expect((await wire.query(`select count(*)::int as n from orders where id in (${terms(10_000, (i) => `${i}`, ',')})`)).rows).toEqual([{ n: 1000 }]);
    expect(await upstreamOrders()).toBe(1000);
  });

  it('wide statements analysts write run: 100 self-joins with qualified names, 200 chained CTEs', async () => {
    const joins = `select count(*)::int as n from orders t0 ${terms(99, (i) => `join orders t${i + 1} on t${i + 1}.id = t${i}.id`, ' ')} where ${terms(100, (i) => `t${i}.id > 0`, ' and ')}`;
    expect((await wire.query(joins)).rows).toEqual([{ n: 1000 }]);
    const ctes = `with ${terms(200, (i) => `c${i} as (select id from ${i === 0 ? 'orders' : `c${i - 1}`} where id > ${i})`, ', ')} select count(*)::int as n from c199`;
    expect((await wire.query(ctes)).rows).toEqual([{ n: 801 }]);
  });
});
