/**
 * Red team: a write the gateway sees must drop every cached result whose rows it may change, not
 * only the entries of the table it names. A write to a partition changes what its partitioned
 * table returns (and a write to the partitioned table, its partitions); a DELETE or UPDATE of a
 * referenced row changes the referencing tables through ON DELETE CASCADE / ON UPDATE SET NULL; a
 * trigger writes tables the statement never names; a write through an updatable view changes its
 * base table, and a write to a table changes what the views over it return. Before the fix each of these served the pre-write result from the cache until its
 * ttl, on the simple and extended protocols and through the hosted MCP. The same reach holds an
 * approval rule's table: a write to a partition of a held partitioned table, or a DELETE that
 * cascades into a held table, ran without approval.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { pendingRequest } from '../support/approval-requests.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { createPolicy, registerOn, withAgentClient } from '../support/proxy-agents.js';
import { admin } from '../support/pg.js';
import { decisionsOfCredential, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let reader: AgentSecrets;
let writer: AgentSecrets;
let held: AgentSecrets;
let mcpUrl: string;

beforeAll(async () => {
  gateway = await startGateway('cache_write_reach');
  await admin(gateway.upstream.url, (client) => client.query(`create table events (id int, kind text) partition by list (kind);
    create table events_a partition of events for values in ('a');
    create table events_b partition of events for values in ('b');
    insert into events values (1, 'a'), (2, 'b');
    create table parents (id int primary key);
    create table kids (id int primary key, parent_id int references parents on delete cascade on update set null);
    insert into parents select generate_series(1, 70); insert into kids select g, g from generate_series(1, 70) g;
    create table notes (id int primary key, body text);
    create table note_log (note_id int);
    create function log_note() returns trigger language plpgsql as $$ begin insert into note_log values (new.id); return new; end $$;
    create trigger notes_logged after insert on notes for each row execute function log_note();
    create view orders_v as select id, customer, total from orders;
    create view orders_v_v as select count(*)::int as n from orders_v;
    create table plain (id int);
    create function order_total(int) returns numeric language sql stable as 'select total from orders where id = $1';
    create function order_total_pl(int) returns numeric language plpgsql stable as 'begin return (select total from orders where id = $1); end';
    create function order_is(int, int) returns bool language sql stable as 'select exists (select from orders where id = $1 and total = $2)';
    create operator public.=#= (leftarg = int, rightarg = int, function = order_is);
    create view total_sql_v as select order_total(21)::text as t;
    create view total_pl_v as select order_total_pl(22)::text as t;
    create view total_over_v as select t from total_sql_v;
    create view total_op_v as select count(*)::int as n from customers where 23 =#= (id + 30);`));
  const readers = await createPolicy(gateway, { name: 'readers', read_only: true, allowed_tables: ['public.*'] });
  reader = await registerOn(gateway, readers, 'reader');
  writer = await gateway.register('writer');
  const holding = await createPolicy(gateway, { name: 'held', read_only: false, allowed_tables: ['public.*'], approval: { held_kinds: [], tables: ['public.events', 'public.kids'], row_threshold: null } });
  held = await registerOn(gateway, holding, 'held writer');
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
}, 60_000);
afterAll(async () => {
  await gateway?.stop();
});

/** What the upstream itself returns for `sql`, rows as arrays. */
const upstream = (sql: string): Promise<unknown[]> => admin(gateway.upstream.url, async (client) => (await client.query({ text: sql, rowMode: 'array' })).rows);

type Protocol = 'simple' | 'extended';

/** The rows of `sql` as the agent reads them through the proxy: a literal-only Query, or Parse/Bind/Execute with `values`. */
async function wire(agent: AgentSecrets, protocol: Protocol, sql: string, values: unknown[] = []): Promise<unknown[]> {
  return withAgentClient(agent, async (client) => {
    const config = protocol === 'simple' ? { text: sql, rowMode: 'array' } : { text: sql, values, rowMode: 'array', queryMode: 'extended' };
    return (await client.query(config as pg.QueryConfig)).rows;
  });
}

async function statuses(agent: AgentSecrets, source: 'wire' | 'mcp', sql: string, count: number): Promise<unknown[]> {
  const find = () => decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === source && recordsText(d.sql, sql));
  await waitFor(() => find().length >= count, 3_000, `${count} decisions on ${sql}`);
  return find().map((d) => d.cache_status);
}

interface Case {
  readonly what: string;
  /** A read whose result the write changes, without naming the table the write names. */
  readonly read: string;
  /** The write, as text for the simple protocol (and the MCP), and as text and values for the extended one. */
  readonly write: (n: number) => { readonly text: string; readonly values: unknown[]; readonly literal: string };
}

