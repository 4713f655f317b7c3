/**
 * Red team: masks and denials follow views and partitions through the gateway's snapshot of the
 * upstream catalog, read every ~30 s. A view over a masked or denied table created since the last
 * read (on the upstream directly, or by the agent through the gateway) was unknown to it, and read
 * with the raw values until the next read; so was a view the agent replaced with CREATE OR REPLACE
 * (decided on its old definition). Now a statement naming a relation the snapshot lacks has the
 * catalog read again and is decided on it (refused, catalog.relation_unknown, when it is still not
 * there: created in an open transaction, or not at all), and a schema change run through the
 * gateway is read before the next statement is decided; on node-postgres simple and extended and
 * the hosted MCP `query` tool.
 */
import { wireOutcome, type WireOutcome } from '../support/wire-outcome.js';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { RAW_EMAIL } from '../support/proxy-agents.js';

let gateway: TestGateway;
let writer: AgentSecrets;
let denier: AgentSecrets;
let mcpUrl: string;

/** Past FRESH_MS: the snapshot the statement finds is read again. */
const PAST_FRESH_MS = 1_100;

beforeAll(async () => {
  gateway = await startGateway('catalog_freshness');
  writer = await registerAgentWith(gateway, { name: 'writer', read_only: false, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'redact' } });
  denier = await registerAgentWith(gateway, { name: 'denier', read_only: true, allowed_tables: ['public.*'], denied_tables: ['public.customers'] });
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

type Outcome = WireOutcome;

const run = wireOutcome;

async function session<T>(as: AgentSecrets, body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: as.connection_string });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

async function onMcp(as: AgentSecrets, sql: string): Promise<string> {
  return withAgentMcp(mcpUrl, as, async (client) => {
    const result = await callTool(client, 'query', { sql });
    return `${result.isError === true ? 'error' : 'ok'} ${JSON.stringify(result.structuredContent ?? textOf(result))}`;
  });
}

const refusedAs = (rule: string): Outcome => ({ code: '42501', message: expect.stringContaining(`(rule ${rule})`) as unknown as string });

describe('a relation the agent creates through the gateway is decided on the catalog it made', () => {
  it('CREATE VIEW is refused through the gateway (parse.unsupported): an agent makes no view', async () => {
    await session(writer, async (client) => {
      expect(await run(client, 'create view agent_view as select * from customers', 'simple')).toMatchObject({ code: '0A000', message: expect.stringContaining('(rule parse.unsupported)') as unknown });
    });
  });

  it('CREATE TABLE with a column of a masked table’s rows, then at once a read of it: masked, simple and extended', async () => {
    await session(writer, async (client) => {
      for (const mode of ['simple', 'extended'] as const) {
        const table = `agent_snapshots_${mode}`;
        expect(await run(client, `create table ${table} (id int, snapshot customers)`, mode), mode).toEqual({ rows: [] });
        await admin(gateway.upstream.url, (upstream) => upstream.query(`insert into ${table} select 1, c from customers c where id = 1`));
        expect(await run(client, `select id, snapshot from ${table}`, mode), mode).toEqual({ rows: [{ id: 1, snapshot: '[redacted]' }] });
      }
    });
  });

  it('a table created in the open transaction is refused catalog.relation_unknown, never read', async () => {
    await session(writer, async (client) => {
      for (const mode of ['simple', 'extended'] as const) {
        await run(client, 'begin', 'simple');
        expect(await run(client, 'create table tx_snapshots (snapshot customers)', 'simple')).toEqual({ rows: [] });
        const outcome = await run(client, 'select * from tx_snapshots', mode);
        expect(outcome, mode).toEqual({ code: '42501', message: expect.stringContaining("public.tx_snapshots is not in the gateway's snapshot of the upstream catalog") as unknown });
        expect((outcome as { message: string }).message).toContain('(rule catalog.relation_unknown)');
        await run(client, 'rollback', 'simple');
      }
    });
  });
});

