/**
 * write_mode sandbox end to end: psql (simple protocol) and node-postgres (extended) through the
 * proxy write to the newest ready branch of their database while the source stays unchanged; once
 * the branch is deleted its database is gone and new sessions' writes are refused again.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { readyBranch } from '../support/branches.js';
import { adminRows } from '../support/pg.js';
import { missingTool } from '../support/tools.js';
import { connectAgent } from '../support/agent-mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type net from 'node:net';

const run = promisify(execFile);
let gateway: TestGateway;
let agent: AgentSecrets;
let databaseId: string;
/** The branch databases this file makes, dropped at the end whatever happened (the first test's delete drops its own first). */
const branchDatabases: string[] = [];

const psql = (sql: string) => run('psql', [agent.connection_string, '-X', '-v', 'ON_ERROR_STOP=1', '-Atc', sql]);
const failure = (promise: Promise<unknown>): Promise<string> => promise.then(() => 'it ran', (error: { stderr?: string }) => error.stderr ?? '');
const serverOf = (url: string) => url.replace(/\/[^/?]*(\?.*)?$/, '');
const rowsIn = async (database: string): Promise<{ n: number; total1: string }> =>
  (await adminRows<{ n: number; total1: string }>(`${serverOf(gateway.upstream.url)}/${database}`, `select count(*)::int as n, (select total::text from orders where id = 1) as total1 from orders`))[0]!;

