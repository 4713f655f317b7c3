import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

/**
 * Control-plane security regressions: tenant isolation on every route, authentication that does
 * not depend on how the request target is spelled, problem+json for framework-level errors, policy
 * fields the read models can store, and project deletion that cannot leave agents connected.
 */
let api: TestApi;
let a: { orgId: string; apiKey: string };
let b: { orgId: string; apiKey: string };
/** Org A's resources, which org B must never see or touch. */
const A = { project: '', database: '', replica: '', policy: '', honeytoken: '', agent: '' };
let projectB = '';
let policyB = '';
let port = 0;

const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'upstream-secret-pw' };

async function created(response: { statusCode: number; body: string; json(): unknown }): Promise<Record<string, unknown>> {
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as Record<string, unknown>;
}

beforeAll(async () => {
  api = await startApi('control_plane_authz', { PGWARD_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '1000' });
  a = await api.org('pro');
  b = await api.org('pro');
  const pa = await created(await api.call(a.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'A', org_id: a.orgId, database } }));
  A.project = (pa.project as { id: string }).id;
  A.database = (pa.database as { id: string }).id;
  A.replica = (await created(await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/databases/${A.database}/replicas`, payload: { host: '127.0.0.1', port: 5432 } }))).id as string;
  A.honeytoken = (await created(await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/honeytokens`, payload: { kind: 'table', target: 'public.canary' } }))).id as string;
  A.policy = (await created(await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/policies`, payload: { name: 'p' } }))).id as string;
  A.agent = ((await created(await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/agents`, payload: { name: 'ag', policy_profile_id: A.policy } }))).credential as { id: string }).id;
  const pb = await created(await api.call(b.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'B', org_id: b.orgId, database } }));
  projectB = (pb.project as { id: string }).id;
  policyB = (await created(await api.call(b.apiKey, { method: 'POST', url: `/v1/projects/${projectB}/policies`, payload: { name: 'p' } }))).id as string;
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  port = (api.app.server.address() as { port: number }).port;
});
afterAll(async () => {
  await api?.stop();
});

/** One HTTP/1.1 exchange on a raw socket, so the request line can be anything a client may send. */
function rawHttp(text: string): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let out = '';
    socket.on('data', (chunk) => (out += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = out.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body });
    });
  });
}

