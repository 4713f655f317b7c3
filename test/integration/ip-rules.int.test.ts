import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEvent } from '../../src/events/catalog.js';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let other: { orgId: string; apiKey: string };
let projectId: string;

const url = (project = projectId) => `/v1/projects/${project}/ip-rules`;
const put = (payload: unknown, headers: Record<string, string> = {}, key = owner.apiKey, project = projectId) => api.call(key, { method: 'PUT', url: url(project), payload: payload as Record<string, unknown>, headers });
const get = (key = owner.apiKey, project = projectId) => api.call(key, { method: 'GET', url: url(project) });
const problem = (response: LightMyRequestResponse) => response.json() as { code: string; detail: string; errors?: { field: string; message: string }[] };
const events = async (project = projectId) => (await api.store.readStream(`iprules-${project}`)).map(decodeEvent);

beforeAll(async () => {
  api = await startApi('ip_rules');
  owner = await api.org('pro');
  other = await api.org('pro');
  projectId = await api.project(owner, 'fenced');
});
afterAll(async () => {
  await api?.stop();
});

describe('IP rules', () => {
  it('are empty at version 0 before the first PUT', async () => {
    const response = await get();
    expect(response.statusCode).toBe(200);
    expect(response.headers.etag).toBe('"0"');
    expect(response.json()).toEqual({ project_id: projectId, allow: [], deny: [], version: 0, updated_at: null });
  });

  it('PUT replaces both lists, normalised (bare address /32 or /128, host bits cleared, IPv6 compressed, IPv4-mapped as IPv4), as one event', async () => {
    const response = await put({
      allow: [{ cidr: '10.1.2.3/8', label: 'office' }, { cidr: '::ffff:192.0.2.1' }, { cidr: '2001:DB8:0:0::/32', label: 'v6 range' }],
      deny: [{ cidr: '127.0.0.2', label: 'build box' }, { cidr: '::1' }],
    });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers.etag).toBe('"1"');
    const expected = {
      project_id: projectId,
      allow: [{ cidr: '10.0.0.0/8', label: 'office' }, { cidr: '192.0.2.1/32' }, { cidr: '2001:db8::/32', label: 'v6 range' }],
      deny: [{ cidr: '127.0.0.2/32', label: 'build box' }, { cidr: '::1/128' }],
      version: 1,
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    };
    expect(response.json()).toEqual(expected);
    const read = await get();
    expect(read.headers.etag).toBe('"1"');
    expect(read.json()).toEqual(response.json());
    const stored = await events();
    expect(stored.map((e) => e.type)).toEqual(['IpRulesSet.v1']);
    expect(stored[0]!.data).toEqual({ project_id: projectId, allow: expected.allow, deny: expected.deny });
    const { rows } = await api.pool.query('select version, allow, deny from rm.ip_rules where project_id = $1', [projectId]);
    expect(rows).toEqual([{ version: 1, allow: expected.allow, deny: expected.deny }]);
  });

  it('setting the rules they already are (in any spelling) changes nothing: same ETag, no event', async () => {
    const response = await put({ allow: [{ cidr: '10.0.0.0/8', label: 'office' }, { cidr: '192.0.2.1' }, { cidr: '2001:db8::/32', label: 'v6 range' }], deny: [{ cidr: '127.0.0.2/32', label: 'build box' }, { cidr: '0:0::1' }] });
    expect(response.statusCode).toBe(200);
    expect(response.headers.etag).toBe('"1"');
    expect(await events()).toHaveLength(1);
  });

  it('refuses bad input with 400 naming each field, and changes nothing', async () => {
    const cases: [unknown, string[]][] = [
      [{ allow: [{ cidr: '10.0.0.0/33' }] }, ['allow.0.cidr']],
      [{ deny: [{ cidr: 'intranet' }, { cidr: 'fe80::1%eth0' }] }, ['deny.0.cidr', 'deny.1.cidr']],
      [{ allow: [{ cidr: '10.0.0.1', label: 'x'.repeat(101) }] }, ['allow.0.label']],
      [{ allow: [{ cidr: '10.0.0.1', label: 'nul\u0000' }] }, ['allow.0.label']],
      [{ deny: [{ cidr: '10.1.2.3/8' }, { cidr: '10.0.0.0/8' }] }, ['deny.1.cidr']],
      [{ allow: Array.from({ length: 501 }, (_, i) => ({ cidr: `10.0.${i >> 8}.${i & 255}` })) }, ['allow']],
      [{ allow: [{ cidr: '10.0.0.1', note: 'x' }] }, ['allow.0']],
      [{ allow: '10.0.0.1' }, ['allow']],
      [{ everyone: true }, ['(body)']],
    ];
    for (const [payload, fields] of cases) {
      const response = await put(payload);
      expect(response.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
      expect(problem(response).code).toBe('INVALID_INPUT');
      expect(problem(response).errors!.map((e) => e.field)).toEqual(fields);
    }
    expect(problem(await put({ deny: [{ cidr: '10.1.2.3/8' }, { cidr: '10.0.0.0/8' }] })).errors![0]!.message).toBe('is 10.0.0.0/8 again (as deny.0); list each range once');
    expect(problem(await put({ allow: [{ cidr: '10.0.0.0/33' }] })).errors![0]!.message).toMatch(/^has a prefix length outside 0-32: expected an IPv4 or IPv6 address/);
    expect(await events()).toHaveLength(1);
    expect((await get()).headers.etag).toBe('"1"');
  });

  it('honours If-Match: a stale ETag is 412 and changes nothing; the current one applies', async () => {
    const stale = await put({ deny: [{ cidr: '198.51.100.0/24' }] }, { 'if-match': '"0"' });
    expect(stale.statusCode).toBe(412);
    expect(problem(stale)).toMatchObject({ code: 'PRECONDITION_FAILED', detail: 'the IP rules are at version 1, not 0: fetch them again and retry with their ETag' });
    expect(problem(await put({ deny: [] }, { 'if-match': 'yesterday' })).code).toBe('PRECONDITION_FAILED');
    expect(await events()).toHaveLength(1);
    const fresh = await put({ deny: [{ cidr: '198.51.100.0/24' }] }, { 'if-match': '"1"' });
    expect(fresh.statusCode).toBe(200);
    expect(fresh.headers.etag).toBe('"2"');
    expect(fresh.json()).toMatchObject({ allow: [], deny: [{ cidr: '198.51.100.0/24' }], version: 2 });
    expect((await put({}, { 'if-match': '*' })).json()).toMatchObject({ allow: [], deny: [], version: 3 });
  });

  it('another organization’s project, or none, is 404 for reading and writing alike; nothing is written', async () => {
    for (const response of [await get(other.apiKey), await put({ deny: [{ cidr: '0.0.0.0/0' }] }, {}, other.apiKey), await get(owner.apiKey, 'prj_00000000000000000000000000'), await put({}, {}, owner.apiKey, 'prj_00000000000000000000000000')]) {
      expect(response.statusCode).toBe(404);
      expect(problem(response).code).toBe('NOT_FOUND');
    }
    expect(problem(await get(other.apiKey)).detail).toBe(`project ${projectId} not found`);
    expect(await events()).toHaveLength(3);
  });

  it('a member reads them, only an admin sets them', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'member', role: 'member' } });
    const member = (created.json() as { api_key: string }).api_key;
    expect((await get(member)).statusCode).toBe(200);
    const refused = await put({ deny: [] }, {}, member);
    expect(refused.statusCode).toBe(403);
    expect(problem(refused).code).toBe('FORBIDDEN');
  });

  it('both operations are in the OpenAPI document with operation ids, and the management MCP’s search_endpoints finds them', async () => {
    const document = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId: string }>> };
    expect(document.paths['/v1/projects/{project_id}/ip-rules']!.get!.operationId).toBe('getIpRules');
    expect(document.paths['/v1/projects/{project_id}/ip-rules']!.put!.operationId).toBe('setIpRules');
    expect(document.paths['/v1/orgs/{org_id}/api-keys/{key_id}']!.get!.operationId).toBe('getApiKey');
    await api.app.listen({ port: 0, host: '127.0.0.1' });
    const address = api.app.server.address() as { port: number };
    const client = new Client({ name: 'pgward-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${address.port}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${owner.apiKey}` } } }));
    try {
      const found = (await client.callTool({ name: 'search_endpoints', arguments: { query: 'IP allow deny rules', limit: 3 } })) as CallToolResult;
      const ids = (found.structuredContent as { endpoints: { operation_id: string }[] }).endpoints.map((e) => e.operation_id);
      expect(ids.slice(0, 2).sort()).toEqual(['getIpRules', 'setIpRules']);
    } finally {
      await client.close();
    }
  });
});

