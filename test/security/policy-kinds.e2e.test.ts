/**
 * Issue 19's statement kinds, table deny list and migration safety, through the real proxy
 * (node-postgres on the simple and extended protocol, postgres.js) and the hosted agent MCP (the
 * official MCP SDK client): exact decisions, SQLSTATEs and reasons, the audit rows, and the upstream
 * checked unchanged after every refusal (or changed as allowed).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { withAgentClient as withClient } from '../support/proxy-agents.js';
import { decisionsOfCredential, recordedFor, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let mcpUrl: string;
const agents: Record<'kinds' | 'narrow' | 'tables' | 'warn' | 'block', AgentSecrets> = {} as never;

const POLICIES = {
  kinds: { name: 'kinds denier', read_only: false, allowed_tables: ['public.*'], statement_deny: ['delete', 'truncate'] },
  narrow: { name: 'select and insert only', read_only: false, allowed_tables: ['public.*'], statement_allow: ['select', 'insert'] },
  tables: { name: 'tables denier', read_only: false, allowed_tables: ['public.*', 'vault.*', 'app.*'], denied_tables: ['public.secrets', 'vault.*'] },
  warn: { name: 'migrations warned', read_only: false, allowed_tables: ['public.*'] },
  block: { name: 'migrations blocked', read_only: false, allowed_tables: ['public.*'], migration_safety: 'block' },
} as const;

type Mode = 'simple' | 'extended';
const MODES: Mode[] = ['simple', 'extended'];

beforeAll(async () => {
  gateway = await startGateway('policy_kinds');
  await admin(gateway.upstream.url, (client) =>
    client.query(`create table secrets (id int primary key, secret text not null); insert into secrets values (1, 'the-secret');
      create table "Secrets" (id int); insert into "Secrets" values (7);
      create schema vault; create table vault.keys (id int); insert into vault.keys values (1);
      create schema app; create table app.secrets (id int); insert into app.secrets values (2);
      create table scratch (id int, note text); insert into scratch select g, 'n' || g from generate_series(1, 5) g;`),
  );
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
  for (const [key, policy] of Object.entries(POLICIES)) agents[key as keyof typeof agents] = await registerAgentWith(gateway, policy);
});
afterAll(async () => {
  await gateway?.stop();
});

async function upstream<T>(sql: string): Promise<T[]> {
  return admin(gateway.upstream.url, async (client) => (await client.query(sql)).rows as T[]);
}

const counts = () => upstream<{ orders: number; scratch: number; secrets: number; keys: number }>(
  'select (select count(*)::int from orders) as orders, (select count(*)::int from scratch) as scratch, (select count(*)::int from secrets) as secrets, (select count(*)::int from vault.keys) as keys',
);
const BEFORE = [{ orders: 1000, scratch: 5, secrets: 1, keys: 1 }];

async function refusalOf(client: pg.Client, sql: string, mode: Mode): Promise<{ code?: string; message?: string }> {
  const run = mode === 'simple' ? client.query(sql) : client.query({ text: sql, queryMode: 'extended' } as pg.QueryConfig);
  return run.then(
    () => ({}),
    (error: { code?: string; message?: string }) => ({ code: error.code, message: error.message }),
  );
}

const withMcp = <T>(agent: AgentSecrets, work: (client: Client) => Promise<T>): Promise<T> => withAgentMcp(mcpUrl, agent, work);

/** Each refusal: the agent, the statement, its rule and the start of its reason. */
type Case = readonly [keyof typeof agents, string, string, string];

