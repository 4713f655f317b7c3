import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plans } from '../../src/plans.js';
import { startApi, type TestApi } from '../support/api.js';

/**
 * Finding yourself with only a credential: GET /v1/me, the organizations a caller sees, org_id
 * defaulting to the caller's organization, and another organization's id answering 404 on every
 * route that takes one (spec §5.3, §7), over real HTTP and through the management MCP.
 */
let api: TestApi;
let base: string;
let a: { orgId: string; apiKey: string };
let b: { orgId: string; apiKey: string };
let projectA: string;
let mcp: Client;

const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' };

interface Reply {
  status: number;
  type: string;
  body: Record<string, unknown>;
}

async function http(key: string | undefined, method: string, path: string, body?: unknown): Promise<Reply> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, type: response.headers.get('content-type') ?? '', body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function tool(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await mcp.callTool({ name, arguments: args })) as CallToolResult;
}

function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

beforeAll(async () => {
  // A priced operation, so the organization keeps a credit balance to read (docs/payments.md).
  api = await startApi('organizations', { PGWARD_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '1000', PGWARD_PRICES: 'createDemoCredential:pro=50' });
  a = await api.org('pro');
  b = await api.org('scale');
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(api.app.server.address() as { port: number }).port}`;
  projectA = await api.project(a, 'A');
  await api.project(b, 'B');
  mcp = new Client({ name: 'pgward-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.apiKey}` } } }));
});
afterAll(async () => {
  await mcp?.close();
  await api?.stop();
});

describe('GET /v1/me', () => {
  it('names an org key’s organization, role and key id', async () => {
    const keys = await http(a.apiKey, 'GET', `/v1/orgs/${a.orgId}/api-keys`);
    const [owner] = keys.body.api_keys as { id: string; role: string }[];
    const me = await http(a.apiKey, 'GET', '/v1/me');
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ kind: 'org_api_key', org_id: a.orgId, role: 'owner', key_id: owner!.id, subject: null });
  });

  it('tells a viewer key its own id and role', async () => {
    const created = await http(a.apiKey, 'POST', `/v1/orgs/${a.orgId}/api-keys`, { name: 'reader', role: 'viewer' });
    expect(created.status).toBe(201);
    const me = await http(created.body.api_key as string, 'GET', '/v1/me');
    expect(me.body).toEqual({ kind: 'org_api_key', org_id: a.orgId, role: 'viewer', key_id: (created.body.key as { id: string }).id, subject: null });
  });

  it('answers 401 without a credential', async () => {
    const me = await http(undefined, 'GET', '/v1/me');
    expect(me.status).toBe(401);
    expect(me.body).toMatchObject({ code: 'UNAUTHORIZED' });
  });
});

describe('organizations', () => {
  const orgA = () => ({ id: a.orgId, name: 'Test org', plan: 'pro', features: [...plans.pro.defaultFeatures], role: 'owner', created_at: expect.any(String), updated_at: expect.any(String) });

  it('lists exactly the caller’s own organization, and nothing after it', async () => {
    const listed = await http(a.apiKey, 'GET', '/v1/orgs?page_size=1');
    expect(listed.body).toEqual({ organizations: [orgA()], next_page_token: '' });
    expect((await http(b.apiKey, 'GET', '/v1/orgs')).body).toMatchObject({ organizations: [{ id: b.orgId, plan: 'scale' }], next_page_token: '' });
  });

  it('gets the caller’s organization, and answers another’s exactly as a nonexistent one: 404 NOT_FOUND problem+json', async () => {
    const own = await http(a.apiKey, 'GET', `/v1/orgs/${a.orgId}`);
    expect(own.status).toBe(200);
    expect(own.body).toEqual(orgA());
    for (const id of [b.orgId, 'org_doesnotexist']) {
      const other = await http(a.apiKey, 'GET', `/v1/orgs/${id}`);
      expect(other.status).toBe(404);
      expect(other.type).toMatch(/^application\/problem\+json/);
      expect(other.body).toMatchObject({ code: 'NOT_FOUND', status: 404, type: '/v1/problems/NOT_FOUND', detail: `organization ${id} not found` });
    }
  });
});

type OpenApiOperation = {
  operationId: string;
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown>; $ref?: string } }> };
};