describe('tenant isolation: org B with org A’s ids', () => {
  const routes = (p: string, pol: string): [string, string, Record<string, unknown>?][] => [
    ['GET', `/v1/projects/${p}`],
    ['PATCH', `/v1/projects/${p}`, { name: 'x' }],
    ['DELETE', `/v1/projects/${p}`],
    ['GET', `/v1/projects/${p}/databases`],
    ['POST', `/v1/projects/${p}/databases`, database],
    ['GET', `/v1/projects/${p}/databases/${A.database}`],
    ['PATCH', `/v1/projects/${p}/databases/${A.database}`, { host: 'evil.example' }],
    ['DELETE', `/v1/projects/${p}/databases/${A.database}`],
    ['POST', `/v1/projects/${p}/databases/${A.database}/test`],
    ['GET', `/v1/projects/${p}/databases/${A.database}/replicas`],
    ['POST', `/v1/projects/${p}/databases/${A.database}/replicas`, { host: 'h', port: 1 }],
    ['DELETE', `/v1/projects/${p}/databases/${A.database}/replicas/${A.replica}`],
    ['GET', `/v1/projects/${p}/policies`],
    ['POST', `/v1/projects/${p}/policies`, { name: 'q' }],
    ['GET', `/v1/projects/${p}/policies/${A.policy}`],
    ['PATCH', `/v1/projects/${p}/policies/${A.policy}`, { read_only: false }],
    ['DELETE', `/v1/projects/${p}/policies/${A.policy}`],
    ['POST', `/v1/projects/${p}/policies/${A.policy}/provision`, { database_id: A.database }],
    ['GET', `/v1/projects/${p}/honeytokens`],
    ['POST', `/v1/projects/${p}/honeytokens`, { kind: 'table', target: 'public.x' }],
    ['GET', `/v1/projects/${p}/honeytokens/${A.honeytoken}`],
    ['DELETE', `/v1/projects/${p}/honeytokens/${A.honeytoken}`],
    ['GET', `/v1/projects/${p}/agents`],
    ['POST', `/v1/projects/${p}/agents`, { name: 'x', policy_profile_id: pol }],
    ['GET', `/v1/projects/${p}/agents/${A.agent}`],
    ['PATCH', `/v1/projects/${p}/agents/${A.agent}`, { status: 'disabled' }],
    ['POST', `/v1/projects/${p}/agents/${A.agent}/rotate`],
    ['DELETE', `/v1/projects/${p}/agents/${A.agent}`],
    ['GET', `/v1/projects/${p}/audit`],
    ['GET', `/v1/projects/${p}/audit/verify`],
    ['POST', `/v1/projects/${p}/audit/checkpoints`],
    ['GET', `/v1/projects/${p}/usage/agents`],
    ['GET', `/v1/projects/${p}/audit/sessions/s1`],
  ];

  it('answers 404 (or 400 for a foreign policy in a body) on every route, with A’s project id or B’s own', async () => {
    const wrong: string[] = [];
    for (const [p, pol] of [[A.project, A.policy], [projectB, A.policy]] as const) {
      for (const [method, url, payload] of routes(p, pol)) {
        if (p === projectB && !url.includes(A.database) && !url.includes(A.policy) && !url.includes(A.honeytoken) && !url.includes(A.agent) && !payload?.policy_profile_id && !payload?.database_id) continue;
        const response = await api.call(b.apiKey, { method: method as 'GET', url, ...(payload ? { payload } : {}) });
        const expected = p === projectB && payload?.policy_profile_id !== undefined ? 400 : 404;
        if (response.statusCode !== expected) wrong.push(`${method} ${url} → ${response.statusCode} ${response.body.slice(0, 120)}`);
      }
    }
    expect(wrong).toEqual([]);
    for (const url of [`/v1/orgs/${a.orgId}/api-keys`]) expect((await api.call(b.apiKey, { method: 'GET', url })).statusCode).toBe(404);
    expect((await api.call(b.apiKey, { method: 'POST', url: `/v1/orgs/${a.orgId}/api-keys`, payload: { name: 'x' } })).statusCode).toBe(404);
    expect((await api.call(b.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'x', org_id: a.orgId, database } })).statusCode).toBe(404);
    for (const url of [`/v1/projects?org_id=${a.orgId}`, `/v1/orgs/${a.orgId}`]) expect((await api.call(b.apiKey, { method: 'GET', url })).json()).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    // Nothing of A's changed.
    const agent = await api.call(a.apiKey, { method: 'GET', url: `/v1/projects/${A.project}/agents/${A.agent}` });
    expect(agent.json()).toMatchObject({ status: 'active', name: 'ag' });
    expect((await api.call(a.apiKey, { method: 'GET', url: `/v1/projects/${A.project}` })).json()).toMatchObject({ name: 'A' });
  });

  it('keeps Idempotency-Key replays per caller: B reusing A’s key gets its own result, never A’s secrets', async () => {
    const key = 'shared-key-1';
    const first = await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/agents`, headers: { 'idempotency-key': key }, payload: { name: 'idem', policy_profile_id: A.policy } });
    expect(first.statusCode).toBe(201);
    const own = await api.call(b.apiKey, { method: 'POST', url: `/v1/projects/${projectB}/agents`, headers: { 'idempotency-key': key }, payload: { name: 'idem', policy_profile_id: policyB } });
    expect(own.statusCode).toBe(201);
    expect(own.body).not.toContain((first.json() as { mcp_token: string }).mcp_token);
    const other = await api.call(b.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/agents`, headers: { 'idempotency-key': 'shared-key-2' }, payload: { name: 'idem', policy_profile_id: A.policy } });
    expect(other.statusCode).toBe(404);
    const replayed = await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/agents`, headers: { 'idempotency-key': key }, payload: { name: 'other body', policy_profile_id: A.policy } });
    expect(replayed.statusCode).toBe(409);
    expect(replayed.body).not.toContain((first.json() as { mcp_token: string }).mcp_token);
    expect(own.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('authentication does not depend on how the request target is written', () => {
  it('refuses the management MCP without a credential when the target is in absolute form', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    const request = (target: string) =>
      rawHttp(`POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    expect((await request('/v1/mcp')).status).toBe(401);
    const absolute = await request(`http://127.0.0.1:${port}/v1/mcp`);
    expect(absolute.status).toBe(401);
    expect(absolute.body).not.toContain('search_endpoints');
  });

  it('authenticates and rate-limits an absolute-form target like the origin form', async () => {
    const target = `http://127.0.0.1:${port}/v1/projects?org_id=${a.orgId}`;
    const response = await rawHttp(`GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.apiKey}\r\nConnection: close\r\n\r\n`);
    expect(response.status).toBe(200);
    expect(response.headers).toContain('ratelimit: limit=');
  });
});

