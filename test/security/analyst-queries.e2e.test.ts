/**
 * Analyst queries the gateway used to refuse (issue 16), through the real proxy and the hosted MCP
 * query tool, under the red team's fixture: a read-only policy allowing public.orders and
 * public.customers, email and ssn redacted, max_rows 50. Each allowed query is checked for its
 * exact rows, and its column names and order against what PostgreSQL itself returns for the text.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { callTool, connectAgent, registerAgentWith, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { connectAgentClient } from '../support/proxy-agents.js';

const R = '[redacted]';
const RAW = /@corp\.example|\d{3}-\d{2}-\d{4}/;

let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;
let wire: pg.Client;
let mcp: Client;
let upstream: pg.Client;

type Row = unknown[];
interface Result {
  readonly fields: string[];
  readonly rows: Row[];
}

const SCHEMA = `
  drop table orders, customers;
  create table customers (id int primary key, name text, email text, ssn text);
  insert into customers values (1, 'Ann', 'ann@corp.example', '111-11-1111'), (2, 'Bo', 'bo@corp.example', '222-22-2222'), (3, 'Cy', 'cy@corp.example', '333-33-3333');
  create table orders (id int primary key, customer_id int, amount numeric);
  insert into orders values (1, 1, 10.00), (2, 1, 20.50), (3, 2, 7.25), (4, 3, 99.99);`;

beforeAll(async () => {
  gateway = await startGateway('analyst_queries');
  upstream = new pg.Client({ connectionString: gateway.upstream.url });
  await upstream.connect();
  await upstream.query(SCHEMA);
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  await gateway.api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = gateway.api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  agent = await registerAgentWith(gateway, {
    name: 'analyst',
    read_only: true,
    allowed_tables: ['public.orders', 'public.customers'],
    masked_columns: { 'public.customers.email': 'redact', 'public.customers.ssn': 'redact' },
    max_rows: 50,
  });
  wire = await connectAgentClient(agent);
  mcp = await connectAgent(`http://127.0.0.1:${address.port}/mcp`, agent.mcp_token, 'analyst-queries-test');
});

afterAll(async () => {
  await wire?.end();
  await mcp?.close();
  await upstream?.end();
  await ingest?.stop();
  await gateway?.stop();
});

async function viaWire(sql: string, protocol: 'simple' | 'extended'): Promise<Result> {
  const result = await wire.query({ text: sql, rowMode: 'array', ...(protocol === 'extended' ? { queryMode: 'extended' as const } : {}) });
  return { fields: result.fields.map((field) => field.name), rows: result.rows as Row[] };
}

async function viaMcp(sql: string): Promise<Result & { event: string }> {
  const result = await callTool(mcp, 'query', { sql });
  expect(result.isError, textOf(result)).toBeFalsy();
  const content = result.structuredContent as { columns: { name: string }[]; rows: Row[]; event: string };
  return { fields: content.columns.map((column) => column.name), rows: content.rows, event: content.event };
}

/** The columns PostgreSQL itself returns for the text, read as the upstream superuser. */
async function upstreamFields(sql: string): Promise<string[]> {
  const result = await upstream.query({ text: sql, rowMode: 'array' });
  return result.fields.map((field) => field.name);
}

/** Runs `sql` on the wire (simple and extended) and on MCP: each returns exactly `rows`, under PostgreSQL's own column names, and no raw masked value. */
async function expectRows(sql: string, rows: Row[], event: 'masked' | 'query' = 'masked'): Promise<void> {
  const fields = await upstreamFields(sql);
  for (const protocol of ['simple', 'extended'] as const) {
    const result = await viaWire(sql, protocol);
    expect(result.fields, `${protocol}: ${sql}`).toEqual(fields);
    expect(result.rows, `${protocol}: ${sql}`).toEqual(rows);
  }
  const result = await viaMcp(sql);
  expect(result.fields, `mcp: ${sql}`).toEqual(fields);
  expect(result.rows, `mcp: ${sql}`).toEqual(rows);
  expect(result.event).toBe(event);
  expect(JSON.stringify(result.rows)).not.toMatch(RAW);
}

/** Refused on the wire (both protocols) and on MCP, with `sqlstate` and a reason that names no parser node. */
async function expectRefused(sql: string, sqlstate: string, reason: RegExp): Promise<void> {
  for (const protocol of ['simple', 'extended'] as const) {
    const error = await viaWire(sql, protocol).then(
      () => undefined,
      (failure: { code?: string; message: string }) => failure,
    );
    expect(error, `${protocol}: ${sql}`).toMatchObject({ code: sqlstate });
    expect(error?.message).toMatch(reason);
    expect(error?.message).not.toMatch(/RangeTableSample|RangeVar|SubLink|FuncCall|CommonTableExpr|CTE(Search|Cycle)Clause/);
  }
  const result = await callTool(mcp, 'query', { sql });
  expect(result.isError).toBe(true);
  expect(textOf(result)).toMatch(reason);
}