beforeAll(async () => {
  gateway = await startGateway('sandbox');
  const { api, owner, projectId } = gateway;
  const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'sandboxed', read_only: false, allowed_tables: ['public.*'], write_mode: 'sandbox' } });
  const registered = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'rehearser', policy_profile_id: (policy.json() as { id: string }).id } });
  agent = registered.json() as AgentSecrets;
  databaseId = ((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/databases` })).json() as { databases: { id: string }[] }).databases[0]!.id;
});
afterAll(async () => {
  for (const name of branchDatabases) await adminRows(`${serverOf(gateway.upstream.url)}/postgres`, `drop database if exists "${name}" with (force)`).catch(() => undefined);
  await gateway?.stop();
});

describe.skipIf(missingTool('psql'))('write_mode sandbox', () => {
  it('estimates a held write on the branch its session writes to, not on a newer branch made since', async () => {
    const { api, owner, projectId } = gateway;
    const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'sandboxed, held above 3 rows', read_only: false, allowed_tables: ['public.*'], write_mode: 'sandbox', approval: { row_threshold: 3 } } });
    expect(policy.statusCode, policy.body).toBe(201);
    const registered = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'estimated', policy_profile_id: (policy.json() as { id: string }).id } });
    const estimated = registered.json() as AgentSecrets;
    const first = await readyBranch(gateway, databaseId, 'first', (name) => branchDatabases.push(name));
    let second: { id: string; database_name: string } | undefined;
    const client = new pg.Client({ connectionString: estimated.connection_string });
    await client.connect();
    try {
      expect((await client.query('delete from orders where id <= 3')).rowCount).toBe(3);
      // A newer branch, a copy of the source where rows 1 to 3 are still there: new sessions write to it; this one stays on its own.
      second = await readyBranch(gateway, databaseId, 'second', (name) => branchDatabases.push(name));
      // On the session's branch the update touches rows 4 and 5, under the threshold, so it runs at once; counted on the newer branch it would be 5 rows, and held.
      const ran = client.query('update orders set total = 0 where id <= 5').then((result) => result.rowCount);
      const held = new Promise((resolve) => setTimeout(() => resolve('held (estimated elsewhere)'), 5_000));
      expect(await Promise.race([ran, held])).toBe(2);
      const zeroed = async (database: string) => (await adminRows<{ n: number }>(`${serverOf(gateway.upstream.url)}/${database}`, 'select count(*)::int as n from orders where total = 0'))[0]!.n;
      expect([await zeroed(first.database_name), await zeroed(second.database_name), await zeroed(gateway.upstream.name)]).toEqual([2, 0, 0]);
    } finally {
      await client.end().catch(() => undefined);
    }
    // Gone again, so the next test starts with no branch.
    for (const branch of [first, second!]) expect((await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}/branches/${branch.id}` })).statusCode).toBe(204);
  }, 60_000);

  it('sends a session’s writes and reads to the branch; the source is unchanged; delete drops the branch and refuses writes again', async () => {
    const { api, owner, projectId } = gateway;
    const branch = await readyBranch(gateway, databaseId, 'rehearsal', (name) => branchDatabases.push(name));

    // psql, simple protocol: the write and the read of the same session see the branch.
    const { stdout } = await psql(`insert into orders values (5001, 'sandbox', 1); update orders set total = 0 where id = 1; select count(*), (select total from orders where id = 1) from orders`);
    expect(stdout.trim()).toBe('INSERT 0 1\nUPDATE 1\n1001|0');
    // node-postgres, extended protocol, another session: the same branch.
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    expect((await client.query('insert into orders values ($1, $2, $3)', [5002, 'sandbox', 2])).rowCount).toBe(1);
    expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1002 }]);
    await client.end();
    // The hosted MCP through the official SDK client: its write goes to the branch as well.
    await api.app.listen({ port: 0, host: '127.0.0.1' });
    const mcpUrl = `http://127.0.0.1:${(api.app.server.address() as net.AddressInfo).port}/mcp`;
    const mcp = await connectAgent(mcpUrl, agent.mcp_token, 'sandboxed');
    const wrote = (await mcp.callTool({ name: 'query', arguments: { sql: `insert into orders values (5004, 'mcp', 4)` } })) as CallToolResult;
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    const counted = (await mcp.callTool({ name: 'query', arguments: { sql: 'select count(*)::int as n from orders' } })) as CallToolResult;
    expect((counted.structuredContent as { rows: unknown[][] }).rows).toEqual([[1003]]);

    // A schema change runs on the branch too, and the session's catalog is the branch's.
    expect((await psql('create table rehearsal_notes (id int primary key); insert into rehearsal_notes values (1); select count(*) from rehearsal_notes')).stdout.trim()).toBe('CREATE TABLE\nINSERT 0 1\n1');
    const tables = (database: string) => adminRows<{ t: string }>(`${serverOf(gateway.upstream.url)}/${database}`, `select tablename as t from pg_tables where schemaname = 'public' order by 1`);
    expect(await tables(branch.database_name)).toEqual([{ t: 'customers' }, { t: 'orders' }, { t: 'rehearsal_notes' }]);
    expect(await tables(gateway.upstream.name)).toEqual([{ t: 'customers' }, { t: 'orders' }]);

    expect(await rowsIn(branch.database_name)).toEqual({ n: 1003, total1: '0' });
    expect(await rowsIn(gateway.upstream.name)).toEqual({ n: 1000, total1: '1.5' });

    const deleted = await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}/branches/${branch.id}` });
    expect(deleted.statusCode).toBe(204);
    expect(await adminRows(`${serverOf(gateway.upstream.url)}/postgres`, `select 1 from pg_database where datname = '${branch.database_name}'`)).toEqual([]);

    // No ready branch now: a new session reads the source and its writes are refused, nothing written anywhere.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await psql('select count(*) from orders')).stdout.trim()).toBe('1000');
    const refused = await failure(psql(`insert into orders values (5003, 'sandbox', 3)`));
    expect(refused).toMatch(/write_mode\.sandbox_unavailable/);
    const mcpRefused = (await mcp.callTool({ name: 'query', arguments: { sql: `insert into orders values (5005, 'mcp', 5)` } })) as CallToolResult;
    expect(mcpRefused.isError).toBe(true);
    expect(JSON.stringify(mcpRefused.content)).toMatch(/sandbox/);
    await mcp.close();
    expect(await rowsIn(gateway.upstream.name)).toEqual({ n: 1000, total1: '1.5' });
  }, 60_000);
});
