/**
 * Class 5 of issue 16: a relation on the allowlist must not open relations that are not. The
 * upstream (created as superuser) has `orders_archive`, a plain-inheritance child of the allowed
 * `orders` holding row 9001, and `orders_archive_old` below it (row 9002); `ledger` with child
 * `ledger_child` for writes; and a partitioned `events` whose partitions count as the table. Each
 * statement runs through the real proxy (node-postgres, simple and extended protocol) and the hosted
 * MCP; the children's rows are never returned, changed or planned, and the upstream is unchanged.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { withAgentClient as withClient } from '../support/proxy-agents.js';

let gateway: TestGateway;
let reader: AgentSecrets;
let writer: AgentSecrets;
/** Where the hosted MCP listens. */
let mcpUrl: string;

const READ_POLICY = { name: 'inheritance reader', read_only: true, allowed_tables: ['public.orders', 'public.customers', 'public.events'], masked_columns: { 'public.customers.email': 'redact' }, max_rows: 50 };
const WRITE_POLICY = { name: 'inheritance writer', read_only: false, allowed_tables: ['public.orders', 'public.ledger', 'public.late_parent'] };

/** The rows of each child, as the superuser sees them: what no statement of the agent may change. */
async function upstreamState(): Promise<unknown[]> {
  return admin(gateway.upstream.url, async (client) => {
    const { rows } = await client.query(`select tableoid::regclass::text as t, id, total from only orders_archive union all select tableoid::regclass::text, id, total from orders_archive_old
      union all select tableoid::regclass::text, id, null from ledger_child order by 1, 2`);
    return rows;
  });
}

const BEFORE = [
  { t: 'ledger_child', id: 2, total: null },
  { t: 'orders_archive', id: 9001, total: '1' },
  { t: 'orders_archive_old', id: 9002, total: '2' },
];

beforeAll(async () => {
  gateway = await startGateway('inheritance');
  await admin(gateway.upstream.url, (client) =>
    client.query(`create table orders_archive (archived_at date) inherits (orders);
      insert into orders_archive values (9001, 'c1', 1, '2020-01-01');
      create table orders_archive_old () inherits (orders_archive);
      insert into orders_archive_old values (9002, 'c2', 2, '2019-01-01');
      create table ledger (id int); insert into ledger values (1);
      create table ledger_child () inherits (ledger); insert into ledger_child values (2);
      create table events (id int, at date) partition by range (at);
      create table events_2020 partition of events for values from ('2020-01-01') to ('2021-01-01');
      create table events_2021 partition of events for values from ('2021-01-01') to ('2022-01-01');
      insert into events values (1, '2020-06-01'), (2, '2021-06-01');`),
  );
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
  reader = await registerAgentWith(gateway, READ_POLICY);
  writer = await registerAgentWith(gateway, WRITE_POLICY);
});
afterAll(async () => {
  await gateway?.stop();
});

type Mode = 'simple' | 'extended';
const MODES: Mode[] = ['simple', 'extended'];

async function run(client: pg.Client, sql: string, mode: Mode): Promise<pg.QueryResult> {
  return mode === 'simple' ? client.query(sql) : client.query({ text: sql, queryMode: 'extended' } as pg.QueryConfig);
}

const withMcp = <T>(agent: AgentSecrets, work: (client: Client) => Promise<T>): Promise<T> => withAgentMcp(mcpUrl, agent, work);

/** Reads over the allowed parent, each with the number of rows (or the first value) it must give: the children's rows never count. */
const READS: readonly [string, unknown][] = [
  ['select id from orders where id = 9001', []],
  ['select id from orders where id in (9001, 9002)', []],
  ['select count(*)::int as n from orders', [{ n: 1000 }]],
  ['select max(id) as n from orders', [{ n: 1000 }]],
  ['select id from orders* where id = 9001', []],
  ['select count(*)::int as n from (table orders) t', [{ n: 1000 }]],
  ['select count(*)::int as n from orders o join customers c on c.id = o.id - 9000', [{ n: 0 }]],
  ['select count(*)::int as n from customers c left join orders o on o.id = c.id + 8990 where o.id is not null', [{ n: 0 }]],
  ['select (select count(*)::int from orders where id > 9000) as n', [{ n: 0 }]],
  ['select count(*)::int as n from customers where exists (select 1 from orders where id = 9001)', [{ n: 0 }]],
  ['select count(*)::int as n from customers where id + 9000 in (select id from orders)', [{ n: 0 }]],
  ['with o as (select id from orders) select count(*)::int as n from o where id > 9000', [{ n: 0 }]],
  ['with recursive o as (select id from orders where id > 9000 union all select id + 1 from o where id < 9001) select count(*)::int as n from o', [{ n: 0 }]],
  ['select count(*)::int as n from orders where id = 9001 union all select count(*)::int from orders where id = 9002', [{ n: 0 }, { n: 0 }]],
  ['select count(*)::int as n from lateral (select id from orders where id > 9000) o', [{ n: 0 }]],
  ['select customer from orders o where o.id > 999 order by o.id', [{ customer: 'c0' }]],
  ['select count(*)::int as n from only orders where id > 9000', [{ n: 0 }]],
  ['select count(*)::int as n from public.orders where id > 9000', [{ n: 0 }]],
  ['select count(*)::int as n from "orders" where id > 9000', [{ n: 0 }]],
];