const REFUSALS: readonly Case[] = [
  ['kinds', 'delete from scratch where id = 1', 'statement_kind.denied', "the statement is of kind delete, and this credential's policy denies delete statements (rule statement_kind.denied). Denied kinds: delete, truncate."],
  ['kinds', 'DELETE FROM "public"."scratch"', 'statement_kind.denied', 'the statement is of kind delete'],
  ['kinds', 'with gone as (delete from scratch returning id) select count(*) from gone', 'statement_kind.denied', 'the statement (of kind select) runs a statement of kind delete, in a data-modifying WITH query or as its operand,'],
  ['kinds', 'select * from orders where exists (with d as (delete from scratch returning 1) select 1 from d)', 'statement_kind.denied', 'the statement (of kind select) runs a statement of kind delete'],
  ['kinds', 'explain analyze delete from scratch', 'statement_kind.denied', 'the statement (of kind explain) runs a statement of kind delete'],
  ['kinds', 'copy (delete from scratch returning id) to stdout', 'statement_kind.denied', 'the statement (of kind copy) runs a statement of kind delete'],
  ['kinds', 'truncate scratch', 'statement_kind.denied', 'the statement is of kind truncate'],
  ['kinds', 'prepare p as delete from scratch', 'statement.prepare', 'PREPARE is not allowed'],
  ['kinds', 'do $$ begin delete from scratch; end $$', 'statement.procedure', 'DO is not allowed'],
  ['narrow', 'update scratch set note = null', 'statement_kind.not_allowed', "the statement is of kind update, and this credential's policy allows no update statements (rule statement_kind.not_allowed). Allowed kinds: select, insert."],
  ['narrow', 'with u as (update scratch set note = null returning id) insert into scratch select id, null from u', 'statement_kind.not_allowed', 'the statement (of kind insert) runs a statement of kind update'],
  ['narrow', 'explain select 1', 'statement_kind.not_allowed', 'the statement is of kind explain'],
  ['narrow', 'create table made (id int)', 'statement_kind.not_allowed', 'the statement is of kind ddl'],
  ['tables', 'select * from secrets', 'table.denied', "table public.secrets is on this credential's denied tables, whatever its allowed tables say (rule table.denied). Query other tables."],
  ['tables', 'select secret from "public"."secrets"', 'table.denied', 'table public.secrets is on'],
  ['tables', 'select o.id from orders o join secrets s on s.id = o.id', 'table.denied', 'table public.secrets is on'],
  ['tables', 'select (select secret from secrets limit 1)', 'table.denied', 'table public.secrets is on'],
  ['tables', 'with s as (select * from public.secrets) select * from s', 'table.denied', 'table public.secrets is on'],
  ['tables', 'select id from orders union all select id from secrets', 'table.denied', 'table public.secrets is on'],
  ['tables', 'explain analyze select * from secrets', 'table.denied', 'table public.secrets is on'],
  ['tables', 'update secrets set secret = null', 'table.denied', 'table public.secrets is on'],
  ['tables', 'delete from scratch using secrets where secrets.id = scratch.id', 'table.denied', 'table public.secrets is on'],
  ['tables', 'insert into scratch select id, secret from secrets', 'table.denied', 'table public.secrets is on'],
  ['tables', 'select * from vault.keys', 'table.denied', 'table vault.keys is on'],
  ['tables', 'select null::secrets', 'table.denied', 'table public.secrets (named as the type name secrets) is on'],
  ['block', 'create index on orders (total)', 'migration_safety.create_index', "CREATE INDEX without CONCURRENTLY on orders takes a SHARE lock that blocks every INSERT, UPDATE and DELETE of the table for the whole build (rule migration_safety.create_index; this credential's policy refuses lock-heavy schema changes, migration_safety block). Instead, use CREATE INDEX CONCURRENTLY (outside a transaction block), which lets writes through while it builds."],
  ['block', 'alter table scratch add column token float8 default random()', 'migration_safety.add_column_rewrite', 'ALTER TABLE scratch ADD COLUMN token with a volatile default'],
  ['block', 'alter table scratch alter column note set not null', 'migration_safety.set_not_null', 'ALTER TABLE scratch ALTER COLUMN note SET NOT NULL scans every row'],
  ['block', 'alter table scratch alter column id type bigint', 'migration_safety.alter_column_type', 'ALTER TABLE scratch ALTER COLUMN id TYPE rewrites'],
  ['block', 'alter table scratch add constraint positive check (id > 0)', 'migration_safety.add_constraint', 'ALTER TABLE scratch ADD CHECK without NOT VALID'],
  ['block', 'truncate scratch', 'migration_safety.truncate', 'TRUNCATE takes an ACCESS EXCLUSIVE lock'],
  ['block', 'lock table scratch', 'migration_safety.lock_table', 'LOCK TABLE IN ACCESS EXCLUSIVE MODE blocks every read and write'],
];

