/**
 * Red-team findings on the CRM area (docs/crm.md): forged page tokens, unicode-equivalent search
 * text, an agent handing its task to another role, and concurrent artifact transitions.
 */
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
