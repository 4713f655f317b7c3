/**
 * Red-team findings on the CRM area (docs/crm.md): forged page tokens, unicode-equivalent search
 * text, an agent handing its task to another role, and concurrent artifact transitions.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let other: { orgId: string; apiKey: string };
const keys: Record<'member' | 'researcher' | 'outreach', string> = {} as never;

beforeAll(async () => {
  api = await startApi('crmredteam');
  owner = await api.org('pro');
  other = await api.org('pro');
  for (const role of ['member', 'researcher', 'outreach'] as const) {
    const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: role, role } });
    expect(created.statusCode, created.body).toBe(201);
    keys[role] = (created.json() as { api_key: string }).api_key;
  }
});
afterAll(async () => {
  await api?.stop();
});

type Body = Record<string, unknown> & { id: string };
const token = (key: string) => Buffer.from(JSON.stringify({ k: key }), 'utf8').toString('base64url');
const problemOf = (response: LightMyRequestResponse) => [response.statusCode, (response.json() as { code: string }).code];

async function create(key: string, collection: string, payload: object): Promise<Body> {
  const response = await api.call(key, { method: 'POST', url: `/v1/crm/${collection}`, payload });
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as Body;
}

describe('forged page tokens', () => {
  it('refuses a time cursor whose date JavaScript reads but PostgreSQL does not with 400 INVALID_INPUT, never 500', async () => {
    for (const createdAt of ['1', 'Jan', '+275760-09-13T00:00:00.000Z', '-000001-01-01T00:00:00Z', '2026-02-30T00:00:00Z']) {
      const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/companies?page_token=${token(`${createdAt} cmp_00000000000000000000000000`)}` });
      expect([createdAt, ...problemOf(response)]).toEqual([createdAt, 400, 'INVALID_INPUT']);
    }
  });

  it('refuses an activity position beyond bigint with 400 INVALID_INPUT, never 500', async () => {
    const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/activities?page_token=${token('9999999999999999999')}` });
    expect(problemOf(response)).toEqual([400, 'INVALID_INPUT']);
    expect(response.body).not.toMatch(/bigint|out of range/);
  });

  it('pages only within the caller’s organization when given another organization’s token', async () => {
    for (const name of ['A1', 'A2']) await create(other.apiKey, 'companies', { name });
    const mine = await create(owner.apiKey, 'companies', { name: 'Mine' });
    const first = await api.call(other.apiKey, { method: 'GET', url: '/v1/crm/companies?page_size=1' });
    const next = (first.json() as { next_page_token: string }).next_page_token;
    expect(next).not.toBe('');
    const stolen = await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/companies?page_token=${next}` });
    expect(stolen.statusCode, stolen.body).toBe(200);
    expect((stolen.json() as { companies: Body[] }).companies.map((c) => c.org_id)).toEqual((stolen.json() as { companies: Body[] }).companies.map(() => owner.orgId));
    expect(mine.org_id).toBe(owner.orgId);
  });
});

describe('search text', () => {
  it('finds a name whatever Unicode normalization form the name or q uses', async () => {
    const nfc = await create(owner.apiKey, 'companies', { name: 'Caf\u00e9 Noir' });
    const nfd = await create(owner.apiKey, 'companies', { name: 'Be\u0301zier Labs' });
    const search = async (q: string) => ((await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/companies?q=${encodeURIComponent(q)}` })).json() as { companies: Body[] }).companies.map((c) => c.id);
    expect(await search('cafe\u0301')).toEqual([nfc.id]);
    expect(await search('caf\u00e9')).toEqual([nfc.id]);
    expect(await search('b\u00e9zier')).toEqual([nfd.id]);
    const wide = await create(owner.apiKey, 'companies', { name: '\uff21\uff23\uff2d\uff25 Wide' });
    expect(await search('acme')).toEqual([wide.id]);
    expect(await search('%')).toEqual([]);
    expect(await search('_af')).toEqual([]);
  });

  it('refuses NUL in q with 400 INVALID_INPUT', async () => {
    const response = await api.call(owner.apiKey, { method: 'GET', url: '/v1/crm/companies?q=a%00b' });
    expect(problemOf(response)).toEqual([400, 'INVALID_INPUT']);
  });
});

describe('agent roles on research tasks', () => {
  it('keeps an agent from handing its own task to another role (403 FORBIDDEN); a person may', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Task Co' });
    const task = await create(owner.apiKey, 'research-tasks', { subject_type: 'company', subject_id: company.id, role: 'researcher', title: 'Find people' });
    const handOff = await api.call(keys.researcher, { method: 'PATCH', url: `/v1/crm/research-tasks/${task.id}`, payload: { role: 'outreach' } });
    expect(problemOf(handOff)).toEqual([403, 'FORBIDDEN']);
    const own = await api.call(keys.researcher, { method: 'PATCH', url: `/v1/crm/research-tasks/${task.id}`, payload: { status: 'in_progress' } });
    expect(own.statusCode, own.body).toBe(200);
    const person = await api.call(keys.member, { method: 'PATCH', url: `/v1/crm/research-tasks/${task.id}`, payload: { role: 'outreach' } });
    expect([person.statusCode, (person.json() as Body).role]).toEqual([200, 'outreach']);
  });
});

describe('artifact transitions under concurrency', () => {
  it('approves once of two concurrent approvals: one 200, one 409 INVALID_STATE', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Race Co' });
    for (let round = 0; round < 3; round++) {
      const draft = await create(keys.outreach, 'artifacts', { subject_type: 'company', subject_id: company.id, kind: 'note', title: `race ${round}` });
      const answers = await Promise.all([owner.apiKey, keys.member].map((key) => api.call(key, { method: 'POST', url: `/v1/crm/artifacts/${draft.id}/approve` })));
      expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409]);
      expect((answers.find((a) => a.statusCode === 409)!.json() as { code: string }).code).toBe('INVALID_STATE');
    }
  });
});

describe('another organization’s records', () => {
  it('are 404 by id for every operation, and 400 INVALID_INPUT when a create or patch body names them', async () => {
    const theirCompany = await create(other.apiKey, 'companies', { name: 'Theirs' });
    const theirContact = await create(other.apiKey, 'contacts', { name: 'Their Contact', company_id: theirCompany.id });
    const theirTask = await create(other.apiKey, 'research-tasks', { subject_type: 'company', subject_id: theirCompany.id, role: 'researcher', title: 't' });
    const theirDraft = await create(other.apiKey, 'artifacts', { subject_type: 'company', subject_id: theirCompany.id, kind: 'note', title: 'their draft' });
    const calls: [string, string, object?][] = [
      ['GET', `/v1/crm/companies/${theirCompany.id}`],
      ['PATCH', `/v1/crm/companies/${theirCompany.id}`, { name: 'mine now' }],
      ['DELETE', `/v1/crm/contacts/${theirContact.id}`],
      ['PATCH', `/v1/crm/research-tasks/${theirTask.id}`, { status: 'done' }],
      ['POST', `/v1/crm/artifacts/${theirDraft.id}/approve`],
      ['POST', `/v1/crm/artifacts/${theirDraft.id}/discard`],
    ];
    for (const [method, url, payload] of calls) {
      const response = await api.call(owner.apiKey, { method: method as 'GET', url, ...(payload ? { payload } : {}) });
      expect([method, url, ...problemOf(response)]).toEqual([method, url, 404, 'NOT_FOUND']);
    }
    const mine = await create(owner.apiKey, 'companies', { name: 'Mine Co' });
    const deal = await create(owner.apiKey, 'deals', { name: 'Deal', company_id: mine.id });
    const bodies: [string, string, object][] = [
      ['POST', '/v1/crm/contacts', { name: 'x', company_id: theirCompany.id }],
      ['POST', '/v1/crm/artifacts', { subject_type: 'contact', subject_id: theirContact.id, kind: 'note', title: 'x' }],
      ['POST', '/v1/crm/artifacts', { subject_type: 'company', subject_id: mine.id, task_id: theirTask.id, kind: 'note', title: 'x' }],
      ['PATCH', `/v1/crm/deals/${deal.id}`, { contact_ids: [theirContact.id] }],
      ['PATCH', `/v1/crm/deals/${deal.id}`, { company_id: theirCompany.id }],
    ];
    for (const [method, url, payload] of bodies) {
      const response = await api.call(owner.apiKey, { method: method as 'POST', url, payload });
      expect([url, ...problemOf(response)]).toEqual([url, 400, 'INVALID_INPUT']);
      expect(response.body).not.toContain('Theirs');
    }
    expect(((await api.call(other.apiKey, { method: 'GET', url: `/v1/crm/artifacts/${theirDraft.id}` })).json() as Body).status).toBe('draft');
  });
});

describe('agent keys through the management MCP (call_endpoint)', () => {
  it('answers as REST does: 403 off their role, 404 for another organization’s record, never its content', async () => {
    const address = await api.app.listen({ port: 0, host: '127.0.0.1' });
    const foreign = await create(other.apiKey, 'companies', { name: 'Foreign Secret' });
    const company = await create(owner.apiKey, 'companies', { name: 'MCP Co' });
    const draft = await create(keys.outreach, 'artifacts', { subject_type: 'company', subject_id: company.id, kind: 'note', title: 'mcp draft' });
    const client = new Client({ name: 'redteam', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${address}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${keys.outreach}` } } }));
    try {
      const call = async (operation_id: string, path_params: Record<string, string> = {}, body?: object) =>
        (await client.callTool({ name: 'call_endpoint', arguments: { operation_id, path_params, ...(body ? { body } : {}) } })) as CallToolResult & { structuredContent?: { status: number } };
      const statusOf = (result: CallToolResult & { structuredContent?: { status: number } }) => [result.isError ?? false, result.structuredContent?.status];
      expect(statusOf(await call('listProjects'))).toEqual([true, 403]);
      expect(statusOf(await call('listApiKeys'))).toEqual([true, 403]);
      expect(statusOf(await call('approveArtifact', { artifact_id: draft.id }))).toEqual([true, 403]);
      expect(statusOf(await call('createCompany', {}, { name: 'not mine to make' }))).toEqual([true, 403]);
      const stolen = await call('getCompany', { company_id: foreign.id });
      expect(statusOf(stolen)).toEqual([true, 404]);
      expect(JSON.stringify(stolen)).not.toContain('Foreign Secret');
      expect(statusOf(await call('getCompany', { company_id: company.id }))).toEqual([false, 200]);
      const artifact = (await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/artifacts/${draft.id}` })).json() as Body;
      expect(artifact.status).toBe('draft');
    } finally {
      await client.close();
    }
  });
});