describe('refusals on the wire', () => {
  for (const mode of MODES) {
    it(`node-postgres, ${mode} protocol: 42501, the reason verbatim, a blocked audit row with the rule; nothing changes upstream`, async () => {
      for (const [agent, sql, , reason] of REFUSALS) {
        await withClient(agents[agent], async (client) => {
          const refused = await refusalOf(client, sql, mode);
          expect(refused.code, sql).toBe('42501');
          expect(refused.message?.startsWith(reason), `${sql}: ${refused.message}`).toBe(true);
          expect((await client.query('select 1 as ok')).rows, sql).toEqual([{ ok: 1 }]);
        });
      }
      expect(await counts()).toEqual(BEFORE);
      for (const [agent, sql, rule] of REFUSALS) {
        expect(await recordedFor(gateway, agents[agent].credential.id, 'wire', sql), sql).toMatchObject({ event: 'blocked', decision_rule: rule });
      }
      expect(await upstream("select indexname from pg_indexes where tablename in ('orders', 'scratch') and indexname <> 'orders_pkey'")).toEqual([]);
    });
  }

  it('postgres.js (extended protocol, and simple for a query string of several statements)', async () => {
    const sql = postgres(agents.kinds.connection_string, { max: 1, onnotice: () => undefined });
    try {
      await expect(sql`delete from scratch where id = ${1}`).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule statement_kind.denied)') });
      // A query string runs only when each of its statements is allowed.
      await expect(sql.unsafe('select 1; delete from scratch; select 2').simple()).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule statement_kind.denied)') });
      expect(await sql`select count(*)::int as n from scratch`).toEqual([{ n: 5 }]);
    } finally {
      await sql.end();
    }
    const tables = postgres(agents.tables.connection_string, { max: 1, onnotice: () => undefined });
    try {
      await expect(tables`select secret from secrets where id = ${1}`).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule table.denied)') });
      await expect(tables.unsafe('select 1; select * from vault.keys').simple()).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule table.denied)') });
    } finally {
      await tables.end();
    }
    const block = postgres(agents.block.connection_string, { max: 1, onnotice: () => undefined });
    try {
      await expect(block.unsafe('vacuum full scratch')).rejects.toMatchObject({ code: '0A000' });
      await expect(block.unsafe('create unique index on scratch (id)')).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('(rule migration_safety.create_index;') });
    } finally {
      await block.end();
    }
    expect(await counts()).toEqual(BEFORE);
  });
});

describe('what is allowed still runs', () => {
  it('deny and allow leave the other kinds alone', async () => {
    await withClient(agents.kinds, async (client) => {
      expect((await client.query('update scratch set note = $1 where id = 1 returning note', ['changed'])).rows).toEqual([{ note: 'changed' }]);
      expect((await client.query('explain delete from scratch')).rows.length).toBeGreaterThan(0);
    });
    await withClient(agents.narrow, async (client) => {
      expect((await client.query("insert into scratch values (6, 'six') returning id")).rows).toEqual([{ id: 6 }]);
      expect((await client.query({ text: 'select count(*)::int as n from scratch', queryMode: 'extended' } as pg.QueryConfig)).rows).toEqual([{ n: 6 }]);
    });
    expect(await upstream('select id, note from scratch where id in (1, 6) order by id')).toEqual([{ id: 1, note: 'changed' }, { id: 6, note: 'six' }]);
    await admin(gateway.upstream.url, (client) => client.query("delete from scratch where id = 6; update scratch set note = 'n1' where id = 1"));
  });

  it('a denied table is denied by name: another schema’s table of the same name, and a table named in another case, are not', async () => {
    await withClient(agents.tables, async (client) => {
      expect((await client.query('select id from app.secrets')).rows).toEqual([{ id: 2 }]);
      expect((await client.query('select id from "Secrets"')).rows).toEqual([{ id: 7 }]);
      expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
    });
  });
});