/** Every operation of the live OpenAPI document that takes an org_id, in its path, query or body. */
async function orgScopedOperations(): Promise<{ id: string; method: string; path: string; in: string }[]> {
  const doc = (await http(undefined, 'GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, OpenApiOperation>>; components: { schemas: Record<string, { properties?: Record<string, unknown> }> } };
  const bodyProperties = (op: OpenApiOperation) => {
    const schema = op.requestBody?.content['application/json']?.schema;
    const resolved = schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()!] : schema;
    return Object.keys(resolved?.properties ?? {});
  };
  // The deployment's operators address any organization (docs/support.md); test/integration/support-cases.int.test.ts covers who reaches them.
  return Object.entries(doc.paths).filter(([path]) => !path.startsWith('/v1/operator/')).flatMap(([path, methods]) =>
    Object.entries(methods).flatMap(([method, op]) => {
      const where = op.parameters?.find((p) => p.name === 'org_id')?.in ?? (bodyProperties(op).includes('org_id') ? 'body' : undefined);
      return where ? [{ id: op.operationId, method: method.toUpperCase(), path, in: where }] : [];
    }),
  );
}

/** The URL of a GET taking org_id, addressed to `orgId`; `values` fills the route's other path parameters (from the caller's organization). */
function addressed(op: { path: string; in: string }, orgId: string, values: Record<string, string> = {}): string {
  const path = Object.entries(values).reduce((url, [name, value]) => url.replace(`{${name}}`, value), op.path.replace('{org_id}', orgId));
  if (/\{/.test(path)) throw new Error(`${op.path} takes another path parameter; give this test a value for it`);
  return op.in === 'query' ? `${path}?org_id=${orgId}` : path;
}

describe('routes taking org_id, enumerated from the OpenAPI document', () => {
  it('finds the known ones, so a route added later is covered by the same checks', async () => {
    const ids = (await orgScopedOperations()).map((op) => op.id).sort();
    expect(ids).toEqual(expect.arrayContaining(['createApiKey', 'createProject', 'getOrganization', 'listApiKeys', 'listProjects', 'revokeApiKey']));
  });

  it('answers every GET 200 for the caller’s organization and 404 NOT_FOUND for another’s or a nonexistent one', async () => {
    const gets = (await orgScopedOperations()).filter((op) => op.method === 'GET');
    expect(gets.length).toBeGreaterThanOrEqual(3);
    // A key of the caller's organization: another organization's route must not reach it either.
    const values = { key_id: ((await http(a.apiKey, 'GET', `/v1/orgs/${a.orgId}/api-keys`)).body.api_keys as { id: string }[])[0]!.id };
    const wrong: string[] = [];
    for (const op of gets) {
      const own = await http(a.apiKey, 'GET', addressed(op, a.orgId, values));
      if (own.status !== 200) wrong.push(`${op.id} own org → ${own.status}`);
      for (const orgId of [b.orgId, 'org_doesnotexist']) {
        const other = await http(a.apiKey, 'GET', addressed(op, orgId, values));
        if (other.status !== 404 || other.body.code !== 'NOT_FOUND' || !other.type.startsWith('application/problem+json')) wrong.push(`${op.id} ${orgId} → ${other.status} ${JSON.stringify(other.body)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('refuses every write addressed to another organization with 404 and changes nothing of it', async () => {
    const keyOfB = ((await http(b.apiKey, 'GET', `/v1/orgs/${b.orgId}/api-keys`)).body.api_keys as { id: string }[])[0]!.id;
    const writes: Record<string, (orgId: string) => [string, unknown?]> = {
      createProject: (orgId) => ['/v1/projects', { name: 'intruder', org_id: orgId, database }],
      createApiKey: (orgId) => [`/v1/orgs/${orgId}/api-keys`, { name: 'intruder', role: 'admin' }],
      revokeApiKey: (orgId) => [`/v1/orgs/${orgId}/api-keys/${keyOfB}`],
      createSupportCase: (orgId) => ['/v1/support-cases', { org_id: orgId, title: 'intruder', body: 'intruder' }],
      createCancellationFeedback: (orgId) => [`/v1/orgs/${orgId}/cancellation-feedback`, { reason: 'other' }],
      changeMemberRole: (orgId) => [`/v1/orgs/${orgId}/members/usr_aaaaaaaaaaaaaaaaaaaaaaaaaa`, { role: 'owner' }],
      removeMember: (orgId) => [`/v1/orgs/${orgId}/members/usr_aaaaaaaaaaaaaaaaaaaaaaaaaa`],
      createInvitation: (orgId) => [`/v1/orgs/${orgId}/invitations`, { email: 'intruder@example.com', role: 'owner' }],
      revokeInvitation: (orgId) => [`/v1/orgs/${orgId}/invitations/inv_aaaaaaaaaaaaaaaaaaaaaaaaaa`],
    };
    const before = [await http(b.apiKey, 'GET', '/v1/projects?page_size=100'), await http(b.apiKey, 'GET', `/v1/orgs/${b.orgId}/api-keys?page_size=100`)].map((r) => r.body);
    const wrong: string[] = [];
    for (const op of (await orgScopedOperations()).filter((o) => o.method !== 'GET')) {
      const write = writes[op.id];
      if (!write) {
        wrong.push(`${op.id}: no case in this test`);
        continue;
      }
      const [path, body] = write(b.orgId);
      const refused = await http(a.apiKey, op.method, path, body);
      if (refused.status !== 404 || refused.body.code !== 'NOT_FOUND') wrong.push(`${op.id} → ${refused.status} ${JSON.stringify(refused.body)}`);
    }
    expect(wrong).toEqual([]);
    const after = [await http(b.apiKey, 'GET', '/v1/projects?page_size=100'), await http(b.apiKey, 'GET', `/v1/orgs/${b.orgId}/api-keys?page_size=100`)].map((r) => r.body);
    expect(after).toEqual(before);
  });
});

describe('org_id defaults to the caller’s organization', () => {
  it('lists the caller’s projects when listProjects names no org_id', async () => {
    const listed = await http(a.apiKey, 'GET', '/v1/projects');
    expect(listed.status).toBe(200);
    expect((listed.body.projects as { id: string; org_id: string }[]).map((p) => [p.id, p.org_id])).toEqual([[projectA, a.orgId]]);
    expect(listed.body).toEqual((await http(a.apiKey, 'GET', `/v1/projects?org_id=${a.orgId}`)).body);
  });

  it('creates a project in the caller’s organization when the body names none', async () => {
    const created = await http(a.apiKey, 'POST', '/v1/projects', { name: 'defaulted', database });
    expect(created.status).toBe(201);
    expect(created.body.project).toMatchObject({ name: 'defaulted', org_id: a.orgId });
    const { status } = await http(a.apiKey, 'DELETE', `/v1/projects/${(created.body.project as { id: string }).id}`);
    expect(status).toBe(204);
  });
});

describe('the management MCP, with only an org key', () => {
  it('finds getCurrentCaller by intent and answers it as GET /v1/me does', async () => {
    for (const query of ['who am I', 'whoami']) {
      const found = await tool('search_endpoints', { query, limit: 3 });
      expect((found.structuredContent as { endpoints: { operation_id: string }[] }).endpoints[0]?.operation_id, query).toBe('getCurrentCaller');
    }
    const me = await tool('call_endpoint', { operation_id: 'getCurrentCaller' });
    expect(me.isError, textOf(me)).toBeFalsy();
    expect(me.structuredContent).toEqual({ status: 200, body: (await http(a.apiKey, 'GET', '/v1/me')).body });
  });

  it('calls listProjects without org_id and gets the caller’s projects', async () => {
    const listed = await tool('call_endpoint', { operation_id: 'listProjects' });
    expect(listed.isError, textOf(listed)).toBeFalsy();
    const { status, body } = listed.structuredContent as { status: number; body: { projects: { id: string }[] } };
    expect(status).toBe(200);
    expect(body.projects.map((p) => p.id)).toEqual([projectA]);
  });

  it('fills an omitted org_id path parameter with the caller’s organization', async () => {
    const org = await tool('call_endpoint', { operation_id: 'getOrganization' });
    expect(org.structuredContent).toMatchObject({ status: 200, body: { id: a.orgId } });
    const keys = await tool('call_endpoint', { operation_id: 'listApiKeys', path_params: {} });
    expect(keys.isError, textOf(keys)).toBeFalsy();
    expect(keys.structuredContent).toEqual({ status: 200, body: (await http(a.apiKey, 'GET', `/v1/orgs/${a.orgId}/api-keys`)).body });
  });

  it('answers another organization’s id with a NOT_FOUND tool error', async () => {
    for (const args of [{ query_params: { org_id: b.orgId } }, { path_params: { org_id: b.orgId } }]) {
      const operation_id = 'path_params' in args ? 'getOrganization' : 'listProjects';
      const refused = await tool('call_endpoint', { operation_id, ...args });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(new RegExp(`^NOT_FOUND \\(HTTP 404\\): organization ${b.orgId} not found `));
    }
  });

  it('describes getCurrentCaller’s response schema', async () => {
    const described = await tool('describe_endpoint', { operation_id: 'getCurrentCaller' });
    const { method, path, responses } = described.structuredContent as { method: string; path: string; responses: { status: string; schema?: { properties: Record<string, unknown>; required: string[] } }[] };
    expect([method, path]).toEqual(['GET', '/v1/me']);
    const ok = responses.find((r) => r.status === '200')!;
    expect(Object.keys(ok.schema!.properties).sort()).toEqual(['key_id', 'kind', 'org_id', 'role', 'subject']);
    expect(ok.schema!.properties.kind).toMatchObject({ enum: ['org_api_key', 'user_jwt', 'user_session'] });
  });
});
