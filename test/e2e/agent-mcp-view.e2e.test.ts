import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAgentDocs } from '../../src/mcp/docs.js';
import { callTool, connectAgent, listenForAgents, registerAgentWith, textOf } from '../support/agent-mcp.js';
import { startGateway, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;
let client: Client;

/** A successful tool call's structured content. */
async function ok<T = Record<string, unknown>>(name: string, args: Record<string, unknown> = {}): Promise<T> {
  const result = await callTool(client, name, args);
  expect(result.isError, textOf(result)).toBeFalsy();
  return result.structuredContent as T;
}

beforeAll(async () => {
  gateway = await startGateway('agent_view');
  const seed = new pg.Client({ connectionString: gateway.upstream.url });
  await seed.connect();
  // Autovacuum off: nothing may analyze them while the test runs.
  await seed.query(`create table never_500 (id int) with (autovacuum_enabled = false);
    insert into never_500 select generate_series(1, 500);
    create table never_5000 (id int) with (autovacuum_enabled = false);
    insert into never_5000 select generate_series(1, 5000);
    create table analyzed_2000 (id int) with (autovacuum_enabled = false);
    insert into analyzed_2000 select generate_series(1, 2000);
    analyze analyzed_2000;
    create view order_totals as select customer, sum(total) as total from orders group by customer;`);
  const { rows } = await seed.query<{ relname: string; reltuples: number }>(`select relname, reltuples from pg_class where relname in ('never_500', 'never_5000', 'analyzed_2000') order by relname`);
  await seed.end();
  // PostgreSQL 14 and later say "never analyzed" with -1.
  expect(rows).toEqual([
    { relname: 'analyzed_2000', reltuples: 2000 },
    { relname: 'never_500', reltuples: -1 },
    { relname: 'never_5000', reltuples: -1 },
  ]);
  const agent = await registerAgentWith(gateway, {
    name: 'viewer',
    read_only: true,
    allowed_tables: ['public.never_500', 'public.never_5000', 'public.analyzed_2000', 'public.order_totals'],
    max_rows: 50,
  });
  client = await connectAgent(`${await listenForAgents(gateway)}/mcp`, agent.mcp_token, 'pgward-agent-view-test');
});
afterAll(async () => {
  await client?.close();
  await gateway?.stop();
});

describe('list_tables', () => {
  it('reports the estimate of a table never analyzed as unknown (null), not 0, and an analyzed one’s estimate', async () => {
    const { tables } = await ok<{ tables: { table: string; kind: string; estimated_rows: number | null }[] }>('list_tables');
    expect(tables.map(({ table, kind, estimated_rows }) => [table, kind, estimated_rows])).toEqual([
      ['public.analyzed_2000', 'table', 2000],
      ['public.never_500', 'table', null],
      ['public.never_5000', 'table', null],
      ['public.order_totals', 'view', null],
    ]);
    expect(await ok('query', { sql: 'SELECT (SELECT count(*) FROM never_500) AS a, (SELECT count(*) FROM never_5000) AS b' })).toMatchObject({ rows: [['500', '5000']] });
    const described = await ok<{ estimated_rows: number | null }>('describe_table', { table: 'never_5000' });
    expect(described.estimated_rows).toBeNull();
  });
});

describe('query', () => {
  it('gives a result cut at a row cap the command tag of the rows returned', async () => {
    expect(await ok('query', { sql: 'SELECT id FROM never_500 ORDER BY id' })).toMatchObject({ row_count: 50, truncated: true, command: 'SELECT 50', event: 'truncated', decision_rule: 'max_rows.policy' });
    expect(await ok('query', { sql: 'SELECT id FROM never_500 ORDER BY id', max_rows: 7 })).toMatchObject({ row_count: 7, truncated: true, command: 'SELECT 7', decision_rule: 'max_rows.request' });
    expect(await ok('query', { sql: 'SELECT id FROM never_500 WHERE id <= 3' })).toMatchObject({ row_count: 3, truncated: false, command: 'SELECT 3' });
  });
});

describe('the docs', () => {
  interface Page {
    doc_id: string;
    title: string;
    text: string;
    offset: number;
    next_offset: number | null;
    total_chars: number;
  }

  it('read_doc pages every document, a bounded size per call, and the pages make up the document', async () => {
    const library = await loadAgentDocs();
    for (const doc of library.docs) {
      let text = '';
      for (let offset: number | null = 0; offset !== null; ) {
        const page: Page = await ok<Page>('read_doc', { doc_id: doc.id, offset, max_chars: 1000 });
        expect(page).toMatchObject({ doc_id: doc.id, title: doc.title, offset, total_chars: doc.text.length });
        expect(page.text.length).toBeLessThanOrEqual(1000);
        text += page.text;
        offset = page.next_offset;
      }
      expect(text).toBe(doc.text);
    }
  });

  it('read_doc returns at most 8,000 characters by default, and refuses an offset past the end', async () => {
    const first = await ok<Page>('read_doc', { doc_id: 'refusals' });
    expect(first.total_chars).toBeGreaterThan(8000);
    expect(first.text.length).toBeLessThanOrEqual(8000);
    expect(first.next_offset).toBe(first.text.length);
    // Paged to the end: each page starts where the one before said.
    let text = first.text;
    for (let page = first; page.next_offset !== null; ) {
      const next = await ok<Page>('read_doc', { doc_id: 'refusals', offset: page.next_offset });
      expect(next.offset).toBe(page.next_offset);
      expect(next.text.length).toBeLessThanOrEqual(8000);
      text += next.text;
      page = next;
    }
    expect(text).toMatch(/^# Refusals[\s\S]*HTTP 401 \| MCP \|/);
    const bigger = await callTool(client, 'read_doc', { doc_id: 'refusals', max_chars: 8001 });
    expect(textOf(bigger)).toMatch(/^Invalid arguments for read_doc: max_chars: /);
    const past = await callTool(client, 'read_doc', { doc_id: 'tools', offset: 1_000_000 });
    expect(past.isError).toBe(true);
    expect(textOf(past)).toMatch(/^offset 1000000 is past the end of "tools", which has \d+ characters; start again at 0\.$/);
  });

  it('serve the agent documents only: none of the operator docs, their internals or their limits', async () => {
    for (const doc_id of ['mcp', 'proxy', 'architecture', 'audit', 'operations', 'benchmarks', 'policy#known-limits', 'policy#caching']) {
      const result = await callTool(client, 'read_doc', { doc_id });
      expect(result.isError, doc_id).toBe(true);
      expect(textOf(result)).toBe(`Unknown doc_id "${doc_id}". Documents: policy, querying, refusals, tools; search_docs finds sections.`);
    }
    expect(await ok('read_doc', { doc_id: 'policy', max_chars: 200 })).toMatchObject({ title: 'Your policy' });
    for (const query of ['AnalysisCache fingerprint', 'mask.ts rewrite deparse', 'known limits masking']) {
      const { results } = await ok<{ results: { doc_id: string; snippet: string }[] }>('search_docs', { query, limit: 20 });
      expect(results.map((r) => r.doc_id.split('#')[0]).every((doc) => ['policy', 'querying', 'refusals', 'tools'].includes(doc!))).toBe(true);
      expect(results.map((r) => r.snippet).join(' ')).not.toMatch(/AnalysisCache|fingerprint|mask\.ts|known limit/i);
    }
    const { results } = await ok<{ results: { doc_id: string }[] }>('search_docs', { query: 'what does allowed_tables.not_allowed ask of me', limit: 1 });
    expect(results.map((r) => r.doc_id)).toEqual(['refusals#tables']);
  });
});
