import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let base: string;
let mcp: Client;

const database = { host: '127.0.0.1', port: 5432, name: 'shop', username: 'postgres', password: 'upstream-pw' };

async function connect(token: string): Promise<Client> {
  const client = new Client({ name: 'pgward-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

async function call(name: string, args: Record<string, unknown>, client = mcp): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

/** A successful call_endpoint: its {status, body}. */
async function invoke(args: Record<string, unknown>, client = mcp): Promise<{ status: number; body: Record<string, unknown> }> {
  const result = await call('call_endpoint', args, client);
  expect(result.isError, textOf(result)).toBeFalsy();
  return result.structuredContent as { status: number; body: Record<string, unknown> };
}

function rpc(token: string | undefined, body: unknown): Promise<Response> {
  return fetch(`${base}/v1/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
}

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

beforeAll(async () => {
  api = await startApi('management_mcp');
  owner = await api.org('pro');
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  base = `http://127.0.0.1:${address.port}`;
  mcp = await connect(owner.apiKey);
});
afterAll(async () => {
  await mcp?.close();
  await api?.stop();
});

describe('lifecycle', () => {
  it('initializes with the SDK client and announces the tools capability and instructions', () => {
    expect(mcp.getServerVersion()).toEqual({ name: 'pgward-management', version: '1.0.0' });
    expect(mcp.getServerCapabilities()?.tools).toBeDefined();
    expect(mcp.getInstructions()).toMatch(/search_endpoints.*describe_endpoint.*call_endpoint/);
  });

  it('negotiates protocol revision 2025-03-26 when asked, stateless, with X-Request-Id, and accepts notifications/initialized', async () => {
    const response = await rpc(owner.apiKey, initialize);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    expect(response.headers.get('mcp-session-id')).toBeNull();
    const body = (await response.json()) as { id: number; result: { protocolVersion: string } };
    expect(body).toMatchObject({ id: 1, result: { protocolVersion: '2025-03-26' } });
    const initialized = await rpc(owner.apiKey, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(initialized.status).toBe(202);
  });

  it('refuses a POST without a body as a problem, before any JSON-RPC', async () => {
    const response = await fetch(`${base}/v1/mcp`, { method: 'POST', headers: { authorization: `Bearer ${owner.apiKey}`, accept: 'application/json, text/event-stream' } });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 'INVALID_INPUT', detail: 'send a JSON-RPC 2.0 message as the body' });
  });

  it('answers ping', async () => {
    expect(await mcp.ping()).toEqual({});
  });

  it('answers 405 with Allow: POST to GET and DELETE: there are no sessions', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(`${base}/v1/mcp`, { method, headers: { authorization: `Bearer ${owner.apiKey}` } });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
    }
  });
});

describe('authentication', () => {
  it.each([
    ['no token', undefined],
    ['a malformed token', 'nope'],
    ['an unknown org key', `pgw_org_${'A'.repeat(43)}`],
  ])('answers HTTP 401 to %s, pointing at the protected-resource metadata', async (_what, token) => {
    const response = await rpc(token, initialize);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(`Bearer realm="pgward", resource_metadata="${base}/.well-known/oauth-protected-resource"`);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await response.json()).toMatchObject({ code: 'UNAUTHORIZED', request_id: response.headers.get('x-request-id') });
  });

  it('serves the protected-resource metadata without a token', async () => {
    const response = await fetch(`${base}/.well-known/oauth-protected-resource`);
    expect(response.status).toBe(200);
    // PGWARD_PUBLIC_URL is unset here: the resource and the issuer are at the public host and HTTP port.
    expect(await response.json()).toEqual({ resource: 'http://gateway.test:8080/v1/mcp', authorization_servers: ['http://gateway.test:8080/api/auth'], bearer_methods_supported: ['header'], scopes_supported: ['openid', 'profile', 'email', 'offline_access'] });
  });

  it('makes the SDK client fail to connect with a bad token', async () => {
    await expect(connect(`pgw_org_${'B'.repeat(43)}`)).rejects.toThrow(/401|Unauthorized/i);
  });
});

