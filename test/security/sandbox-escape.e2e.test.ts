/**
 * Red team: write_mode sandbox. A session is put on its branch when it connects; its writes are
 * allowed because it runs there. When that branch's pool goes (the branch is deleted, or a change
 * to the database renews every pool) the session must not be moved onto the source database with
 * its writes still allowed: the next write is refused (write_mode.sandbox_unavailable) and the
 * source is unchanged.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { readyBranch } from '../support/branches.js';
import { adminRows } from '../support/pg.js';
import { patchDatabase } from '../support/proxy-agents.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let databaseId: string;
const branchDatabases: string[] = [];

const serverOf = (url: string) => url.replace(/\/[^/?]*(\?.*)?$/, '');
const sourceTotal = async (id: number): Promise<string> => (await adminRows<{ t: string }>(gateway.upstream.url, `select total::text as t from orders where id = ${id}`))[0]!.t;

beforeAll(async () => {
  gateway = await startGateway('sandbox_escape');
  const { api, owner, projectId } = gateway;
  const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'sandboxed', read_only: false, allowed_tables: ['public.*'], write_mode: 'sandbox' } });
  agent = (await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'rehearser', policy_profile_id: (policy.json() as { id: string }).id } })).json() as AgentSecrets;
  databaseId = ((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/databases` })).json() as { databases: { id: string }[] }).databases[0]!.id;
});
afterAll(async () => {
  for (const name of branchDatabases) await adminRows(serverOf(gateway.upstream.url), `drop database if exists "${name}" with (force)`).catch(() => undefined);
  await gateway?.stop();
});

const deleteBranch = async (id: string) => expect((await gateway.api.call(gateway.owner.apiKey, { method: 'DELETE', url: `/v1/projects/${gateway.projectId}/branches/${id}` })).statusCode).toBe(204);

async function writeAfter(change: (branch: { id: string }) => Promise<void>, id: number): Promise<void> {
  const branch = await readyBranch(gateway, databaseId, `escape-${id}`, (name) => branchDatabases.push(name));
  const client = new pg.Client({ connectionString: agent.connection_string });
  client.on('error', () => undefined);
  await client.connect();
  try {
    expect((await client.query(`update orders set total = 1 where id = ${id}`)).rowCount).toBe(1);
    await change(branch);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = await client.query(`update orders set total = 2 where id = ${id}`).then(() => 'it ran', (error: { code?: string; message: string }) => `${error.code} ${error.message}`);
    expect(second).not.toBe('it ran');
  } finally {
    await client.end().catch(() => undefined);
  }
  expect(Number(await sourceTotal(id))).toBe(id * 1.5);
}

describe('a sandboxed session whose branch goes', () => {
  it('the branch is deleted: its next write does not reach the source', () => writeAfter((branch) => deleteBranch(branch.id), 21), 60_000);
  it('the branch is deleted and the database changed (its pools renewed): the next write does not reach the source', () =>
    writeAfter(async (branch) => {
      await deleteBranch(branch.id);
      await patchDatabase(gateway, { query_timeout_ms: 29_000 });
    }, 22), 60_000);
});
