/**
 * The CRM area through the real API over a real PostgreSQL (docs/crm.md): records, references,
 * limits, ETags, search and filters, artifact transitions, agent roles, the activity timeline and
 * the organization's context.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crmActivitiesProjection, crmContextsProjection, crmRecordsProjection } from '../../projections/crm.js';
import { rebuildAndVerify } from '../../projections/maintenance.js';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let other: { orgId: string; apiKey: string };
const keys: Record<'viewer' | 'member' | 'researcher' | 'enricher' | 'outreach', { key: string; id: string }> = {} as never;

beforeAll(async () => {
  api = await startApi('crm');
  owner = await api.org('pro');
  other = await api.org('pro');
  for (const role of ['viewer', 'member', 'researcher', 'enricher', 'outreach'] as const) {
    const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: role, role } });
    expect(created.statusCode, created.body).toBe(201);
    const body = created.json() as { api_key: string; key: { id: string; role: string } };
    expect(body.key.role).toBe(role);
    keys[role] = { key: body.api_key, id: body.key.id };
  }
});
afterAll(async () => {
  await api?.stop();
});

type Body = Record<string, unknown> & { id: string };
const problem = (response: LightMyRequestResponse) => response.json() as { code: string; errors?: { field: string }[] };

async function send(key: string, method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: object, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return api.call(key, { method, url, headers, ...(payload ? { payload } : {}) });
}

async function create(key: string, collection: string, payload: object): Promise<Body> {
  const response = await send(key, 'POST', `/v1/crm/${collection}`, payload);
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as Body;
}

describe('the research-to-outreach acceptance', () => {
  it('lowercases a domain, and the timeline lists created, drafted, approved, sent in order with actors', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Example Inc', domain: 'Example.COM' });
    expect(company).toMatchObject({ id: expect.stringMatching(/^cmp_[a-z0-9]{26}$/), org_id: owner.orgId, name: 'Example Inc', domain: 'example.com', description: '', industry: null, created_by_agent_role: null });
    const read = await send(keys.viewer.key, 'GET', `/v1/crm/companies/${company.id}`);
    expect([read.statusCode, (read.json() as Body).domain, read.headers.etag]).toEqual([200, 'example.com', '"0"']);

    const contact = await create(keys.researcher.key, 'contacts', { name: 'Ada Lovelace', company_id: company.id, email: 'ada@example.com' });
    expect(contact).toMatchObject({ id: expect.stringMatching(/^cnt_/), company_id: company.id, created_by: `api_key:${keys.researcher.id}`, created_by_agent_role: 'researcher' });
    const draft = await create(keys.outreach.key, 'artifacts', { subject_type: 'contact', subject_id: contact.id, kind: 'outreach_email', title: 'Hello Ada', body: 'Dear Ada, ...' });
    expect(draft).toMatchObject({ id: expect.stringMatching(/^art_/), status: 'draft', task_id: null, approved_by: null, sent_by: null });

    const approved = await send(keys.member.key, 'POST', `/v1/crm/artifacts/${draft.id}/approve`);
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json()).toMatchObject({ status: 'approved', approved_by: `api_key:${keys.member.id}`, approved_at: expect.any(String) });
    const sent = await send(keys.outreach.key, 'POST', `/v1/crm/artifacts/${draft.id}/send`, undefined, { 'if-match': approved.headers.etag as string });
    expect(sent.statusCode, sent.body).toBe(200);
    expect(sent.json()).toMatchObject({ status: 'sent', sent_by: `api_key:${keys.outreach.id}`, sent_at: expect.any(String) });
    expect(sent.headers.etag).toBe('"2"');

    const timeline = await send(keys.viewer.key, 'GET', `/v1/crm/activities?subject_id=${contact.id}`);
    expect(timeline.statusCode, timeline.body).toBe(200);
    const activities = (timeline.json() as { activities: Body[] }).activities;
    expect(activities.map(({ verb, actor, agent_role, record_type }) => ({ verb, actor, agent_role, record_type }))).toEqual([
      { verb: 'created', actor: 'agent', agent_role: 'researcher', record_type: 'contact' },
      { verb: 'drafted', actor: 'agent', agent_role: 'outreach', record_type: 'artifact' },
      { verb: 'approved', actor: `api_key:${keys.member.id}`, agent_role: null, record_type: 'artifact' },
      { verb: 'sent', actor: 'agent', agent_role: 'outreach', record_type: 'artifact' },
    ]);
    expect(activities[3]).toMatchObject({ id: expect.stringMatching(/^act_[0-9a-f]{32}$/), org_id: owner.orgId, subject_type: 'contact', subject_id: contact.id, record_id: draft.id, principal: `api_key:${keys.outreach.id}` });
    const one = await send(keys.researcher.key, 'GET', `/v1/crm/activities/${activities[0]!.id}`);
    expect(one.json()).toEqual(activities[0]);
    const companyTimeline = (await send(owner.apiKey, 'GET', `/v1/crm/activities?subject_id=${company.id}`)).json() as { activities: Body[] };
    expect(companyTimeline.activities.map((a) => [a.verb, a.actor])).toEqual([['created', expect.stringMatching(/^api_key:key_/)]]);
  });

  it('refuses an outreach agent approving (403 FORBIDDEN) and a second approval (409 INVALID_STATE)', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Twice Ltd' });
    const draft = await create(keys.outreach.key, 'artifacts', { subject_type: 'company', subject_id: company.id, kind: 'account_brief', title: 'Brief' });
    const byAgent = await send(keys.outreach.key, 'POST', `/v1/crm/artifacts/${draft.id}/approve`);
    expect([byAgent.statusCode, problem(byAgent).code]).toEqual([403, 'FORBIDDEN']);
    for (const role of ['researcher', 'enricher'] as const) {
      const refused = await send(keys[role].key, 'POST', `/v1/crm/artifacts/${draft.id}/approve`);
      expect([role, refused.statusCode, problem(refused).code]).toEqual([role, 403, 'FORBIDDEN']);
    }
    expect((await send(owner.apiKey, 'POST', `/v1/crm/artifacts/${draft.id}/approve`)).statusCode).toBe(200);
    const again = await send(owner.apiKey, 'POST', `/v1/crm/artifacts/${draft.id}/approve`);
    expect([again.statusCode, problem(again).code]).toEqual([409, 'INVALID_STATE']);
    const events = await api.store.readStream(`crmartifact-${draft.id}`);
    expect(events.map((e) => e.type)).toEqual(['ArtifactCreated.v1', 'ArtifactApproved.v1']);
  });
});

describe('artifact transitions', () => {
  it('allows draft → approved → sent and draft/approved → discarded, and refuses every other move with 409 INVALID_STATE', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Moves' });
    const draft = async () => create(owner.apiKey, 'artifacts', { subject_type: 'company', subject_id: company.id, kind: 'outreach_email', title: 't' });
    const move = async (id: string, to: string) => {
      const response = await send(owner.apiKey, 'POST', `/v1/crm/artifacts/${id}/${to}`);
      return response.statusCode === 200 ? (response.json() as Body).status : problem(response).code;
    };
    const a = await draft();
    expect(await move(a.id, 'send')).toBe('INVALID_STATE');
    expect(await move(a.id, 'discard')).toBe('discarded');
    expect([await move(a.id, 'approve'), await move(a.id, 'send'), await move(a.id, 'discard')]).toEqual(['INVALID_STATE', 'INVALID_STATE', 'INVALID_STATE']);
    const b = await draft();
    expect([await move(b.id, 'approve'), await move(b.id, 'discard')]).toEqual(['approved', 'discarded']);
    const c = await draft();
    expect([await move(c.id, 'approve'), await move(c.id, 'send'), await move(c.id, 'discard'), await move(c.id, 'approve')]).toEqual(['approved', 'sent', 'INVALID_STATE', 'INVALID_STATE']);
    const edit = await send(owner.apiKey, 'PATCH', `/v1/crm/artifacts/${c.id}`, { body: 'changed after sending' });
    expect([edit.statusCode, problem(edit).code]).toEqual([409, 'INVALID_STATE']);
    const sentOnly = (await send(owner.apiKey, 'GET', `/v1/crm/artifacts?subject_id=${company.id}&status=sent`)).json() as { artifacts: Body[] };
    expect(sentOnly.artifacts.map((x) => x.id)).toEqual([c.id]);
  });
});

describe('records', () => {
  it('refuses fields over their §2.13 limits with 400 INVALID_INPUT naming the field', async () => {
    const cases: [string, object, string][] = [
      ['companies', { name: '' }, 'name'],
      ['companies', { name: 'x'.repeat(256) }, 'name'],
      ['companies', { name: 'a', description: 'x'.repeat(10_001) }, 'description'],
      ['companies', { name: 'a', domain: 'x'.repeat(256) }, 'domain'],
      ['companies', { name: 'a', logo_url: 'x'.repeat(2049) }, 'logo_url'],
      ['contacts', { name: 'a', email: 'x'.repeat(321) }, 'email'],
      ['contacts', { name: 'a', phone: 'x'.repeat(65) }, 'phone'],
      ['contacts', { name: 'a', professional_network_url: 'x'.repeat(2049) }, 'professional_network_url'],
      ['contacts', { name: 'a', notes: 'x'.repeat(10_001) }, 'notes'],
      ['contacts', { name: 'a\u0000b' }, 'name'],
    ];
    for (const [collection, payload, field] of cases) {
      const response = await send(owner.apiKey, 'POST', `/v1/crm/${collection}`, payload);
      expect([collection, field, response.statusCode, problem(response).code, problem(response).errors?.map((e) => e.field)]).toEqual([collection, field, 400, 'INVALID_INPUT', [field]]);
    }
    const context = await send(owner.apiKey, 'PUT', '/v1/crm/context', { notes: 'x'.repeat(20_001) });
    expect([context.statusCode, problem(context).errors?.map((e) => e.field)]).toEqual([400, ['notes']]);
    const atLimit = await send(owner.apiKey, 'POST', '/v1/crm/companies', { name: 'x'.repeat(255), description: 'd'.repeat(10_000), domain: 'D'.repeat(255) });
    expect(atLimit.statusCode).toBe(201);
  });

  it('needs a contact’s company to exist in the same organization', async () => {
    const theirs = await create(other.apiKey, 'companies', { name: 'Theirs' });
    const refused = await send(owner.apiKey, 'POST', '/v1/crm/contacts', { name: 'Bob', company_id: theirs.id });
    expect([refused.statusCode, problem(refused).code, problem(refused).errors]).toEqual([400, 'INVALID_INPUT', [{ field: 'company_id', message: 'names no company of this organization' }]]);
    const missing = await send(owner.apiKey, 'POST', '/v1/crm/contacts', { name: 'Bob', company_id: 'cmp_aaaaaaaaaaaaaaaaaaaaaaaaaa' });
    expect(problem(missing).errors?.[0]?.field).toBe('company_id');
    const contact = await create(owner.apiKey, 'contacts', { name: 'Bob' });
    const moved = await send(owner.apiKey, 'PATCH', `/v1/crm/contacts/${contact.id}`, { company_id: theirs.id });
    expect([moved.statusCode, problem(moved).errors?.[0]?.field]).toEqual([400, 'company_id']);
    expect((await send(owner.apiKey, 'GET', `/v1/crm/companies/${theirs.id}`)).statusCode).toBe(404);
    expect((await send(owner.apiKey, 'DELETE', `/v1/crm/companies/${theirs.id}`)).statusCode).toBe(404);
    expect((await send(other.apiKey, 'GET', `/v1/crm/contacts/${contact.id}`)).statusCode).toBe(404);
  });

  it('patches with ETag and If-Match, deletes, and keeps a company named by contacts or deals (409 CONFLICT)', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Etag Co', domain: 'etag.example' });
    const stale = await send(owner.apiKey, 'PATCH', `/v1/crm/companies/${company.id}`, { industry: 'Retail' }, { 'if-match': '"3"' });
    expect([stale.statusCode, problem(stale).code]).toEqual([412, 'PRECONDITION_FAILED']);
    const patched = await send(owner.apiKey, 'PATCH', `/v1/crm/companies/${company.id}`, { industry: 'Retail', domain: 'ETAG.Example' }, { 'if-match': '"0"' });
    expect([patched.statusCode, patched.headers.etag]).toEqual([200, '"1"']);
    expect(patched.json()).toMatchObject({ industry: 'Retail', domain: 'etag.example', name: 'Etag Co' });
    const empty = await send(owner.apiKey, 'PATCH', `/v1/crm/companies/${company.id}`, {});
    expect([empty.statusCode, problem(empty).code]).toEqual([400, 'INVALID_INPUT']);
    const contact = await create(owner.apiKey, 'contacts', { name: 'Linked', company_id: company.id });
    const deal = await create(owner.apiKey, 'deals', { name: 'Pilot', company_id: company.id, contact_ids: [contact.id], amount: '12500.50', currency: 'EUR', expected_close_date: '2027-03-31' });
    expect(deal).toMatchObject({ id: expect.stringMatching(/^dl_/), stage: 'lead', contact_ids: [contact.id], amount: '12500.50', currency: 'EUR', notes: '' });
    const blocked = await send(owner.apiKey, 'DELETE', `/v1/crm/companies/${company.id}`);
    expect([blocked.statusCode, problem(blocked).code]).toEqual([409, 'CONFLICT']);
    const contactBlocked = await send(owner.apiKey, 'DELETE', `/v1/crm/contacts/${contact.id}`);
    expect([contactBlocked.statusCode, problem(contactBlocked).code]).toEqual([409, 'CONFLICT']);
    const won = await send(keys.enricher.key, 'PATCH', `/v1/crm/deals/${deal.id}`, { stage: 'won' });
    expect(won.statusCode, won.body).toBe(200);
    expect((await send(owner.apiKey, 'DELETE', `/v1/crm/deals/${deal.id}`)).statusCode).toBe(204);
    expect((await send(owner.apiKey, 'DELETE', `/v1/crm/contacts/${contact.id}`, undefined, { 'if-match': '"0"' })).statusCode).toBe(204);
    expect((await send(owner.apiKey, 'DELETE', `/v1/crm/companies/${company.id}`)).statusCode).toBe(204);
    expect((await send(owner.apiKey, 'GET', `/v1/crm/companies/${company.id}`)).statusCode).toBe(404);
    const dealTimeline = (await send(owner.apiKey, 'GET', `/v1/crm/activities?subject_id=${deal.id}`)).json() as { activities: Body[] };
    expect(dealTimeline.activities.map((a) => [a.verb, a.actor])).toEqual([['created', expect.stringMatching(/^api_key:/)], ['won', 'agent'], ['deleted', expect.stringMatching(/^api_key:/)]]);
    const companyTimeline = (await send(owner.apiKey, 'GET', `/v1/crm/activities?subject_id=${company.id}`)).json() as { activities: Body[] };
    expect(companyTimeline.activities.map((a) => [a.verb, a.fields])).toEqual([['created', []], ['updated', ['domain', 'industry']], ['deleted', []]]);
  });

  it('lists with paging, a text search over names, domains and e-mails, and filters', async () => {
    const org = await api.org('pro');
    const acme = await create(org.apiKey, 'companies', { name: 'Acme Rockets', domain: 'acme.example', industry: 'Aerospace' });
    await create(org.apiKey, 'companies', { name: 'Globex', domain: 'globex.example', industry: 'Energy' });
    await create(org.apiKey, 'companies', { name: 'Initech', domain: 'initech-100%.example', industry: 'Software' });
    await create(org.apiKey, 'contacts', { name: 'Wile E.', email: 'wile@acme.example', company_id: acme.id });
    await create(org.apiKey, 'contacts', { name: 'Road Runner', email: 'beep@desert.example' });
    const names = async (url: string) => ((await send(org.apiKey, 'GET', url)).json() as Record<string, Body[]>);
    expect((await names('/v1/crm/companies?q=ACME')).companies!.map((c) => c.name)).toEqual(['Acme Rockets']);
    expect((await names('/v1/crm/companies?q=globex.ex')).companies!.map((c) => c.name)).toEqual(['Globex']);
    expect((await names('/v1/crm/companies?q=100%25')).companies!.map((c) => c.name)).toEqual(['Initech']);
    expect((await names('/v1/crm/companies?q=%25')).companies!.map((c) => c.name)).toEqual(['Initech']);
    expect((await names('/v1/crm/companies?domain=ACME.example')).companies!.map((c) => c.name)).toEqual(['Acme Rockets']);
    expect((await names('/v1/crm/companies?industry=Energy')).companies!.map((c) => c.name)).toEqual(['Globex']);
    expect((await names('/v1/crm/contacts?q=beep@')).contacts!.map((c) => c.name)).toEqual(['Road Runner']);
    expect((await names(`/v1/crm/contacts?company_id=${acme.id}`)).contacts!.map((c) => c.name)).toEqual(['Wile E.']);
    const seen: string[] = [];
    let token = '';
    do {
      const page = (await send(org.apiKey, 'GET', `/v1/crm/companies?page_size=2${token ? `&page_token=${token}` : ''}`)).json() as { companies: Body[]; next_page_token: string };
      expect(page.companies.length).toBeLessThanOrEqual(2);
      seen.push(...page.companies.map((c) => c.name as string));
      token = page.next_page_token;
    } while (token);
    expect(seen.sort()).toEqual(['Acme Rockets', 'Globex', 'Initech']);
    const all = (await names('/v1/crm/companies')).companies!;
    expect(all.length).toBe(3);
    expect(all.map((c) => c.created_at as string)).toEqual(all.map((c) => c.created_at as string).sort().reverse());
    const bad = await send(org.apiKey, 'GET', '/v1/crm/companies?page_token=bm90LWEtdG9rZW4');
    expect([bad.statusCode, problem(bad).errors?.[0]?.field]).toEqual([400, 'page_token']);
  });

  it('makes a create with an Idempotency-Key once', async () => {
    const first = await send(owner.apiKey, 'POST', '/v1/crm/companies', { name: 'Once' }, { 'idempotency-key': 'crm-once' });
    const again = await send(owner.apiKey, 'POST', '/v1/crm/companies', { name: 'Once' }, { 'idempotency-key': 'crm-once' });
    expect([first.statusCode, again.statusCode, (again.json() as Body).id]).toEqual([201, 201, (first.json() as Body).id]);
    const changed = await send(owner.apiKey, 'POST', '/v1/crm/companies', { name: 'Twice' }, { 'idempotency-key': 'crm-once' });
    expect(problem(changed).code).toBe('IDEMPOTENCY_KEY_REUSED');
  });
});

describe('research tasks and agent roles', () => {
  it('moves a task through its statuses for its own role only, and lists the artifacts it produced', async () => {
    const company = await create(keys.researcher.key, 'companies', { name: 'Tasked' });
    const task = await create(keys.researcher.key, 'research-tasks', { subject_type: 'company', subject_id: company.id, role: 'outreach', title: 'Write to them', instructions: 'Be brief' });
    expect(task).toMatchObject({ id: expect.stringMatching(/^tsk_/), status: 'open', role: 'outreach' });
    const wrongSubject = await send(owner.apiKey, 'POST', '/v1/crm/research-tasks', { subject_type: 'contact', subject_id: company.id, role: 'enricher', title: 'x' });
    expect([wrongSubject.statusCode, problem(wrongSubject).errors?.[0]?.field]).toEqual([400, 'subject_id']);
    const notMine = await send(keys.enricher.key, 'PATCH', `/v1/crm/research-tasks/${task.id}`, { status: 'in_progress' });
    expect([notMine.statusCode, problem(notMine).code]).toEqual([403, 'FORBIDDEN']);
    expect((await send(keys.outreach.key, 'PATCH', `/v1/crm/research-tasks/${task.id}`, { status: 'in_progress' })).statusCode).toBe(200);
    const draft = await create(keys.outreach.key, 'artifacts', { subject_type: 'company', subject_id: company.id, task_id: task.id, kind: 'outreach_email', title: 'Hi' });
    const done = await send(keys.outreach.key, 'PATCH', `/v1/crm/research-tasks/${task.id}`, { status: 'done' });
    expect(done.statusCode).toBe(200);
    const reopen = await send(owner.apiKey, 'PATCH', `/v1/crm/research-tasks/${task.id}`, { status: 'open' });
    expect([reopen.statusCode, problem(reopen).code]).toEqual([409, 'INVALID_STATE']);
    const got = await send(keys.viewer.key, 'GET', `/v1/crm/research-tasks/${task.id}`);
    expect(got.json()).toMatchObject({ status: 'done', artifact_ids: [draft.id] });
    const verbs = (await send(owner.apiKey, 'GET', `/v1/crm/activities?record_id=${task.id}`)).json() as { activities: Body[] };
    expect(verbs.activities.map((a) => a.verb)).toEqual(['created', 'started', 'completed']);
  });

  it('enforces the documented operations of each agent role, and keeps agent keys off every other route', async () => {
    const company = await create(owner.apiKey, 'companies', { name: 'Roles' });
    const contact = await create(owner.apiKey, 'contacts', { name: 'Role Contact', company_id: company.id });
    const status = async (role: keyof typeof keys, method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: object) => (await send(keys[role].key, method, url, payload)).statusCode;
    expect(await status('enricher', 'POST', '/v1/crm/companies', { name: 'x' })).toBe(201);
    expect(await status('outreach', 'POST', '/v1/crm/companies', { name: 'x' })).toBe(403);
    expect(await status('enricher', 'PATCH', `/v1/crm/contacts/${contact.id}`, { title: 'CTO' })).toBe(200);
    expect(await status('outreach', 'PATCH', `/v1/crm/contacts/${contact.id}`, { title: 'CEO' })).toBe(403);
    expect(await status('enricher', 'POST', '/v1/crm/artifacts', { subject_type: 'contact', subject_id: contact.id, kind: 'note', title: 'x' })).toBe(403);
    expect(await status('researcher', 'POST', '/v1/crm/deals', { name: 'd', company_id: company.id })).toBe(403);
    expect(await status('researcher', 'DELETE', `/v1/crm/contacts/${contact.id}`)).toBe(403);
    expect(await status('outreach', 'PUT', '/v1/crm/context', { tone: 'loud' })).toBe(403);
    expect(await status('viewer', 'POST', '/v1/crm/companies', { name: 'x' })).toBe(403);
    for (const role of ['researcher', 'enricher', 'outreach'] as const) {
      expect([role, await status(role, 'GET', '/v1/crm/context'), await status(role, 'GET', `/v1/crm/contacts/${contact.id}`)]).toEqual([role, 200, 200]);
      expect([role, await status(role, 'GET', '/v1/projects'), await status(role, 'GET', `/v1/orgs/${owner.orgId}/api-keys`), await status(role, 'POST', '/v1/support-cases', { org_id: owner.orgId, title: 't', body: 'b' })]).toEqual([role, 403, 403, 403]);
    }
    const me = await send(keys.outreach.key, 'GET', '/v1/me');
    expect(me.json()).toMatchObject({ kind: 'org_api_key', org_id: owner.orgId, role: 'outreach' });
    const draft = await create(keys.researcher.key, 'artifacts', { subject_type: 'contact', subject_id: contact.id, kind: 'account_brief', title: 'Brief' });
    await send(owner.apiKey, 'POST', `/v1/crm/artifacts/${draft.id}/approve`);
    const researcherSends = await send(keys.researcher.key, 'POST', `/v1/crm/artifacts/${draft.id}/send`);
    expect([researcherSends.statusCode, problem(researcherSends).code]).toEqual([403, 'FORBIDDEN']);
  });
});

describe('CRM context', () => {
  it('is empty until set, keeps members a PUT leaves out, honours If-Match, and is per organization', async () => {
    const org = await api.org('pro');
    const empty = await send(org.apiKey, 'GET', '/v1/crm/context');
    expect(empty.json()).toEqual({ org_id: org.orgId, positioning: '', icp: '', tone: '', notes: '', updated_at: null });
    const set = await send(org.apiKey, 'PUT', '/v1/crm/context', { positioning: 'Postgres gateway', icp: 'Data teams' });
    expect([set.statusCode, set.headers.etag]).toEqual([200, '"0"']);
    const stale = await send(org.apiKey, 'PUT', '/v1/crm/context', { tone: 'plain' }, { 'if-match': '"5"' });
    expect(problem(stale).code).toBe('PRECONDITION_FAILED');
    const toned = await send(org.apiKey, 'PUT', '/v1/crm/context', { tone: 'plain' }, { 'if-match': '"0"' });
    expect(toned.json()).toMatchObject({ positioning: 'Postgres gateway', icp: 'Data teams', tone: 'plain', notes: '', updated_at: expect.any(String) });
    expect((await send(other.apiKey, 'GET', '/v1/crm/context')).json()).toMatchObject({ org_id: other.orgId, positioning: '' });
  });
});

describe('read models', () => {
  it('rebuild --verify reproduces the CRM records, contexts and the activity timeline', async () => {
    for (const projection of [crmRecordsProjection, crmContextsProjection, crmActivitiesProjection]) {
      const result = await rebuildAndVerify(api.store, api.pool, projection);
      expect({ name: result.name, identical: result.identical }).toEqual({ name: projection.name, identical: true });
      expect(Object.values(result.live).every((table) => table.rows > 0)).toBe(true);
    }
  });
});