describe('migration_safety', () => {
  it('block: the safe alternative runs (CREATE INDEX CONCURRENTLY, CHECK NOT VALID then VALIDATE)', async () => {
    await withClient(agents.block, async (client) => {
      await client.query('create index concurrently scratch_note on scratch (note)');
      await client.query('alter table scratch add constraint positive check (id > 0) not valid');
      await client.query('alter table scratch validate constraint positive');
    });
    expect(await upstream("select indexname from pg_indexes where tablename = 'scratch'")).toEqual([{ indexname: 'scratch_note' }]);
    expect(await upstream("select conname, convalidated from pg_constraint where conrelid = 'scratch'::regclass")).toEqual([{ conname: 'positive', convalidated: true }]);
    try {
      // The statement's outcome is published when its session's batch goes out, after the client has its answer.
      const find = () => decisionsOfCredential(gateway, agents.block.credential.id).filter((d) => recordsText(d.sql, 'create index concurrently scratch_note on scratch (note)'));
      await waitFor(() => find().length === 2, 3_000, 'the flag and the query');
      expect(find().map((d) => [d.event, d.decision_rule])).toEqual([['migration_flagged', 'migration_flagged'], ['query', '']]);
    } finally {
      await admin(gateway.upstream.url, (client) => client.query('drop index scratch_note; alter table scratch drop constraint positive'));
    }
  });

  it('ALTER COLUMN SET DEFAULT runs on the simple and extended protocol (refused as an unsupported constant before round 6); its expression is vetted', async () => {
    const defaultOf = () => upstream("select pg_get_expr(adbin, adrelid) as def from pg_attrdef where adrelid = 'scratch'::regclass");
    try {
      await withClient(agents.block, async (client) => {
        await client.query("alter table scratch alter column note set default 'none'");
        expect(await defaultOf()).toEqual([{ def: "'none'::text" }]);
        await client.query({ text: "alter table scratch alter column note set default 'other'", queryMode: 'extended' } as pg.QueryConfig);
        expect(await defaultOf()).toEqual([{ def: "'other'::text" }]);
        const refused = await client.query("alter table scratch alter column note set default pg_read_file('/etc/hostname')").catch((error: pg.DatabaseError) => error);
        expect(refused).toMatchObject({ code: '42501', message: expect.stringContaining('(rule function.not_allowed)') as unknown });
      });
      expect(await defaultOf()).toEqual([{ def: "'other'::text" }]);
    } finally {
      await admin(gateway.upstream.url, (client) => client.query('alter table scratch alter column note drop default'));
    }
  });

  it('warn (the default): the statement runs, after a migration_flagged row with the rule and the safe alternative', async () => {
    const sql = 'create index scratch_id on scratch (id)';
    await withClient(agents.warn, (client) => client.query(sql));
    expect(await upstream("select indexname from pg_indexes where tablename = 'scratch'")).toEqual([{ indexname: 'scratch_id' }]);
    const find = () => decisionsOfCredential(gateway, agents.warn.credential.id).filter((d) => recordsText(d.sql, sql));
    await waitFor(() => find().length === 2, 3_000, 'the flag and the query');
    expect(find().map((d) => [d.event, d.decision_rule, d.reason])).toEqual([
      [
        'migration_flagged',
        'migration_safety.create_index',
        'CREATE INDEX without CONCURRENTLY on scratch takes a SHARE lock that blocks every INSERT, UPDATE and DELETE of the table for the whole build (rule migration_safety.create_index; it ran under migration_safety warn). Instead, use CREATE INDEX CONCURRENTLY (outside a transaction block), which lets writes through while it builds.',
      ],
      ['query', '', ''],
    ]);
    await admin(gateway.upstream.url, (client) => client.query('drop index scratch_id'));
  });
});