const cases: readonly Case[] = [
  {
    what: 'an INSERT into a partition drops the partitioned table’s entries',
    read: 'select count(*)::int from events',
    write: (n) => ({ text: "insert into events_a values ($1, 'a')", values: [100 + n], literal: `insert into events_a values (${100 + n}, 'a')` }),
  },
  {
    what: 'an INSERT into the partitioned table drops its partitions’ entries',
    read: 'select count(*)::int from events_b',
    write: (n) => ({ text: "insert into events values ($1, 'b')", values: [200 + n], literal: `insert into events values (${200 + n}, 'b')` }),
  },
  {
    what: 'a DELETE cascading through a foreign key drops the referencing table’s entries',
    read: 'select count(*)::int from kids',
    write: (n) => ({ text: 'delete from parents where id = $1', values: [n], literal: `delete from parents where id = ${n}` }),
  },
  {
    what: 'an UPDATE whose foreign key sets NULL drops the referencing table’s entries',
    read: 'select count(parent_id)::int from kids',
    write: (n) => ({ text: 'update parents set id = $1 where id = $2', values: [1000 + n, 40 + n], literal: `update parents set id = ${1000 + n} where id = ${40 + n}` }),
  },
  {
    what: 'an INSERT whose trigger writes another table drops that table’s entries',
    read: 'select count(*)::int from note_log',
    write: (n) => ({ text: "insert into notes values ($1, 'x')", values: [n], literal: `insert into notes values (${n}, 'x')` }),
  },
  {
    what: 'an UPDATE through an updatable view drops its base table’s entries',
    read: 'select total::text from orders where id = 7',
    write: (n) => ({ text: 'update orders_v set total = $1 where id = 7', values: [n], literal: `update orders_v set total = ${n} where id = 7` }),
  },
  {
    what: 'an UPDATE of a table drops the entries of a view over it',
    read: 'select total::text from orders_v where id = 8',
    write: (n) => ({ text: 'update orders set total = $1 where id = 8', values: [n], literal: `update orders set total = ${n} where id = 8` }),
  },
  {
    what: 'an INSERT into a table drops the entries of a view over a view over it',
    read: 'select n from orders_v_v',
    write: (n) => ({ text: "insert into orders values ($1, 'v', 1)", values: [3000 + n], literal: `insert into orders values (${3000 + n}, 'v', 1)` }),
  },
];

describe('a write drops the cached results of every table it may change (wire)', () => {
  const protocols: readonly Protocol[] = ['simple', 'extended'];
  protocols.forEach((protocol, index) => {
    for (const { what, read, write } of cases) {
      it(`${what} (${protocol} protocol)`, async () => {
        const sql = `${read} /* ${protocol} */`;
        const before = await wire(reader, protocol, sql);
        expect(await wire(reader, protocol, sql)).toEqual(before);
        const { text, values, literal } = write(index + 1);
        if (protocol === 'simple') await wire(writer, 'simple', literal);
        else await wire(writer, 'extended', text, values);
        const truth = await upstream(read);
        expect(truth).not.toEqual(before);
        expect(await wire(reader, protocol, sql)).toEqual(truth);
        expect(await statuses(reader, 'wire', sql, 3)).toEqual(['miss', 'hit', 'miss']);
      });
    }
  });

  it('a write to an unrelated plain table keeps the entries of the others', async () => {
    const sql = 'select count(*)::int from kids /* kept */';
    await wire(reader, 'simple', sql);
    await wire(writer, 'simple', 'insert into plain values (1)');
    await wire(reader, 'simple', sql);
    expect(await statuses(reader, 'wire', sql, 2)).toEqual(['miss', 'hit']);
  });
});

describe('a write drops the cached results of every table it may change (hosted MCP query)', () => {
  cases.forEach(({ what, read, write }, index) => {
    it(what, async () => {
      const sql = `${read} /* mcp */`;
      const rows = async (agent: AgentSecrets, text: string): Promise<string> =>
        withAgentMcp(mcpUrl, agent, async (client) => {
          const result = await callTool(client, 'query', { sql: text });
          expect(result.isError, textOf(result)).toBeFalsy();
          return JSON.stringify((result.structuredContent as { rows: unknown[] }).rows);
        });
      const before = await rows(reader, sql);
      expect(await rows(reader, sql)).toBe(before);
      await rows(writer, write(20 + index).literal);
      const after = await rows(reader, sql);
      expect(after).not.toBe(before);
      expect(JSON.parse(after)).toEqual(await upstream(read));
      expect(await statuses(reader, 'mcp', sql, 3)).toEqual(['miss', 'hit', 'miss']);
    });
  });
});

