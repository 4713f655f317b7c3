/**
 * Red team: masks are keyed by `schema.table.column`, and under a `schema.*` allowlist PostgreSQL
 * shows a masked table's rows under other names: a view or materialized view over it (at any
 * depth), a partition of a masked partitioned table (or the partitioned table of a masked
 * partition), an inheritance child of a masked table, a column typed as the masked table's rows.
 * Before the fix each returned the raw values. Now a view or materialized view reaching a masked
 * table is refused (`masked_columns.view`), a partition-tree member or inheritance child masks the
 * column as the table does, and a row-typed column is masked as a whole; on node-postgres simple
 * and extended and the hosted MCP `query` tool. Views over unmasked tables still run.
 */
import { wireOutcome, type WireOutcome } from '../support/wire-outcome.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { RAW_EMAIL } from '../support/proxy-agents.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let projection: AgentSecrets;
let denier: AgentSecrets;
let mcpUrl: string;

const RAW_NOTE = /note-secret-\d/;
const POLICY = {
  name: 'schema reader',
  read_only: true,
  allowed_tables: ['public.*'],
  masked_columns: { 'public.customers.email': 'redact', 'public.people.email': 'redact', 'public.events_1.note': 'redact' },
};

beforeAll(async () => {
  gateway = await startGateway('mask_reach');
  await admin(gateway.upstream.url, (client) =>
    client.query(`create view customer_contacts as select id, email as contact from customers;
      create view contact_list as select contact from customer_contacts;
      create materialized view customer_emails as select email from customers;
      create view order_totals as select id, total from orders;
      create view customer_ids as select id from customers;
      create table people (id int, email text) partition by range (id);
      create table people_a partition of people for values from (0) to (10);
      create table people_b partition of people for values from (10) to (20) partition by range (id);
      create table people_b1 partition of people_b for values from (10) to (20);
      insert into people values (1, 'user1@example.com'), (11, 'user11@example.com');
      create table events (id int, note text) partition by range (id);
      create table events_1 partition of events for values from (0) to (10);
      create table events_2 partition of events for values from (10) to (20);
      insert into events values (1, 'note-secret-1'), (11, 'public note');
      create table customers_archive (archived date) inherits (customers);
      insert into customers_archive values (100, 'user100@example.com', '2020-01-01');
      create table customer_snapshots (id int, snapshot customers, history customers[]);
      insert into customer_snapshots select 1, c, array[c] from customers c where id = 1;`),
  );
  agent = await registerAgentWith(gateway, POLICY);
  denier = await registerAgentWith(gateway, { name: 'denier', read_only: true, allowed_tables: ['public.*'], denied_tables: ['public.customers', 'public.people'] });
  projection = await registerAgentWith(gateway, { ...POLICY, name: 'projection reader', allowed_tables: ['public.customers', 'public.customer_ids', 'public.customer_contacts'] });
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

type Outcome = WireOutcome;

async function onWire(sql: string, mode: 'simple' | 'extended', as: AgentSecrets = agent): Promise<Outcome> {
  const client = new pg.Client({ connectionString: as.connection_string });
  await client.connect();
  try {
    return await wireOutcome(client, sql, mode);
  } finally {
    await client.end();
  }
}

async function onMcp(sql: string): Promise<{ isError: boolean; text: string }> {
  return withAgentMcp(mcpUrl, agent, async (client) => {
    const result = await callTool(client, 'query', { sql });
    return { isError: result.isError === true, text: JSON.stringify(result.structuredContent ?? textOf(result)) };
  });
}

describe('a view or materialized view over a masked table is refused', () => {
  const views = [
    ['a view renaming the masked column', 'SELECT contact FROM customer_contacts ORDER BY id', 'view public.customer_contacts'],
    ['a view over that view', 'SELECT contact FROM contact_list', 'view public.contact_list'],
    ['a materialized view', 'SELECT email FROM customer_emails', 'materialized view public.customer_emails'],
    ['a view in a subquery', 'SELECT id FROM customers WHERE id IN (SELECT id FROM customer_contacts WHERE contact LIKE $$user1%$$)', 'view public.customer_contacts'],
  ] as const;
  for (const [what, sql, named] of views) {
    it(`${what}, on the simple and extended protocol and MCP`, async () => {
      for (const mode of ['simple', 'extended'] as const) {
        const outcome = await onWire(sql, mode);
        expect(outcome, `${mode}: ${sql}`).toEqual({ code: '42501', message: expect.stringContaining(`${named} reads public.customers`) as unknown });
        expect((outcome as { message: string }).message).toContain('(rule masked_columns.view)');
      }
      const mcp = await onMcp(sql);
      expect(mcp.isError).toBe(true);
      expect(mcp.text).toContain('decision_rule masked_columns.view, SQLSTATE 42501');
      expect(mcp.text).not.toMatch(RAW_EMAIL);
    });
  }

  it('a view over unmasked tables still runs, and so does one allowed_tables names itself', async () => {
    for (const mode of ['simple', 'extended'] as const) {
      expect(await onWire('SELECT id, total FROM order_totals WHERE id <= 2 ORDER BY id', mode)).toEqual({ rows: [{ id: 1, total: '1.5' }, { id: 2, total: '3.0' }] });
      expect(await onWire('SELECT id FROM customer_ids WHERE id <= 2 ORDER BY id', mode, projection)).toEqual({ rows: [{ id: 1 }, { id: 2 }] });
      expect(await onWire('SELECT id FROM customer_ids WHERE id <= 2', mode)).toMatchObject({ code: '42501' });
    }
  });
});

describe('a view, partition or inheritance child of a denied table is refused as the table is', () => {
  it('on the simple and extended protocol and MCP (it returned the denied table’s rows)', async () => {
    for (const sql of ['SELECT contact FROM customer_contacts', 'SELECT email FROM customer_emails']) {
      for (const mode of ['simple', 'extended'] as const) {
        expect(await onWire(sql, mode, denier), `${mode}: ${sql}`).toEqual({ code: '42501', message: expect.stringContaining("reads public.customers, which is on this credential's denied tables (rule table.denied)") as unknown });
      }
      const mcp = await withAgentMcp(mcpUrl, denier, async (client) => callTool(client, 'query', { sql }));
      expect(mcp.isError).toBe(true);
      expect(JSON.stringify(mcp)).toContain('decision_rule table.denied, SQLSTATE 42501');
      expect(JSON.stringify(mcp)).not.toMatch(RAW_EMAIL);
    }
    expect(await onWire('SELECT id FROM order_totals WHERE id = 1', 'simple', denier)).toEqual({ rows: [{ id: 1 }] });
    for (const [sql, rowsOf] of [['SELECT email FROM people_b1', 'public.people'], ['SELECT email FROM customers_archive', 'public.customers']] as const) {
      for (const mode of ['simple', 'extended'] as const) {
        expect(await onWire(sql, mode, denier), `${mode}: ${sql}`).toEqual({ code: '42501', message: expect.stringContaining(`shows rows of ${rowsOf}, which is on this credential's denied tables`) as unknown });
      }
    }
  });
});

describe('partitions and inheritance children mask as their table does', () => {
  const masked = [
    ['a partition of a masked partitioned table', 'SELECT id, email FROM people_a', [{ id: 1, email: '[redacted]' }]],
    ['a partition two levels down, through *', 'SELECT * FROM people_b1', [{ id: 11, email: '[redacted]' }]],
    ['the intermediate partitioned table', 'SELECT email FROM people_b WHERE email LIKE $$user%$$', []],
    ['the partitioned table of a masked partition', 'SELECT id, note FROM events ORDER BY id', [{ id: 1, note: '[redacted]' }, { id: 11, note: '[redacted]' }]],
    ['an inheritance child of a masked table', 'SELECT id, email FROM customers_archive', [{ id: 100, email: '[redacted]' }]],
    ['the masked partition itself', 'SELECT note FROM events_1', [{ note: '[redacted]' }]],
    ['a sibling partition keeps its own column', 'SELECT note FROM events_2', [{ note: 'public note' }]],
  ] as const;
  for (const [what, sql, rows] of masked) {
    it(`${what}, on the simple and extended protocol and MCP`, async () => {
      for (const mode of ['simple', 'extended'] as const) expect(await onWire(sql, mode), `${mode}: ${sql}`).toEqual({ rows });
      const mcp = await onMcp(sql);
      expect(mcp.isError, mcp.text).toBe(false);
      expect(mcp.text).not.toMatch(RAW_EMAIL);
      expect(mcp.text).not.toMatch(RAW_NOTE);
    });
  }

  it('a column typed as a masked table’s rows (or an array of them) is masked as a whole, on the simple and extended protocol and MCP', async () => {
    for (const mode of ['simple', 'extended'] as const) {
      expect(await onWire('SELECT id, snapshot, history FROM customer_snapshots', mode)).toEqual({ rows: [{ id: 1, snapshot: '[redacted]', history: '[redacted]' }] });
      const field = await onWire('SELECT (snapshot).email FROM customer_snapshots', mode);
      expect(field).toMatchObject({ code: expect.stringMatching(/^42/) as unknown });
      expect(JSON.stringify(field)).not.toMatch(RAW_EMAIL);
      expect(await onWire('SELECT s FROM customer_snapshots s', mode)).toMatchObject({ code: '42501', message: expect.stringContaining('(rule masked_columns.whole_row)') as unknown });
    }
    const mcp = await onMcp('SELECT snapshot, history FROM customer_snapshots');
    expect(mcp.isError, mcp.text).toBe(false);
    expect(mcp.text).not.toMatch(RAW_EMAIL);
  });

  it('describe_table on MCP shows the mask a partition and an inheritance child are read through', async () => {
    const described = await withAgentMcp(mcpUrl, agent, async (client) => {
      const masks: Record<string, unknown> = {};
      for (const table of ['public.people_b1', 'public.customers_archive', 'public.events', 'public.events_2']) {
        const result = await callTool(client, 'describe_table', { table });
        const columns = (result.structuredContent as { columns: { name: string; masked: string | null }[] }).columns;
        for (const column of columns) masks[`${table}.${column.name}`] = column.masked;
      }
      return masks;
    });
    expect(described).toEqual({
      'public.people_b1.id': null, 'public.people_b1.email': 'redact',
      'public.customers_archive.id': null, 'public.customers_archive.email': 'redact', 'public.customers_archive.archived': null,
      'public.events.id': null, 'public.events.note': 'redact', 'public.events_2.id': null, 'public.events_2.note': null,
    });
  });
});
