/**
 * psql's `\dt` and `\d <table>` through the proxy under a policy with allow_catalog: they work, and
 * show only what the policy allows (issue 16, false refusals). The upstream (created as superuser)
 * also has `public.secrets`, schema `private` and a SECURITY DEFINER function, which no listing
 * may name. Runs the real psql client binary.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { connectAgentClient } from '../support/proxy-agents.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { missingTool } from '../support/tools.js';

const noPsql = missingTool('psql');
const run = promisify(execFile);
let gateway: TestGateway;
let agent: AgentSecrets;
let mcpUrl: string;

const POLICY = { name: 'psql catalog', read_only: true, allowed_tables: ['public.orders', 'public.customers'], masked_columns: { 'public.customers.email': 'redact' }, max_rows: 50, allow_catalog: true };

beforeAll(async () => {
  gateway = await startGateway('psql_catalog');
  await admin(gateway.upstream.url, (client) =>
    client.query(`create table secrets (id int primary key, token text); insert into secrets values (1, 'tok-123');
      create index secrets_token on secrets (token);
      create schema private; create table private.vault (id int);
      create function public.peek() returns text language sql security definer as 'select token from secrets limit 1';
      create index orders_customer on orders (customer);`),
  );
  agent = await registerAgentWith(gateway, POLICY);
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

async function psql(command: string): Promise<{ stdout: string; stderr: string; code: number }> {
  return run('psql', [agent.connection_string, '-X', '-P', 'pager=off', '-c', command]).then(
    ({ stdout, stderr }) => ({ stdout, stderr, code: 0 }),
    (error: { stdout: string; stderr: string; code: number }) => ({ stdout: error.stdout, stderr: error.stderr, code: error.code }),
  );
}

describe.skipIf(noPsql)(`psql describe commands under allow_catalog${noPsql ? ` (skipped: ${noPsql})` : ''}`, () => {
  it('\\dt lists the allowed tables only', async () => {
    const listed = await psql('\\dt');
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    const names = listed.stdout.split('\n').filter((line) => /\|\s*table\s*\|/.test(line)).map((line) => line.split('|')[1]!.trim());
    expect(names).toEqual(['customers', 'orders']);
    expect(listed.stdout).not.toMatch(/secrets|vault/);
  });

  it('\\d orders describes the table: columns, types, not-null, indexes', async () => {
    const described = await psql('\\d orders');
    expect(described.stderr).toBe('');
    expect(described.code).toBe(0);
    expect(described.stdout).toContain('Table "public.orders"');
    for (const line of [/ id\s+\| integer\s+\|\s+\| not null \|/, / customer\s+\| text\s+\|\s+\| not null \|/, / total\s+\| numeric\s+\|\s+\| not null \|/]) expect(described.stdout).toMatch(line);
    expect(described.stdout).toContain('"orders_pkey" PRIMARY KEY, btree (id)');
    expect(described.stdout).toContain('"orders_customer" btree (customer)');
  });

  it('\\d of a relation the policy does not allow finds nothing, and \\d lists no other relation', async () => {
    for (const name of ['secrets', 'private.vault', 'secrets_token']) {
      const described = await psql(`\\d ${name}`);
      expect(described.stdout, name).toBe('');
      expect(described.stderr, name).toContain(`Did not find any relation named "${name}".`);
    }
    const all = await psql('\\d');
    expect(all.stderr).toBe('');
    expect(all.stdout).not.toMatch(/secrets|vault/);
  });

  it('a direct read of pg_class sees allowed relations, their indexes and the system catalogs only', async () => {
    const { stdout } = await run('psql', [agent.connection_string, '-X', '-At', '-c', "select relname from pg_catalog.pg_class where relnamespace = 'public'::regnamespace order by 1"]);
    expect(stdout.trim().split('\n')).toEqual(['customers', 'customers_pkey', 'orders', 'orders_customer', 'orders_pkey']);
    const catalogs = await run('psql', [agent.connection_string, '-X', '-At', '-c', "select count(*) > 50 from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'pg_catalog'"]);
    expect(catalogs.stdout.trim()).toBe('t');
  });
});

/** Catalog reads that list relations, each with the rows it must give: no row of secrets, private.vault or their index. */
const LISTINGS: readonly [string, unknown[]][] = [
  ["select relname from pg_class where relnamespace = 'public'::regnamespace and relkind = 'r' order by 1", [{ relname: 'customers' }, { relname: 'orders' }]],
  ["select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname in ('public', 'private') and c.relkind = 'r' order by 1", [{ relname: 'customers' }, { relname: 'orders' }]],
  ["select count(*)::int as n from pg_attribute a join pg_class c on c.oid = a.attrelid where c.relname = 'secrets'", [{ n: 0 }]],
  ["select count(*)::int as n from pg_attribute where attrelid = (select oid from pg_class where relname = 'orders') and attnum > 0", [{ n: 3 }]],
  ["select count(*)::int as n from pg_index i where i.indexrelid::regclass::text = 'secrets_token'", [{ n: 0 }]],
  ["select table_name from information_schema.tables where table_schema in ('public', 'private') order by 1", [{ table_name: 'customers' }, { table_name: 'orders' }]],
  ["select distinct table_name from information_schema.columns where table_schema = 'public' order by 1", [{ table_name: 'customers' }, { table_name: 'orders' }]],
  ["select tablename from pg_tables where schemaname in ('public', 'private') order by 1", [{ tablename: 'customers' }, { tablename: 'orders' }]],
  ["select indexname from pg_indexes where schemaname = 'public' order by 1", [{ indexname: 'customers_pkey' }, { indexname: 'orders_customer' }, { indexname: 'orders_pkey' }]],
  ["select relname from pg_stat_user_tables order by 1", [{ relname: 'customers' }, { relname: 'orders' }]],
  ["select count(*)::int as n from (select 1 from pg_class where relname = 'secrets' union all select 1 from pg_catalog.pg_class x where x.relname = 'vault') t", [{ n: 0 }]],
];

describe('reads of relation-keyed catalogs under allow_catalog', () => {
  for (const mode of ['simple', 'extended'] as const) {
    it(`on the wire (${mode} protocol): list only allowed relations, their indexes and the system catalogs`, async () => {
      const client = await connectAgentClient(agent);
      try {
        for (const [sql, rows] of LISTINGS) {
          const result = mode === 'simple' ? await client.query(sql) : await client.query({ text: sql, queryMode: 'extended' } as pg.QueryConfig);
          expect(result.rows, sql).toEqual(rows);
        }
        const copied = await client.query('copy pg_catalog.pg_class to stdout').then(() => undefined, (error: { code?: string; message: string }) => error);
        expect(copied?.code).toBe('42501');
        expect(copied?.message).toContain('(rule allowed_tables.catalog); read it with SELECT ... FROM pg_catalog.pg_class');
      } finally {
        await client.end();
      }
    });
  }

  it('on the hosted MCP: the same listings', async () => {
    await withAgentMcp(mcpUrl, agent, async (client) => {
      for (const [sql, rows] of LISTINGS) {
        const result = await callTool(client, 'query', { sql });
        expect(result.isError, sql).toBeFalsy();
        const structured = result.structuredContent as { rows: unknown[][]; columns: { name: string }[] };
        expect(structured.rows.map((row) => Object.fromEntries(row.map((value, i) => [structured.columns[i]!.name, value]))), sql).toEqual(rows);
      }
    });
  });
});
