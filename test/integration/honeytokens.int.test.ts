import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let projectId: string;

interface Honeytoken {
  id: string;
  project_id: string;
  kind: string;
  target: string;
  disable_credential: boolean;
}

async function createProject(key: string, orgId: string): Promise<string> {
  const created = await api.call(key, {
    method: 'POST',
    url: '/v1/projects',
    payload: { name: 'Shop', org_id: orgId, database: { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' } },
  });
  return (created.json() as { project: { id: string } }).project.id;
}

beforeAll(async () => {
  api = await startApi('honeytokens');
  owner = await api.org('pro');
  projectId = await createProject(owner.apiKey, owner.orgId);
});
afterAll(async () => {
  await api?.stop();
});

const url = (project = projectId) => `/v1/projects/${project}/honeytokens`;
const plant = (payload: Record<string, unknown>, key = owner.apiKey, headers: Record<string, string> = {}) => api.call(key, { method: 'POST', url: url(), payload, headers });
const problem = (response: LightMyRequestResponse) => response.json() as { code: string; errors?: { field: string }[] };

async function planted(payload: Record<string, unknown>): Promise<Honeytoken> {
  const response = await plant(payload);
  expect(response.statusCode).toBe(201);
  return response.json() as Honeytoken;
}

describe('honeytokens', () => {
  it('plants a table, a column and a value canary; each reads back exactly, with one event on its own stream', async () => {
    const table = await planted({ kind: 'table', target: 'public.api_keys', disable_credential: true });
    expect(table).toEqual({
      id: expect.stringMatching(/^hnt_[a-z0-9]{26}$/),
      project_id: projectId,
      kind: 'table',
      target: 'public.api_keys',
      disable_credential: true,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const column = await planted({ kind: 'column', target: 'public.accounts.recovery_code' });
    const value = await planted({ kind: 'value', target: 'canary-4411@example.com' });
    expect(column.disable_credential).toBe(false);
    expect(value.target).toBe('canary-4411@example.com');
    const fetched = await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${table.id}` });
    expect(fetched.statusCode).toBe(200);
    expect(fetched.headers.etag).toBe('"0"');
    expect(fetched.json()).toEqual(table);
    expect((await api.store.readStream(`honeytoken-${table.id}`)).map((e) => e.type)).toEqual(['HoneytokenCreated.v1']);
  });

  it('refuses a target that does not fit its kind, naming the field, and plants nothing', async () => {
    for (const payload of [{ kind: 'table', target: 'api_keys' }, { kind: 'column', target: 'public.accounts' }, { kind: 'value', target: '' }]) {
      const response = await plant(payload);
      expect(response.statusCode).toBe(400);
      expect(problem(response).errors?.map((e) => e.field)).toEqual(['target']);
    }
    const unknownKind = await plant({ kind: 'function', target: 'public.f' });
    expect(problem(unknownKind).errors?.map((e) => e.field)).toEqual(['kind']);
  });

  it('lists the project’s honeytokens in pages with opaque tokens', async () => {
    const other = await createProject(owner.apiKey, owner.orgId);
    const ids: string[] = [];
    for (const target of ['v1', 'v2', 'v3']) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: url(other), payload: { kind: 'value', target } });
      ids.push((response.json() as Honeytoken).id);
    }
    const first = await api.call(owner.apiKey, { method: 'GET', url: `${url(other)}?page_size=2` });
    const page1 = first.json() as { honeytokens: Honeytoken[]; next_page_token: string };
    expect(page1.honeytokens).toHaveLength(2);
    const second = await api.call(owner.apiKey, { method: 'GET', url: `${url(other)}?page_size=2&page_token=${page1.next_page_token}` });
    const page2 = second.json() as { honeytokens: Honeytoken[]; next_page_token: string };
    expect(page2.next_page_token).toBe('');
    expect([...page1.honeytokens, ...page2.honeytokens].map((h) => h.id)).toEqual([...ids].sort());
  });

  it('deletes a honeytoken no policy plants; it then reads as missing', async () => {
    const honeytoken = await planted({ kind: 'value', target: 'temporary' });
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${honeytoken.id}` })).statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${honeytoken.id}` })).statusCode).toBe(404);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${honeytoken.id}` })).statusCode).toBe(404);
    expect((await api.store.readStream(`honeytoken-${honeytoken.id}`)).map((e) => e.type)).toEqual(['HoneytokenCreated.v1', 'HoneytokenDeleted.v1']);
  });

  it('a policy plants only live honeytokens of its project (400 naming honeytokens.N), and a planted one cannot be deleted (409 CONFLICT)', async () => {
    const honeytoken = await planted({ kind: 'table', target: 'public.secrets' });
    const missing = 'hnt_00000000000000000000000000';
    const refused = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'bad canaries', honeytokens: [honeytoken.id, missing] } });
    expect(refused.statusCode).toBe(400);
    expect(problem(refused).errors?.map((e) => e.field)).toEqual(['honeytokens.1']);
    const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'with canary', honeytokens: [honeytoken.id] } });
    expect(policy.statusCode).toBe(201);
    const policyId = (policy.json() as { id: string }).id;
    const blocked = await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${honeytoken.id}` });
    expect(blocked.statusCode).toBe(409);
    expect(problem(blocked).code).toBe('CONFLICT');
    const patched = await api.call(owner.apiKey, { method: 'PATCH', url: `/v1/projects/${projectId}/policies/${policyId}`, payload: { honeytokens: [] } });
    expect(patched.statusCode).toBe(200);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${honeytoken.id}` })).statusCode).toBe(204);
    const stale = await api.call(owner.apiKey, { method: 'PATCH', url: `/v1/projects/${projectId}/policies/${policyId}`, payload: { honeytokens: [honeytoken.id] } });
    expect(problem(stale).errors?.map((e) => e.field)).toEqual(['honeytokens.0']);
  });

  it('answers another organization’s honeytoken exactly like a missing one', async () => {
    const honeytoken = await planted({ kind: 'value', target: 'private' });
    const stranger = await api.org('pro');
    const foreign = await api.call(stranger.apiKey, { method: 'GET', url: `${url()}/${honeytoken.id}` });
    const absent = await api.call(stranger.apiKey, { method: 'GET', url: `${url()}/hnt_00000000000000000000000000` });
    expect(foreign.statusCode).toBe(404);
    expect(absent.statusCode).toBe(404);
    expect(problem(foreign).code).toBe(problem(absent).code);
  });

  it('lets a member list but not plant or remove; a viewer may not list', async () => {
    const honeytoken = await planted({ kind: 'value', target: 'roles' });
    const keys = await Promise.all(
      (['member', 'viewer'] as const).map(async (role) => {
        const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: role, role } });
        return (created.json() as { api_key: string }).api_key;
      }),
    );
    const [member, viewer] = keys as [string, string];
    expect((await api.call(member, { method: 'GET', url: url() })).statusCode).toBe(200);
    expect(problem(await plant({ kind: 'value', target: 'x' }, member)).code).toBe('FORBIDDEN');
    expect(problem(await api.call(member, { method: 'DELETE', url: `${url()}/${honeytoken.id}` })).code).toBe('FORBIDDEN');
    expect(problem(await api.call(viewer, { method: 'GET', url: url() })).code).toBe('FORBIDDEN');
  });

  it('replays a create with the same Idempotency-Key: one honeytoken, the same body', async () => {
    const headers = { 'idempotency-key': 'plant-once' };
    const first = await plant({ kind: 'value', target: 'once' }, owner.apiKey, headers);
    const again = await plant({ kind: 'value', target: 'once' }, owner.apiKey, headers);
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    const { rows } = await api.pool.query<{ n: number }>(`select count(*)::int as n from rm.honeytokens where project_id = $1 and target = 'once'`, [projectId]);
    expect(rows[0]!.n).toBe(1);
  });

  it('documents the four operations under the honeytokens tag', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId: string; tags: string[] }>> };
    const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods)).filter((o) => o.tags.includes('honeytokens'));
    expect(operations.map((o) => o.operationId).sort()).toEqual(['createHoneytoken', 'deleteHoneytoken', 'getHoneytoken', 'listHoneytokens']);
  });
});