describe('reads of an allowed parent stay on the parent', () => {
  for (const mode of MODES) {
    it(`on the wire (${mode} protocol): no row of orders_archive or orders_archive_old, whatever the query shape`, async () => {
      await withClient(reader, async (client) => {
        for (const [sql, rows] of READS) expect((await run(client, sql, mode)).rows, sql).toEqual(rows);
      });
    });

    it(`on the wire (${mode} protocol): tableoid names only orders, and EXPLAIN plans no child`, async () => {
      await withClient(reader, async (client) => {
        expect((await run(client, 'select distinct tableoid from orders', mode)).rows).toHaveLength(1);
        for (const sql of ['explain select id from orders where id = 9001', 'explain (costs off) select count(*) from orders o join customers c on c.id = o.id', 'explain with o as (select id from orders) select * from o']) {
          const plan = (await run(client, sql, mode)).rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
          expect(plan, sql).toMatch(/on orders/);
          expect(plan, sql).not.toMatch(/orders_archive/);
        }
      });
    });

    it(`on the wire (${mode} protocol): a cursor over the parent stays on it`, async () => {
      await withClient(reader, async (client) => {
        await client.query('begin');
        await run(client, 'declare c cursor for select id from orders where id > 999 order by id', mode);
        // Under max_rows, the gateway counts a cursor's rows on FETCH sent as a simple query.
        expect((await client.query('fetch forward 10 from c')).rows).toEqual([{ id: 1000 }]);
        await client.query('rollback');
      });
    });
  }

  it('on the hosted MCP: query, explain and validate_sql (which shows the ONLY it runs with)', async () => {
    await withMcp(reader, async (client) => {
      for (const [sql, rows] of READS) {
        const result = await callTool(client, 'query', { sql });
        expect(result.isError, sql).toBeFalsy();
        const structured = result.structuredContent as { rows: unknown[][]; columns: { name: string }[] };
        const objects = structured.rows.map((row) => Object.fromEntries(row.map((value, i) => [structured.columns[i]!.name, value])));
        // Numeric JSON values come back as numbers, text as strings: compare as the wire's node-postgres does.
        expect(JSON.parse(JSON.stringify(objects).replace(/"(\d+)"/g, '$1')), sql).toEqual(JSON.parse(JSON.stringify(rows).replace(/"(\d+)"/g, '$1')));
      }
      const plan = JSON.stringify((await callTool(client, 'explain', { sql: 'select id from orders where id = 9001' })).structuredContent);
      expect(plan).toContain('"Relation Name":"orders"');
      expect(plan).not.toContain('orders_archive');
      const verdict = (await callTool(client, 'validate_sql', { sql: 'select id from orders where id = 9001' })).structuredContent as { allowed: boolean; runs_as: string };
      expect(verdict).toMatchObject({ allowed: true, runs_as: 'SELECT id FROM ONLY orders WHERE id = 9001' });
    });
  });

  it('runs a table without inheritance children as sent, and a partitioned table with all its partitions', async () => {
    await withMcp(reader, async (client) => {
      for (const sql of ['select id from customers where id = 1', 'select id from events where id = 2', 'select id from only orders where id = 9001']) {
        const verdict = (await callTool(client, 'validate_sql', { sql })).structuredContent as { allowed: boolean; runs_as: string };
        expect(verdict, sql).toMatchObject({ allowed: true, runs_as: sql });
      }
    });
    await withClient(reader, async (client) => {
      for (const mode of MODES) expect((await run(client, 'select id from events order by id', mode)).rows).toEqual([{ id: 1 }, { id: 2 }]);
    });
  });

  it('still refuses the children by name', async () => {
    await withClient(reader, async (client) => {
      for (const mode of MODES) {
        const error = await run(client, 'select id from orders_archive', mode).then(() => undefined, (e: { code?: string; message: string }) => e);
        expect(error?.code).toBe('42501');
        expect(error?.message).toMatch(/public\.orders_archive is not in the allowed tables/);
      }
    });
  });
});

