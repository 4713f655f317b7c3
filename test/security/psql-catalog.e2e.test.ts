/**
 * psql's `\dt` and `\d <table>` through the proxy under a policy with allow_catalog: they work, and
 * show only what the policy allows (issue 16, false refusals). The upstream (created as superuser)
 * also has `public.secrets`, schema `private` and a SECURITY DEFINER function, which no listing
 * may name. Runs the real psql client binary.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerAgentWith } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { missingTool } from '../support/tools.js';

const noPsql = missingTool('psql');
const run = promisify(execFile);
let gateway: TestGateway;
let agent: AgentSecrets;

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