describe('If-Match on honeytokens and API keys', () => {
  it('deleting a honeytoken with a stale ETag is 412 and keeps it; with its ETag, deleted', async () => {
    const planted = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/honeytokens`, payload: { kind: 'table', target: 'public.canary' } });
    const id = (planted.json() as { id: string }).id;
    expect(planted.headers.etag).toBe('"0"');
    const path = `/v1/projects/${projectId}/honeytokens/${id}`;
    const stale = await api.call(owner.apiKey, { method: 'DELETE', url: path, headers: { 'if-match': '"1"' } });
    expect(stale.statusCode).toBe(412);
    expect(problem(stale).detail).toBe('the honeytoken is at revision 0, not 1: fetch it again and retry with its ETag');
    expect((await api.call(owner.apiKey, { method: 'GET', url: path })).statusCode).toBe(200);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: path, headers: { 'if-match': '"0"' } })).statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'GET', url: path })).statusCode).toBe(404);
  });

  it('an API key has an ETag (0 active, 1 revoked); revoking with a stale one is 412 and keeps it working', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'ci', role: 'admin' } });
    expect(created.headers.etag).toBe('"0"');
    const { key, api_key: secret } = created.json() as { key: { id: string }; api_key: string };
    const path = `/v1/orgs/${owner.orgId}/api-keys/${key.id}`;
    const read = await api.call(owner.apiKey, { method: 'GET', url: path });
    expect(read.headers.etag).toBe('"0"');
    expect(read.json()).toMatchObject({ id: key.id, name: 'ci', role: 'admin', status: 'active', revoked_at: null });
    expect((await api.call(other.apiKey, { method: 'GET', url: path })).statusCode).toBe(404);
    const stale = await api.call(owner.apiKey, { method: 'DELETE', url: path, headers: { 'if-match': '"1"' } });
    expect(stale.statusCode).toBe(412);
    expect(problem(stale).detail).toBe(`API key ${key.id} is at version 0, not 1: fetch it again and retry with its ETag`);
    expect((await get(secret)).statusCode).toBe(200);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: path, headers: { 'if-match': '"0"' } })).statusCode).toBe(204);
    const revoked = await api.call(owner.apiKey, { method: 'GET', url: path });
    expect(revoked.headers.etag).toBe('"1"');
    expect(revoked.json()).toMatchObject({ status: 'revoked' });
    expect((await get(secret)).statusCode).toBe(401);
  });
});