describe('writes to an allowed parent stay on the parent', () => {
  for (const mode of MODES) {
    it(`on the wire (${mode} protocol): UPDATE, DELETE (also inside WITH and with USING) change no child row`, async () => {
      await withClient(writer, async (client) => {
        expect((await run(client, 'update orders set total = 0 where id > 9000', mode)).rowCount).toBe(0);
        expect((await run(client, 'delete from orders where id > 9000', mode)).rowCount).toBe(0);
        expect((await run(client, 'with gone as (delete from orders where id = 9001 returning id) select count(*)::int as n from gone', mode)).rows).toEqual([{ n: 0 }]);
        expect((await run(client, 'update orders o set total = 0 from orders p where p.id = o.id and o.id > 9000', mode)).rowCount).toBe(0);
        expect((await run(client, 'delete from orders o using (select 9001 as id) x where o.id = x.id', mode)).rowCount).toBe(0);
        expect((await run(client, 'select id from orders where id > 9000 for update', mode)).rows).toEqual([]);
        expect((await run(client, 'update ledger set id = id where id = 2', mode)).rowCount).toBe(0);
      });
      expect(await upstreamState()).toEqual(BEFORE);
    });
  }

  it('on the wire: ALTER TABLE and RENAME COLUMN of a parent whose children are not allowed are refused; LOCK stays on the parent', async () => {
    await withClient(writer, async (client) => {
      for (const sql of ['alter table ledger add column note text', 'alter table ledger rename column id to ident', 'alter table orders alter column total type text']) {
        const error = await client.query(sql).then(() => undefined, (e: { code?: string; message: string }) => e);
        expect(error?.code, sql).toBe('42501');
        expect(error?.message, sql).toMatch(/public\.(ledger_child|orders_archive) is not in the allowed tables/);
      }
      await client.query('begin');
      await client.query('lock table ledger in access exclusive mode');
      const locks = await admin(gateway.upstream.url, (other) =>
        other.query(`select c.relname from pg_locks l join pg_class c on c.oid = l.relation where l.mode = 'AccessExclusiveLock' and c.relname like 'ledger%' order by 1`),
      );
      expect(locks.rows).toEqual([{ relname: 'ledger' }]);
      await client.query('rollback');
    });
    const columns = await admin(gateway.upstream.url, (client) => client.query(`select attname from pg_attribute where attrelid = 'ledger_child'::regclass and attnum > 0 order by attnum`));
    expect(columns.rows).toEqual([{ attname: 'id' }]);
  });

  it('on the hosted MCP: UPDATE and DELETE change no child row', async () => {
    await withMcp(writer, async (client) => {
      for (const sql of ['update orders set total = 0 where id > 9000', 'delete from orders where id > 9000', 'delete from ledger where id = 2']) {
        const result = await callTool(client, 'query', { sql });
        expect(result.isError, sql).toBeFalsy();
        expect((result.structuredContent as { command: string }).command, sql).toMatch(/ 0$/);
      }
    });
    expect(await upstreamState()).toEqual(BEFORE);
  });

  it('TRUNCATE of the parent empties the parent only', async () => {
    await withClient(writer, async (client) => {
      await client.query('truncate ledger');
    });
    expect(await upstreamState()).toEqual(BEFORE);
    await admin(gateway.upstream.url, (client) => client.query('insert into ledger values (1)'));
  });
});

describe('relations the catalog snapshot does not know yet', () => {
  it('run ONLY: a table and its child created after the snapshot give the table’s rows only', async () => {
    await withClient(writer, async (client) => {
      // The snapshot was read at the first login; these come later, outside the gateway.
      await admin(gateway.upstream.url, (other) =>
        other.query(`create table late_parent (id int); insert into late_parent values (1); create table late_child () inherits (late_parent); insert into late_child values (2)`),
      );
      try {
        for (const mode of MODES) expect((await run(client, 'select id from late_parent', mode)).rows).toEqual([{ id: 1 }]);
        expect((await client.query('delete from late_parent where id = 2')).rowCount).toBe(0);
      } finally {
        await admin(gateway.upstream.url, (other) => other.query('drop table late_parent cascade'));
      }
    });
  });
});