describe('tools/list', () => {
  it('returns exactly search_endpoints, describe_endpoint and call_endpoint, with schemas and honest annotations', async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toEqual(['search_endpoints', 'describe_endpoint', 'call_endpoint']);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(byName.search_endpoints!.inputSchema).toMatchObject({ type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer' } }, required: ['query'] });
    expect(byName.describe_endpoint!.inputSchema).toMatchObject({ type: 'object', properties: { operation_id: { type: 'string' } }, required: ['operation_id'] });
    expect(Object.keys(byName.call_endpoint!.inputSchema.properties ?? {}).sort()).toEqual(['body', 'idempotency_key', 'operation_id', 'path_params', 'query_params']);
    expect(byName.call_endpoint!.inputSchema.required).toEqual(['operation_id']);
    for (const tool of tools) expect(tool.description?.length).toBeGreaterThan(50);
    expect(byName.search_endpoints!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
    expect(byName.describe_endpoint!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
    expect(byName.call_endpoint!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false });
  });
});

describe('search_endpoints', () => {
  it.each([
    ['rotate agent credential', 'rotateAgentCredential'],
    ["rotate an agent's password", 'rotateAgentCredential'],
    ['create a project', 'createProject'],
    ['list databases', 'listDatabases'],
  ])('ranks the right operation first for "%s"', async (query, expected) => {
    const result = await call('search_endpoints', { query, limit: 3 });
    const { endpoints } = result.structuredContent as { endpoints: { operation_id: string; method: string; path: string; tag: string; summary: string }[] };
    expect(endpoints.length).toBeLessThanOrEqual(3);
    expect(endpoints[0]?.operation_id).toBe(expected);
  });

  it('returns operation id, method, path, tag and summary from the live OpenAPI document', async () => {
    const result = await call('search_endpoints', { query: 'rotate agent credential' });
    const { endpoints } = result.structuredContent as { endpoints: unknown[] };
    expect(endpoints[0]).toEqual({
      operation_id: 'rotateAgentCredential',
      method: 'POST',
      path: '/v1/projects/{project_id}/agents/{agent_id}/rotate',
      tag: 'agents',
      summary: 'Rotate an agent credential: a new password and MCP token, same id and policy',
    });
    expect(JSON.parse(textOf(result))).toEqual(result.structuredContent);
  });
});

describe('describe_endpoint', () => {
  it('gives registerAgentCredential’s parameters, body schema, responses and error codes', async () => {
    const result = await call('describe_endpoint', { operation_id: 'registerAgentCredential' });
    const described = result.structuredContent as {
      method: string;
      path: string;
      parameters: { name: string; in: string; required: boolean }[];
      request_body: { required: boolean; schema: { properties: Record<string, unknown>; required: string[] } };
      responses: { status: string; schema?: { properties: Record<string, unknown> }; error_codes?: string[] }[];
    };
    expect(described).toMatchObject({ method: 'POST', path: '/v1/projects/{project_id}/agents' });
    expect(described.parameters).toEqual([expect.objectContaining({ name: 'project_id', in: 'path', required: true })]);
    expect(described.request_body.required).toBe(true);
    expect(Object.keys(described.request_body.schema.properties).sort()).toEqual(['expires_at', 'name', 'policy_profile_id', 'principal_type']);
    expect(described.request_body.schema.required).toEqual(['name', 'policy_profile_id']);
    const responses = Object.fromEntries(described.responses.map((r) => [r.status, r]));
    expect(Object.keys(responses)).toEqual(expect.arrayContaining(['201', '400', '409']));
    expect(Object.keys(responses['201']!.schema!.properties).sort()).toEqual(['connection_string', 'credential', 'mcp_token', 'mcp_url']);
    expect(JSON.stringify(responses['201']!.schema)).not.toContain('$ref');
    expect(responses['400']!.error_codes).toEqual(['INVALID_INPUT']);
    expect(responses['409']!.error_codes).toEqual(expect.arrayContaining(['RESOURCE_EXISTS', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT']));
  });

  it('answers an unknown operation id with a tool error naming the closest and the valid ids', async () => {
    const result = await call('describe_endpoint', { operation_id: 'rotateAgentCredentials' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Unknown operation_id "rotateAgentCredentials"\. Closest: rotateAgentCredential/);
    expect(textOf(result)).toContain('Valid operation ids: ');
    expect(textOf(result)).toContain('listDatabases');
  });
});

describe('call_endpoint', () => {
  let projectId: string;
  let policyId: string;

  beforeAll(async () => {
    const project = await invoke({ operation_id: 'createProject', body: { name: 'Shop', org_id: owner.orgId, database } });
    expect(project.status).toBe(201);
    projectId = (project.body.project as { id: string }).id;
    const policy = await invoke({ operation_id: 'createPolicyProfile', path_params: { project_id: projectId }, body: { name: 'read orders', read_only: true, allowed_tables: ['public.orders'] } });
    expect(policy.status).toBe(201);
    policyId = policy.body.id as string;
  });

  it('registers a credential with an Idempotency-Key and replays it identically, creating one credential', async () => {
    const register = { operation_id: 'registerAgentCredential', path_params: { project_id: projectId }, body: { name: 'reporting agent', policy_profile_id: policyId }, idempotency_key: 'mcp-register-1' };
    const first = await call('call_endpoint', register);
    const replay = await call('call_endpoint', register);
    expect(first.isError).toBeFalsy();
    expect(replay).toEqual(first);
    const { status, body } = first.structuredContent as { status: number; body: { credential: { id: string }; mcp_token: string } };
    expect(status).toBe(201);
    expect(body.mcp_token).toMatch(/^pgw_agt_/);
    const listed = await invoke({ operation_id: 'listAgentCredentials', path_params: { project_id: projectId }, query_params: { page_size: 100 } });
    expect((listed.body.agents as { id: string }[]).map((a) => a.id)).toEqual([body.credential.id]);
    const rest = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/agents` });
    expect(rest.json()).toEqual(listed.body);
  });

  it('reaches a database’s replicas: add, get, change', async () => {
    const listed = await invoke({ operation_id: 'listDatabases', path_params: { project_id: projectId }, query_params: { page_size: 100 } });
    const databaseId = (listed.body.databases as { id: string }[])[0]!.id;
    const params = { project_id: projectId, database_id: databaseId };
    const added = await invoke({ operation_id: 'createReplica', path_params: params, body: { host: 'replica.internal', port: 5433 } });
    expect(added.status).toBe(201);
    const replicaId = added.body.id as string;
    const fetched = await invoke({ operation_id: 'getReplica', path_params: { ...params, replica_id: replicaId } });
    expect(fetched).toEqual({ status: 200, body: added.body });
    const changed = await invoke({ operation_id: 'updateReplica', path_params: { ...params, replica_id: replicaId }, body: { host: 'replica2.internal' } });
    expect(changed).toMatchObject({ status: 200, body: { id: replicaId, host: 'replica2.internal', port: 5433 } });
  });

  it('returns a problem as a tool error carrying code, detail and request_id', async () => {
    const result = await call('call_endpoint', { operation_id: 'getProject', path_params: { project_id: 'prj_missing' } });
    expect(result.isError).toBe(true);
    const { status, body } = result.structuredContent as { status: number; body: { code: string; detail: string; request_id: string } };
    expect(status).toBe(404);
    expect(body.code).toBe('NOT_FOUND');
    expect(textOf(result)).toBe(`NOT_FOUND (HTTP 404): ${body.detail} [request_id ${body.request_id}]`);
  });

  it('validates exactly as REST does, naming the rejected fields', async () => {
    const result = await call('call_endpoint', { operation_id: 'createProject', body: { name: '', org_id: owner.orgId, database: { ...database, port: 70000 } } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^INVALID_INPUT \(HTTP 400\): /);
    expect(textOf(result)).toMatch(/\nerrors: .*database\.port: /);
    const { body } = result.structuredContent as { body: { errors: { field: string }[] } };
    expect(body.errors.map((e) => e.field).sort()).toEqual(['database.port', 'name']);
  });

  it('enforces the caller’s own role: a viewer key cannot create through MCP', async () => {
    const viewer = await invoke({ operation_id: 'createApiKey', path_params: { org_id: owner.orgId }, body: { name: 'read only', role: 'viewer' } });
    const client = await connect(viewer.body.api_key as string);
    try {
      const result = await call('call_endpoint', { operation_id: 'createProject', body: { name: 'Nope', org_id: owner.orgId, database } }, client);
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(/^FORBIDDEN \(HTTP 403\)/);
    } finally {
      await client.close();
    }
  });

  it('refuses a missing path parameter naming it and the operation’s parameters', async () => {
    const result = await call('call_endpoint', { operation_id: 'rotateAgentCredential', path_params: { project_id: projectId, agent: 'x' } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe('rotateAgentCredential (POST /v1/projects/{project_id}/agents/{agent_id}/rotate) takes path_params project_id, agent_id; missing agent_id; not path parameters of it: agent.');
  });

  it('refuses an unknown operation id naming the valid ones', async () => {
    const result = await call('call_endpoint', { operation_id: 'dropEverything' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Unknown operation_id "dropEverything"\./);
    expect(textOf(result)).toContain('registerAgentCredential');
  });

  it('encodes path parameters', async () => {
    const result = await call('call_endpoint', { operation_id: 'getProject', path_params: { project_id: '../orgs' } });
    expect((result.structuredContent as { status: number }).status).toBe(400);
  });
});

describe('protocol errors', () => {
  it('answers invalid arguments with a tool error naming each field', async () => {
    const result = await call('search_endpoints', { query: '', limit: 'ten', extra: true });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Invalid arguments for search_endpoints: /);
    expect(textOf(result)).toMatch(/query: /);
    expect(textOf(result)).toMatch(/limit: /);
    expect(textOf(result)).toMatch(/extra/);
  });

  it('answers an unknown tool with a JSON-RPC invalid-params error naming the tools', async () => {
    const error = await call('drop_database', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toContain('Unknown tool "drop_database"; the tools are search_endpoints, describe_endpoint, call_endpoint');
  });
});