describe('the hosted agent MCP', () => {
  it('query refuses with the rule, SQLSTATE and reason verbatim, audits it, and changes nothing', async () => {
    for (const [agent, sql, rule, reason] of REFUSALS.filter(([, sql]) => !sql.startsWith('copy') && !sql.startsWith('prepare') && !sql.startsWith('do '))) {
      await withMcp(agents[agent], async (client) => {
        const refused = await callTool(client, 'query', { sql });
        expect(refused.isError, sql).toBe(true);
        expect(textOf(refused).startsWith(`Refused by the policy (decision_rule ${rule}, SQLSTATE 42501): ${reason}`), `${sql}: ${textOf(refused)}`).toBe(true);
        expect(refused._meta?.['pgward/decision'], sql).toMatchObject({ event: 'blocked', decision_rule: rule, sqlstate: '42501' });
      });
      expect(await recordedFor(gateway, agents[agent].credential.id, 'mcp', sql), sql).toMatchObject({ event: 'blocked', decision_rule: rule });
    }
    expect(await counts()).toEqual(BEFORE);
  });

  it('validate_sql answers as query does', async () => {
    await withMcp(agents.tables, async (client) => {
      expect((await callTool(client, 'validate_sql', { sql: 'select * from vault.keys' })).structuredContent).toMatchObject({ allowed: false, decision_rule: 'table.denied' });
    });
  });

  it('warn flags a migration run on MCP too', async () => {
    const sql = 'alter table scratch add column at timestamptz default clock_timestamp()';
    await withMcp(agents.warn, async (client) => expect((await callTool(client, 'query', { sql })).isError).toBeFalsy());
    const find = () => decisionsOfCredential(gateway, agents.warn.credential.id).filter((d) => d.source === 'mcp' && recordsText(d.sql, sql));
    await waitFor(() => find().length === 2, 3_000, 'the flag and the query');
    expect(find().map((d) => [d.event, d.decision_rule])).toEqual([['migration_flagged', 'migration_safety.add_column_rewrite'], ['query', '']]);
    await admin(gateway.upstream.url, (client) => client.query('alter table scratch drop column at'));
  });

  it('my_permissions and list_tables show the new rules; denied tables are not listed', async () => {
    await withMcp(agents.tables, async (client) => {
      const permissions = (await callTool(client, 'my_permissions')).structuredContent as { policy: Record<string, unknown> };
      expect(permissions.policy).toMatchObject({ statement_allow: null, statement_deny: [], denied_tables: ['public.secrets', 'vault.*'], migration_safety: 'warn' });
      const listed = ((await callTool(client, 'list_tables')).structuredContent as { tables: { table: string }[] }).tables.map((t) => t.table);
      expect(listed).toEqual(expect.arrayContaining(['public.orders', 'app.secrets']));
      expect(listed).not.toContain('public.secrets');
      expect(listed).not.toContain('vault.keys');
    });
    await withMcp(agents.narrow, async (client) => {
      const permissions = (await callTool(client, 'my_permissions')).structuredContent as { policy: Record<string, unknown> };
      expect(permissions.policy).toMatchObject({ statement_allow: ['select', 'insert'], statement_deny: [], denied_tables: [] });
    });
  });
});

describe('the policy document is validated strictly', () => {
  const create = (payload: Record<string, unknown>) => gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload });

  it.each([
    [{ statement_deny: ['drop'] }, 'statement_deny.0'],
    [{ statement_allow: ['SELECT'] }, 'statement_allow.0'],
    [{ statement_deny: ['delete', 'delete'] }, 'statement_deny'],
    [{ denied_tables: ['secrets'] }, 'denied_tables.0'],
    [{ migration_safety: 'strict' }, 'migration_safety'],
    [{ statement_denied: ['delete'] }, ''],
  ])('%j is refused with 400 and the field', async (fields, field) => {
    const response = await create({ name: `bad ${JSON.stringify(fields)}`, ...fields });
    expect(response.statusCode, response.body).toBe(400);
    expect(response.body).toContain(field || 'statement_denied');
  });

  it('defaults: every kind allowed, none denied, no table denied, migration_safety warn', async () => {
    const response = await create({ name: 'defaults' });
    expect(response.json()).toMatchObject({ statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'warn' });
  });
});