describe('a view or partition created on the upstream since the snapshot was read', () => {
  it('over a masked table: refused masked_columns.view (it was read raw), simple, extended and MCP', async () => {
    await session(writer, async (client) => {
      expect(await run(client, 'select 1 as one', 'simple')).toEqual({ rows: [{ one: 1 }] });
      await admin(gateway.upstream.url, (upstream) => upstream.query('create view outside_view as select * from customers'));
      await sleep(PAST_FRESH_MS);
      for (const mode of ['simple', 'extended'] as const) {
        const outcome = await run(client, 'select * from outside_view', mode);
        expect(outcome, mode).toEqual(refusedAs('masked_columns.view'));
        expect(JSON.stringify(outcome)).not.toMatch(RAW_EMAIL);
      }
    });
    await admin(gateway.upstream.url, (upstream) => upstream.query('create view outside_view_mcp as select * from customers'));
    await sleep(PAST_FRESH_MS);
    const mcp = await onMcp(writer, 'select * from outside_view_mcp');
    expect(mcp).toContain('decision_rule masked_columns.view, SQLSTATE 42501');
    expect(mcp).not.toMatch(RAW_EMAIL);
  });

  it('an inheritance child of a masked table: masked, simple and extended', async () => {
    await session(writer, async (client) => {
      expect(await run(client, 'select 1 as one', 'simple')).toEqual({ rows: [{ one: 1 }] });
      await admin(gateway.upstream.url, (upstream) => upstream.query(`create table outside_child () inherits (customers); insert into outside_child values (200, 'user200@example.com')`));
      await sleep(PAST_FRESH_MS);
      for (const mode of ['simple', 'extended'] as const) expect(await run(client, 'select id, email from outside_child', mode), mode).toEqual({ rows: [{ id: 200, email: '[redacted]' }] });
    });
  });

  it('over a denied table: refused table.denied, simple, extended and MCP', async () => {
    await session(denier, async (client) => {
      expect(await run(client, 'select 1 as one', 'simple')).toEqual({ rows: [{ one: 1 }] });
      await admin(gateway.upstream.url, (upstream) => upstream.query('create view denied_view as select * from customers'));
      await sleep(PAST_FRESH_MS);
      for (const mode of ['simple', 'extended'] as const) expect(await run(client, 'select * from denied_view', mode), mode).toEqual(refusedAs('table.denied'));
    });
    const mcp = await onMcp(denier, 'select * from denied_view');
    expect(mcp).toContain('decision_rule table.denied, SQLSTATE 42501');
    expect(mcp).not.toMatch(RAW_EMAIL);
  });

  it('one read within FRESH_MS is not read again: the statement is refused catalog.relation_unknown rather than read raw', async () => {
    await session(writer, async (client) => {
      await admin(gateway.upstream.url, (upstream) => upstream.query('create view quick_view_a as select * from customers; create view quick_view_b as select * from customers'));
      await sleep(PAST_FRESH_MS);
      expect(await run(client, 'select * from quick_view_a', 'simple')).toEqual(refusedAs('masked_columns.view'));
      await admin(gateway.upstream.url, (upstream) => upstream.query('create view quick_view_c as select * from customers'));
      const outcome = await run(client, 'select * from quick_view_c', 'simple');
      expect(outcome).toMatchObject({ code: '42501' });
      expect(JSON.stringify(outcome)).not.toMatch(RAW_EMAIL);
    });
  });

  it('a relation that does not exist is refused catalog.relation_unknown under a masking policy', async () => {
    await session(writer, async (client) => {
      expect(await run(client, 'select * from no_such_table', 'simple')).toEqual(refusedAs('catalog.relation_unknown'));
      expect(await run(client, 'select id from customers where id = 1', 'simple')).toEqual({ rows: [{ id: 1 }] });
    });
  });
});
