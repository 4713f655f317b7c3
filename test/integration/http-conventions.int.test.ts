import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };

const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 's3cret-pw' };
const projectBody = (orgId: string, name = 'Shop') => ({ name, org_id: orgId, database });

function problem(response: { headers: Record<string, unknown>; json: () => unknown }) {
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = response.json() as { code: string; type: string; status: number; detail: string; request_id: string; errors?: { field: string }[] };
  expect(body.request_id).toBe(response.headers['x-request-id']);
  expect(body.type).toBe(`/v1/problems/${body.code}`);
  return body;
}

beforeAll(async () => {
  api = await startApi('http_conventions');
  owner = await api.org('pro');
});
afterAll(async () => {
  await api?.stop();
});

describe('X-Request-Id', () => {
  it('keeps a well-formed client id, replaces a malformed one, and makes one when absent', async () => {
    const kept = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects?org_id=${owner.orgId}`, headers: { 'x-request-id': 'client-42.a:b' } });
    expect(kept.statusCode).toBe(200);
    expect(kept.headers['x-request-id']).toBe('client-42.a:b');
    const replaced = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects?org_id=${owner.orgId}`, headers: { 'x-request-id': 'bad id\u00e9' } });
    expect(replaced.headers['x-request-id']).toMatch(/^req_[0-9a-f]{24}$/);
    const made = await api.app.inject({ method: 'GET', url: '/healthz' });
    expect(made.headers['x-request-id']).toMatch(/^req_[0-9a-f]{24}$/);
  });
});