const ann = [1, 'Ann', R, R];
const bo = [2, 'Bo', R, R];
const cy = [3, 'Cy', R, R];

describe('* over a table with masked columns, written out from the upstream catalog', () => {
  it('select *, c.*, TABLE and schema-qualified stars return every column, masked ones redacted', async () => {
    await expectRows('select * from customers order by id', [ann, bo, cy]);
    await expectRows('select c.* from customers c where c.id = 2', [bo]);
    await expectRows('TABLE customers', [ann, bo, cy]);
    await expectRows('select public.customers.*, 1 as one from public.customers where id = 3', [[...cy, 1]]);
  });

  it('* over a join lists each side in FROM order', async () => {
    await expectRows('select * from orders o join customers c on c.id = o.customer_id order by o.id', [
      [1, 1, '10.00', ...ann],
      [2, 1, '20.50', ...ann],
      [3, 2, '7.25', ...bo],
      [4, 3, '99.99', ...cy],
    ]);
    await expectRows('select o.*, c.name from orders o join customers c on c.id = o.customer_id where o.id = 4', [[4, 3, '99.99', 'Cy']], 'query');
  });

  it('* in subqueries, CTEs and set operations feeds masked values to the outer query', async () => {
    await expectRows('select s.name, s.email from (select * from customers) s order by s.id', [
      ['Ann', R],
      ['Bo', R],
      ['Cy', R],
    ]);
    await expectRows('with x as (select * from customers) select * from x where x.ssn = $$[redacted]$$ and id = 1', [ann]);
    await expectRows('select * from customers where id = 1 union all select * from customers where id = 3', [ann, cy]);
  });

  it('NATURAL JOIN on the unmasked key puts the merged column first', async () => {
    await expectRows('select * from customers natural join orders order by id', [
      [1, 'Ann', R, R, 1, '10.00'],
      [2, 'Bo', R, R, 1, '20.50'],
      [3, 'Cy', R, R, 2, '7.25'],
    ]);
  });

  it('a column alias list renames by position, and the mask follows the column', async () => {
    await expectRows('select c.i, c.n, c.e from customers as c(i, n, e) order by c.i', [
      [1, 'Ann', R],
      [2, 'Bo', R],
      [3, 'Cy', R],
    ]);
    await expectRows('select * from customers as c(i, n) where i = 2', [bo]);
  });

  it('a NATURAL JOIN whose common column is masked is refused', async () => {
    await expectRefused('select 1 from customers natural join customers as twin', '42501', /NATURAL JOIN compares masked column public\.customers\.\w+.*masked_columns\.unmaskable/);
  });
});

describe('TABLESAMPLE', () => {
  it('SYSTEM and BERNOULLI with a constant percentage and REPEATABLE seed run, masked', async () => {
    await expectRows('select id, email from customers tablesample bernoulli (100) repeatable (7) order by id', [
      [1, R],
      [2, R],
      [3, R],
    ]);
    await expectRows('select count(*) from orders tablesample system (100)', [['4']], 'query');
  });

  it('a sampling argument that is a subquery or function, or another method, is refused without parser node names', async () => {
    await expectRefused('select id from orders tablesample bernoulli ((select 10))', '0A000', /TABLESAMPLE argument that is not a constant/);
    await expectRefused('select id from orders tablesample bernoulli (length(current_user))', '0A000', /TABLESAMPLE argument that is not a constant/);
    await expectRefused('select id from orders tablesample system_rows (1)', '0A000', /only SYSTEM and BERNOULLI/);
  });
});

describe('WITH RECURSIVE ... SEARCH and CYCLE', () => {
  const chain = 'with recursive chain(id, mail) as (select id, email from customers where id = 1 union all select c.id, c.email from customers c join chain on c.id = chain.id + 1)';

  it('SEARCH DEPTH FIRST and BREADTH FIRST order the masked rows', async () => {
    await expectRows(`${chain} search depth first by id set ord select id, mail, ord::text from chain order by id`, [
      [1, R, '{(1)}'],
      [2, R, '{(1),(2)}'],
      [3, R, '{(1),(2),(3)}'],
    ]);
    await expectRows(`${chain} search breadth first by id set ord select id, mail from chain order by ord`, [
      [1, R],
      [2, R],
      [3, R],
    ]);
  });

  it('CYCLE over a masked column compares the masked values', async () => {
    await expectRows(
      'with recursive g(id, mail) as (select id, email from customers union all select g.id, g.mail from g) cycle mail set looped using path select id, mail, looped from g order by id, looped',
      [
        [1, R, false],
        [1, R, true],
        [2, R, false],
        [2, R, true],
        [3, R, false],
        [3, R, true],
      ],
    );
  });
});