// Red team (issue 22): a view whose definition calls a function of the database's (SQL or plpgsql,
// directly, as an operator, or through a view over it) reads tables the gateway cannot see; its
// result was cached and served stale after a write to them. Such reads bypass the cache now.
describe('a read of a view that calls a function of the database’s is never cached', () => {
  const viewCases = [
    { what: 'a SQL function', read: 'select t from total_sql_v', write: (n: number) => `update orders set total = ${n} where id = 21` },
    { what: 'a plpgsql function', read: 'select t from total_pl_v', write: (n: number) => `update orders set total = ${n} where id = 22` },
    { what: 'a SQL function, through a view over it', read: 'select t from total_over_v', write: (n: number) => `update orders set total = ${n} where id = 21` },
    // Customers 1 to 10: a total of 31 to 40 counts one of them, any other none.
    { what: 'an operator of the database’s', read: 'select n from total_op_v', write: (n: number) => `update orders set total = ${n % 2 === 0 ? 31 : 0} where id = 23` },
  ];
  const protocols: readonly Protocol[] = ['simple', 'extended'];
  protocols.forEach((protocol, index) => {
    viewCases.forEach(({ what, read, write }, caseIndex) => {
      it(`${what} (${protocol} protocol)`, async () => {
        const sql = `${read} /* ${protocol} */`;
        const before = await wire(reader, protocol, sql);
        expect(await wire(reader, protocol, sql)).toEqual(before);
        await wire(writer, 'simple', write(500 + index * 10 + caseIndex * 2 + index));
        const truth = await upstream(read);
        expect(truth).not.toEqual(before);
        expect(await wire(reader, protocol, sql)).toEqual(truth);
        expect(await statuses(reader, 'wire', sql, 3)).toEqual(['bypass', 'bypass', 'bypass']);
      });
    });
  });

  it('through the hosted MCP query tool', async () => {
    const sql = 'select t from total_pl_v /* mcp */';
    const rows = (text: string, agent = reader): Promise<unknown> =>
      withAgentMcp(mcpUrl, agent, async (client) => {
        const result = await callTool(client, 'query', { sql: text });
        expect(result.isError, textOf(result)).toBeFalsy();
        return (result.structuredContent as { rows: unknown[] }).rows;
      });
    const before = await rows(sql);
    expect(await rows(sql)).toEqual(before);
    await rows('update orders set total = 77 where id = 22', writer);
    expect(await rows(sql)).toEqual([['77']]);
    expect(await statuses(reader, 'mcp', sql, 3)).toEqual(['bypass', 'bypass', 'bypass']);
  });

  it('a statement calling such a function itself is refused, on both protocols', async () => {
    for (const protocol of protocols) {
      const error = await wire(reader, protocol, 'select order_total(21)').then(() => undefined, (failure: { code?: string; message: string }) => failure);
      expect(error?.code).toBe('42501');
      expect(error?.message).toContain('order_total');
    }
  });
});

describe('a write that reaches a held table without naming it waits for approval', () => {
  async function heldThenRejected(protocol: Protocol, text: string, values: unknown[], check: string): Promise<void> {
    const before = await upstream(check);
    const error = await withAgentClient(held, async (client) => {
      const running = client.query(protocol === 'simple' ? text : { text, values }).then(() => undefined, (failure: { code?: string; message: string }) => failure);
      const request = await pendingRequest(gateway, held.credential.id, text);
      expect(request.hold_rule).toBe('approval.held_table');
      expect(request.hold_reason).toContain('through which writes may reach tables');
      const rejected = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${request.id}/reject`, payload: { reason: 'no' } });
      expect(rejected.statusCode).toBe(200);
      return running;
    });
    expect(error?.code).toBe('42501');
    expect(error?.message).toContain('rule approval.rejected');
    expect(await upstream(check)).toEqual(before);
  }

  it('an INSERT into a partition of a held partitioned table (simple protocol)', () => heldThenRejected('simple', "insert into events_a values (900, 'a')", [], 'select count(*) from events'));
  it('an INSERT into a partition of a held partitioned table (extended protocol)', () => heldThenRejected('extended', "insert into events_a values ($1, 'a')", [901], 'select count(*) from events'));
  it('a DELETE that cascades into a held table (simple protocol)', () => heldThenRejected('simple', 'delete from parents where id = 55', [], 'select count(*) from kids'));
  it('a DELETE that cascades into a held table (extended protocol)', () => heldThenRejected('extended', 'delete from parents where id = $1', [56], 'select count(*) from kids'));

  it('through the hosted MCP query tool', async () => {
    const sql = 'delete from parents where id = 57';
    await withAgentMcp(mcpUrl, held, async (client) => {
      const result = await callTool(client, 'query', { sql });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain('Held for a human’s approval');
    });
    expect((await pendingRequest(gateway, held.credential.id, sql)).hold_reason).toContain('it writes public.parents');
    expect(await upstream('select count(*) from kids where parent_id = 57')).toEqual([['1']]);
  });
});
