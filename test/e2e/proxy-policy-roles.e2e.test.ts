import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { openSession } from '../support/wire.js';

let gateway: TestGateway;
let policyId: string;
let roleName: string | undefined;

/** The upstream users of the proxy's (or the hosted MCP's) open connections to the test database. */
async function upstreamUsers(application = 'pgward'): Promise<string[]> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  const { rows } = await client.query<{ usename: string }>(`select distinct usename from pg_stat_activity where datname = $1 and application_name = $2 order by 1`, [gateway.upstream.name, application]);
  await client.end();
  return rows.map((r) => r.usename);
}

async function register(name: string): Promise<AgentSecrets> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents`, payload: { name, policy_profile_id: policyId } });
  expect(response.statusCode).toBe(201);
  return response.json() as AgentSecrets;
}

beforeAll(async () => {
  gateway = await startGateway('proxy_policy_roles');
  const policy = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: { name: 'orders only', read_only: true, allowed_tables: ['public.orders'] } });
  policyId = (policy.json() as { id: string }).id;
});
afterAll(async () => {
  await gateway?.stop();
  if (roleName) {
    const admin = new pg.Client({ connectionString: new URL('/postgres', gateway.upstream.url).toString() });
    await admin.connect();
    await admin.query(`drop role if exists ${pg.escapeIdentifier(roleName)}`);
    await admin.end();
  }
});

describe('a provisioned policy on the wire', () => {
  it('runs the policy’s sessions as its upstream role once provisioned; the proxy’s own checks still refuse first', async () => {
    const before = await openSession((await register('before provisioning')).connection_string);
    expect((await before.client.query('SELECT count(*)::int AS n FROM orders')).rows).toEqual([{ n: 1000 }]);
    const registeredUser = decodeURIComponent(new URL(gateway.upstream.url).username);
    expect(await upstreamUsers()).toEqual([registeredUser]);
    await before.client.end();

    const databases = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
    const databaseId = (databases.json() as { databases: { id: string }[] }).databases[0]!.id;
    const provisioned = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies/${policyId}/provision`, payload: { database_id: databaseId } });
    expect(provisioned.statusCode).toBe(200);
    roleName = (provisioned.json() as { role_name: string }).role_name;

    const { client } = await openSession((await register('after provisioning')).connection_string);
    expect((await client.query('SELECT count(*)::int AS n FROM orders')).rows).toEqual([{ n: 1000 }]);
    expect(await upstreamUsers()).toEqual([roleName, registeredUser].sort());
    const refused = await client.query('SELECT * FROM customers').catch((error: unknown) => error as { code: string; message: string });
    expect(refused).toMatchObject({ code: '42501' });
    expect((refused as { message: string }).message).toMatch(/rule allowed_tables\.not_allowed/);
    await client.end();

    const agent = await register('over mcp');
    const response = await gateway.api.app.inject({
      method: 'POST',
      url: `/v1/projects/${gateway.projectId}/mcp`,
      headers: { authorization: `Bearer ${agent.mcp_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'query', arguments: { sql: 'SELECT count(*)::int AS n FROM orders' } } },
    });
    expect(response.json()).toMatchObject({ result: { structuredContent: { rows: [[1000]] } } });
    expect(await upstreamUsers('pgward-mcp')).toEqual([roleName]);
  });
});