describe('authentication', () => {
  it.each([
    ['no header', undefined],
    ['not bearer', 'Basic dXNlcjpwYXNz'],
    ['malformed token', 'Bearer nope'],
    ['unknown org key', `Bearer pgw_org_${'A'.repeat(43)}`],
    ['JWT without JWT configuration', 'Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln'],
  ])('answers 401 UNAUTHORIZED for %s', async (_what, authorization) => {
    const response = await api.app.inject({ method: 'GET', url: `/v1/projects?org_id=${owner.orgId}`, headers: authorization ? { authorization } : {} });
    expect(response.statusCode).toBe(401);
    expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="pgward"/);
    expect(problem(response).code).toBe('UNAUTHORIZED');
  });

  it('refuses a revoked key, and a role below the operation’s with 403 FORBIDDEN', async () => {
    const viewer = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'read only', role: 'viewer' } });
    expect(viewer.statusCode).toBe(201);
    const { api_key: viewerKey, key } = viewer.json() as { api_key: string; key: { id: string } };
    expect((await api.call(viewerKey, { method: 'GET', url: `/v1/projects?org_id=${owner.orgId}` })).statusCode).toBe(200);
    const forbidden = await api.call(viewerKey, { method: 'POST', url: '/v1/projects', payload: projectBody(owner.orgId) });
    expect(forbidden.statusCode).toBe(403);
    expect(problem(forbidden).code).toBe('FORBIDDEN');
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/orgs/${owner.orgId}/api-keys/${key.id}` })).statusCode).toBe(204);
    const revoked = await api.call(viewerKey, { method: 'GET', url: `/v1/projects?org_id=${owner.orgId}` });
    expect(revoked.statusCode).toBe(401);
  });
});

describe('validation and media types', () => {
  it('answers 400 INVALID_INPUT naming each rejected field by its dotted path, and creates nothing', async () => {
    const response = await api.call(owner.apiKey, {
      method: 'POST',
      url: '/v1/projects',
      payload: { name: '', org_id: owner.orgId, database: { ...database, port: 70000, host: 'bad host' }, tags: Array(11).fill('t') },
    });
    expect(response.statusCode).toBe(400);
    const body = problem(response);
    expect(body.code).toBe('INVALID_INPUT');
    expect(body.errors!.map((e) => e.field).sort()).toEqual(['database.host', 'database.port', 'name', 'tags']);
    const list = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects?org_id=${owner.orgId}&page_size=100` });
    expect((list.json() as { projects: { name: string }[] }).projects.filter((p) => p.name === '')).toEqual([]);
  });

  it('answers 415 for a body that is not JSON or has no Content-Type', async () => {
    for (const headers of [{ 'content-type': 'text/plain' }, {}]) {
      const response = await api.app.inject({ method: 'POST', url: '/v1/projects', headers: { authorization: `Bearer ${owner.apiKey}`, ...headers }, payload: 'name=x' });
      expect(response.statusCode).toBe(415);
      expect(problem(response).code).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
  });

  it('answers 413 for a body over 2 MB', async () => {
    const response = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }) });
    expect(response.statusCode).toBe(413);
    expect(problem(response).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('answers 400 for a malformed path identifier and a bad page size', async () => {
    expect(problem(await api.call(owner.apiKey, { method: 'GET', url: '/v1/projects/bad%20id' })).code).toBe('INVALID_INPUT');
    for (const size of ['0', '101', 'x']) {
      const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects?org_id=${owner.orgId}&page_size=${size}` });
      expect(problem(response).errors![0]!.field).toBe('page_size');
    }
  });
});

describe('not found and method not allowed', () => {
  it('answers a project of another organization exactly like a missing one', async () => {
    const other = await api.org('pro');
    const created = await api.call(other.apiKey, { method: 'POST', url: '/v1/projects', payload: projectBody(other.orgId) });
    const theirs = (created.json() as { project: { id: string } }).project.id;
    const missing = 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa';
    const a = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${theirs}` });
    const b = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${missing}` });
    expect([a.statusCode, b.statusCode]).toEqual([404, 404]);
    const strip = (body: ReturnType<typeof problem>, id: string) => ({ ...body, request_id: '', detail: body.detail.replace(id, 'ID') });
    expect(strip(problem(a), theirs)).toEqual(strip(problem(b), missing));
  });

  it('answers 405 with Allow for a known path and an unsupported method', async () => {
    const response = await api.call(owner.apiKey, { method: 'PUT', url: '/v1/projects/prj_x' });
    expect(response.statusCode).toBe(405);
    expect(response.headers.allow).toBe('DELETE, GET, PATCH');
    expect(problem(response).code).toBe('METHOD_NOT_ALLOWED');
    const unknown = await api.call(owner.apiKey, { method: 'GET', url: '/v1/nothing-here' });
    expect(problem(unknown).code).toBe('NOT_FOUND');
  });
});

describe('Idempotency-Key', () => {
  it('replays the stored response for the same key and body, refuses another body, and creates one project', async () => {
    const headers = { 'idempotency-key': 'create-shop-1' };
    const first = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', headers, payload: projectBody(owner.orgId, 'Idem') });
    const second = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', headers, payload: projectBody(owner.orgId, 'Idem') });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.body).toBe(first.body);
    expect(second.headers['idempotent-replayed']).toBe('true');
    const reused = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', headers, payload: projectBody(owner.orgId, 'Other') });
    expect(reused.statusCode).toBe(409);
    expect(problem(reused).code).toBe('IDEMPOTENCY_KEY_REUSED');
    const { rows } = await api.pool.query(`select count(*)::int as n from pgward.events where type = 'ProjectCreated.v1' and convert_from(data, 'utf8')::jsonb->>'name' in ('Idem', 'Other')`);
    expect(rows[0].n).toBe(1);
    const stored = await api.pool.query(`select body from pgward.idempotency_keys where key = 'create-shop-1'`);
    expect(stored.rows[0].body).not.toContain('Idem');
  });
});

describe('ETag and If-Match', () => {
  it('returns the stream revision as ETag; a stale If-Match is 412 and changes nothing', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', payload: projectBody(owner.orgId, 'Tagged') });
    expect(created.headers.etag).toBe('"0"');
    const id = (created.json() as { project: { id: string } }).project.id;
    const patched = await api.call(owner.apiKey, { method: 'PATCH', url: `/v1/projects/${id}`, headers: { 'if-match': '"0"' }, payload: { name: 'Tagged 2' } });
    expect(patched.statusCode).toBe(200);
    expect(patched.headers.etag).toBe('"2"');
    const stale = await api.call(owner.apiKey, { method: 'PATCH', url: `/v1/projects/${id}`, headers: { 'if-match': '"0"' }, payload: { name: 'Lost update' } });
    expect(stale.statusCode).toBe(412);
    expect(problem(stale).code).toBe('PRECONDITION_FAILED');
    const events = await api.store.readStream(`project-${id}`);
    expect(events.map((e) => e.type)).toEqual(['ProjectCreated.v1', 'DatabaseRegistered.v1', 'ProjectUpdated.v1']);
  });
});

describe('pagination', () => {
  it('walks every project exactly once with opaque tokens, ending with an empty token', async () => {
    const org = await api.org('pro');
    for (let i = 0; i < 5; i++) await api.call(org.apiKey, { method: 'POST', url: '/v1/projects', payload: projectBody(org.orgId, `p${i}`) });
    const seen: string[] = [];
    let token = '';
    for (let page = 0; page < 5; page++) {
      const response = await api.call(org.apiKey, { method: 'GET', url: `/v1/projects?org_id=${org.orgId}&page_size=2${token ? `&page_token=${token}` : ''}` });
      const body = response.json() as { projects: { name: string }[]; next_page_token: string };
      seen.push(...body.projects.map((p) => p.name));
      token = body.next_page_token;
      if (!token) break;
    }
    expect(seen.sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    expect(token).toBe('');
    const garbage = await api.call(org.apiKey, { method: 'GET', url: `/v1/projects?org_id=${org.orgId}&page_token=garbage` });
    expect(problem(garbage).errors![0]!.field).toBe('page_token');
  });
});

describe('plan limits', () => {
  it('answers 403 PLAN_LIMIT_REACHED for a self-hosted project below the scale plan', async () => {
    const response = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', payload: { ...projectBody(owner.orgId), self_hosted: true } });
    expect(response.statusCode).toBe(403);
    expect(problem(response).code).toBe('PLAN_LIMIT_REACHED');
    const scale = await api.org('scale');
    const allowed = await api.call(scale.apiKey, { method: 'POST', url: '/v1/projects', payload: { ...projectBody(scale.orgId), self_hosted: true } });
    expect(allowed.statusCode).toBe(201);
  });
});

describe('rate limits and failures', () => {
  it('answers 429 RATE_LIMITED with Retry-After and RateLimit once a credential spends its quota', async () => {
    const limited = await startApi('http_rate', { PGWARD_RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const org = await limited.org('pro');
      const statuses: number[] = [];
      let last;
      for (let i = 0; i < 4; i++) {
        last = await limited.call(org.apiKey, { method: 'GET', url: `/v1/projects?org_id=${org.orgId}` });
        statuses.push(last.statusCode);
      }
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
      expect(last!.headers.ratelimit).toMatch(/^limit=3, remaining=0, reset=\d+$/);
      expect(problem(last!).code).toBe('RATE_LIMITED');
    } finally {
      await limited.stop();
    }
  });

  it('answers 500 INTERNAL_ERROR without internals when the read models are broken', async () => {
    const broken = await startApi('http_broken');
    try {
      const org = await broken.org('pro');
      await broken.pool.query('alter table rm.organizations rename to organizations_gone');
      const response = await broken.call(org.apiKey, { method: 'POST', url: '/v1/projects', payload: projectBody(org.orgId) });
      expect(response.statusCode).toBe(500);
      const body = problem(response);
      expect(body.code).toBe('INTERNAL_ERROR');
      expect(body.detail).not.toMatch(/organizations|relation|select/i);
      expect(body.detail).toContain(body.request_id);
    } finally {
      await broken.pool.query('alter table rm.organizations_gone rename to organizations').catch(() => undefined);
      await broken.stop();
    }
  });
});

describe('OpenAPI and discovery', () => {
  it('serves an OpenAPI 3.1 document whose operations have unique camelCase ids, summaries, tags and error responses', async () => {
    const response = await api.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(response.statusCode).toBe(200);
    const doc = response.json() as { openapi: string; paths: Record<string, Record<string, { operationId: string; summary: string; tags: string[]; security?: unknown[]; responses: Record<string, unknown> }>> };
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods));
    const ids = operations.map((o) => o.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const operation of operations) {
      expect(operation.operationId).toMatch(/^[a-z][a-zA-Z]+$/);
      expect(operation.summary.length).toBeGreaterThan(0);
      expect(operation.tags.length).toBeGreaterThan(0);
      // Public operations (`security: []`: the discovery metadata, the proxy's CA, the demo) need no credential to refuse.
      if (operation.security?.length !== 0) expect(Object.keys(operation.responses)).toContain('401');
    }
    expect(operations.filter((o) => o.security?.length === 0).map((o) => o.operationId).sort()).toEqual(['createDemoCredential', 'getAgentCredentialDiscovery', 'getDemo', 'getProxyCaCertificate']);
  });

  it('serves the agent-credential discovery metadata without authentication', async () => {
    const response = await api.app.inject({ method: 'GET', url: '/.well-known/pgward-agent-credentials' });
    expect(response.statusCode).toBe(200);
    const body = response.json() as Record<string, { method?: string } | string[]>;
    expect(body.identity_types_supported).toEqual(['agent', 'human']);
    expect(body.credential_types_supported).toEqual(['bearer', 'scram-sha-256']);
    expect(['registration', 'rotation', 'kill_switch', 'revocation'].map((k) => (body[k] as { method: string }).method)).toEqual(['POST', 'POST', 'PATCH', 'DELETE']);
  });
});

describe('bodies', () => {
  it('treats an empty body sent with Content-Type: application/json as no body, and bad JSON as 400', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', payload: projectBody(owner.orgId, 'Empty body') });
    const id = (created.json() as { project: { id: string } }).project.id;
    const deleted = await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/projects/${id}`, headers: { 'content-type': 'application/json' } });
    expect(deleted.statusCode).toBe(204);
    const bad = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', headers: { 'content-type': 'application/json' }, payload: '{"name": ' });
    expect(bad.statusCode).toBe(400);
    expect(problem(bad).code).toBe('INVALID_INPUT');
  });
});