describe('framework-level errors are problem+json', () => {
  it('answers a path identifier of 101-128 characters (valid by the schema) like any other id, and a longer one with 400', async () => {
    const id = `prj_${'a'.repeat(110)}`;
    const response = await api.call(a.apiKey, { method: 'GET', url: `/v1/projects/${id}` });
    expect(response.statusCode).toBe(404);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    const tooLong = await api.call(a.apiKey, { method: 'GET', url: `/v1/projects/${'a'.repeat(300)}` });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(tooLong.json()).toMatchObject({ code: 'INVALID_INPUT', request_id: tooLong.headers['x-request-id'] });
  });

  it('answers a malformed percent-encoding in the path with 400 INVALID_INPUT problem+json and X-Request-Id', async () => {
    const response = await rawHttp(`GET /v1/projects/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(response.status).toBe(400);
    expect(response.headers).toContain('content-type: application/problem+json');
    expect(response.headers).toContain('x-request-id: ');
    expect(JSON.parse(response.body)).toMatchObject({ code: 'INVALID_INPUT', status: 400 });
  });
});

describe('policy numbers the read models cannot hold', () => {
  it('refuses max_rows and queries_per_day beyond a 32-bit integer with 400, so the policies projection never stalls for every tenant', async () => {
    for (const payload of [{ name: 'big rows', max_rows: 3_000_000_000 }, { name: 'big budget', queries_per_day: 2 ** 31 }]) {
      const response = await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${A.project}/policies`, payload });
      expect(response.statusCode, response.body).toBe(400);
    }
    const patched = await api.call(a.apiKey, { method: 'PATCH', url: `/v1/projects/${A.project}/policies/${A.policy}`, payload: { max_rows: 2 ** 40 } });
    expect(patched.statusCode, patched.body).toBe(400);
    // Another tenant's later policy still reaches the read model (lists read only the read model).
    const later = await created(await api.call(b.apiKey, { method: 'POST', url: `/v1/projects/${projectB}/policies`, payload: { name: 'after', max_rows: 2_147_483_647 } }));
    const listed = await api.call(b.apiKey, { method: 'GET', url: `/v1/projects/${projectB}/policies?page_size=100` });
    expect((listed.json() as { policies: { id: string }[] }).policies.map((p) => p.id)).toContain(later.id);
  });
});

describe('deleting a project', () => {
  it('is refused with 409 while it has live agent credentials (they would keep working and could no longer be revoked)', async () => {
    const project = await created(await api.call(a.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'doomed', org_id: a.orgId, database } }));
    const projectId = (project.project as { id: string }).id;
    const policy = await created(await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'p' } }));
    const agent = ((await created(await api.call(a.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'ag', policy_profile_id: policy.id } }))).credential as { id: string }).id;
    const refused = await api.call(a.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}` });
    expect(refused.statusCode, refused.body).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'CONFLICT' });
    expect((await api.call(a.apiKey, { method: 'GET', url: `/v1/projects/${projectId}` })).statusCode).toBe(200);
    expect((await api.call(a.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}/agents/${agent}` })).statusCode).toBe(204);
    expect((await api.call(a.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}` })).statusCode).toBe(204);
  });
});
