/**
 * Support cases through the real API over a real PostgreSQL: an organization's people on one side,
 * the deployment's operators (an operator token from PGWARD_OPERATOR_TOKENS) on the other; and
 * cancellation feedback.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newOperatorToken } from '../../src/auth/operators.js';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let other: { orgId: string; apiKey: string };
let viewerKey: string;
const alice = newOperatorToken('alice');
const unknownOperator = newOperatorToken('mallory');

beforeAll(async () => {
  api = await startApi('support_cases', { PGWARD_OPERATOR_TOKENS: `${alice.entry},${newOperatorToken('bob').entry}` });
  owner = await api.org('pro');
  other = await api.org('pro');
  const viewer = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'ro', role: 'viewer' } });
  viewerKey = (viewer.json() as { api_key: string }).api_key;
});
afterAll(async () => {
  await api?.stop();
});

const problem = (response: LightMyRequestResponse) => response.json() as { code: string; errors?: { field: string }[] };

interface Case {
  id: string;
  status: string;
  severity: number;
  message_count: number;
  awaiting: string;
  messages?: { side: string; author: string; body: string }[];
}

async function open(key = owner.apiKey, payload: Record<string, unknown> = {}): Promise<Case> {
  const response = await api.call(key, { method: 'POST', url: '/v1/support-cases', payload: { org_id: owner.orgId, title: 'Replica lag', body: 'Reads are stale since 09:00', ...payload } });
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as Case;
}

describe('support cases', () => {
  it('opens a case (severity 4 by default) and threads messages from both sides, the operator answering with an operator token', async () => {
    const created = await open();
    expect(created).toEqual({
      id: expect.stringMatching(/^sc_[a-z0-9]{26}$/), org_id: owner.orgId, title: 'Replica lag', body: 'Reads are stale since 09:00', severity: 4, status: 'open',
      opened_by: expect.stringMatching(/^api_key:key_/), message_count: 0, awaiting: 'operator', closed_by: null, closed_at: null, created_at: expect.any(String), updated_at: expect.any(String),
    });
    const answer = await api.call(alice.token, { method: 'POST', url: `/v1/operator/support-cases/${created.id}/messages`, payload: { body: 'Looking into it' } });
    expect(answer.statusCode, answer.body).toBe(201);
    expect(answer.json()).toMatchObject({ case_id: created.id, side: 'operator', author: 'operator:alice', body: 'Looking into it' });
    expect(answer.headers.etag).toBe('"1"');
    const reply = await api.call(owner.apiKey, { method: 'POST', url: `/v1/support-cases/${created.id}/messages`, headers: { 'if-match': '"1"' }, payload: { body: 'Thanks' } });
    expect(reply.statusCode, reply.body).toBe(201);
    const got = await api.call(viewerKey, { method: 'GET', url: `/v1/support-cases/${created.id}` });
    expect(got.statusCode).toBe(200);
    expect(got.headers.etag).toBe('"2"');
    expect(got.json()).toMatchObject({ message_count: 2, awaiting: 'operator', messages: [{ side: 'operator', author: 'operator:alice', body: 'Looking into it' }, { side: 'customer', body: 'Thanks' }] });
    const seen = await api.call(alice.token, { method: 'GET', url: `/v1/operator/support-cases/${created.id}` });
    expect(seen.json()).toEqual(got.json());
    const rows = await api.pool.query('select side, author, body from rm.support_messages where case_id = $1 order by seq', [created.id]);
    expect(rows.rows).toEqual([{ side: 'operator', author: 'operator:alice', body: 'Looking into it' }, { side: 'customer', author: expect.stringMatching(/^api_key:/), body: 'Thanks' }]);
  });

  it('closes a case once: closing again, or writing to it, is 409 INVALID_STATE from either side, and nothing is appended', async () => {
    const created = await open();
    const stale = await api.call(owner.apiKey, { method: 'POST', url: `/v1/support-cases/${created.id}/close`, headers: { 'if-match': '"5"' } });
    expect([stale.statusCode, problem(stale).code]).toEqual([412, 'PRECONDITION_FAILED']);
    const closed = await api.call(owner.apiKey, { method: 'POST', url: `/v1/support-cases/${created.id}/close`, headers: { 'if-match': '"0"' } });
    expect(closed.statusCode, closed.body).toBe(200);
    expect(closed.json()).toMatchObject({ status: 'closed', awaiting: 'nobody', closed_by: expect.stringMatching(/^api_key:/), closed_at: expect.any(String) });
    expect(closed.headers.etag).toBe('"1"');
    for (const [key, url] of [
      [owner.apiKey, `/v1/support-cases/${created.id}/close`],
      [alice.token, `/v1/operator/support-cases/${created.id}/close`],
    ] as const) {
      const again = await api.call(key, { method: 'POST', url });
      expect([again.statusCode, problem(again).code]).toEqual([409, 'INVALID_STATE']);
    }
    for (const [key, url] of [
      [owner.apiKey, `/v1/support-cases/${created.id}/messages`],
      [alice.token, `/v1/operator/support-cases/${created.id}/messages`],
    ] as const) {
      const late = await api.call(key, { method: 'POST', url, payload: { body: 'one more thing' } });
      expect([late.statusCode, problem(late).code]).toEqual([409, 'INVALID_STATE']);
    }
    expect((await api.store.readStream(`supportcase-${created.id}`)).map((e) => e.type)).toEqual(['SupportCaseOpened.v1', 'SupportCaseClosed.v1']);
  });

  it('refuses bad input with INVALID_INPUT naming the field, and creates nothing', async () => {
    const before = await api.pool.query('select count(*)::int as n from rm.support_cases');
    const cases: [Record<string, unknown>, string][] = [
      [{ title: '' }, 'title'],
      [{ title: 't'.repeat(501) }, 'title'],
      [{ body: '' }, 'body'],
      [{ body: 'b'.repeat(50_001) }, 'body'],
      [{ severity: 0 }, 'severity'],
      [{ severity: 5 }, 'severity'],
      [{ severity: 2.5 }, 'severity'],
      [{ title: 'nul\u0000' }, 'title'],
      [{ priority: 1 }, '(body)'],
    ];
    for (const [payload, field] of cases) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: '/v1/support-cases', payload: { org_id: owner.orgId, title: 'T', body: 'B', ...payload } });
      expect([response.statusCode, problem(response).code], JSON.stringify(payload)).toEqual([400, 'INVALID_INPUT']);
      expect(problem(response).errors?.map((e) => e.field)).toContain(field);
    }
    const missing = await api.call(owner.apiKey, { method: 'POST', url: '/v1/support-cases', payload: { title: 'T', body: 'B' } });
    expect(problem(missing).errors?.map((e) => e.field)).toEqual(['org_id']);
    const created = await open();
    const longMessage = await api.call(owner.apiKey, { method: 'POST', url: `/v1/support-cases/${created.id}/messages`, payload: { body: 'm'.repeat(50_001) } });
    expect([longMessage.statusCode, problem(longMessage).errors?.[0]?.field]).toEqual([400, 'body']);
    const badFilter = await api.call(owner.apiKey, { method: 'GET', url: '/v1/support-cases?severity=9' });
    expect([badFilter.statusCode, problem(badFilter).errors?.[0]?.field]).toEqual([400, 'severity']);
    const after = await api.pool.query('select count(*)::int as n from rm.support_cases');
    expect(after.rows[0].n).toBe(before.rows[0].n + 1);
    expect(await open(owner.apiKey, { title: 't'.repeat(500), body: 'b'.repeat(50_000), severity: 1 })).toMatchObject({ severity: 1 });
  });

  it('answers another organization’s case, or org_id, with 404 exactly as a nonexistent one', async () => {
    const mine = await open();
    const missing = 'sc_' + 'a'.repeat(26);
    for (const url of [`/v1/support-cases/${mine.id}`, `/v1/support-cases/${missing}`]) {
      const response = await api.call(other.apiKey, { method: 'GET', url });
      expect([response.statusCode, problem(response).code]).toEqual([404, 'NOT_FOUND']);
    }
    for (const suffix of ['messages', 'close']) {
      const response = await api.call(other.apiKey, { method: 'POST', url: `/v1/support-cases/${mine.id}/${suffix}`, ...(suffix === 'messages' ? { payload: { body: 'hi' } } : {}) });
      expect([response.statusCode, problem(response).code]).toEqual([404, 'NOT_FOUND']);
    }
    const foreign = await api.call(other.apiKey, { method: 'POST', url: '/v1/support-cases', payload: { org_id: owner.orgId, title: 'T', body: 'B' } });
    expect([foreign.statusCode, problem(foreign).code]).toEqual([404, 'NOT_FOUND']);
    const listed = await api.call(other.apiKey, { method: 'GET', url: `/v1/support-cases?org_id=${owner.orgId}` });
    expect(listed.statusCode).toBe(404);
    expect((await api.call(other.apiKey, { method: 'GET', url: '/v1/support-cases' })).json()).toEqual({ cases: [], next_page_token: '' });
  });

  it('lists with paging and status/severity filters; operators see every organization’s, filtered by org_id', async () => {
    const theirs = await open(other.apiKey, { org_id: other.orgId, severity: 1 });
    const critical = await open(owner.apiKey, { severity: 1 });
    const ids = async (key: string, url: string) => {
      const out: string[] = [];
      for (let token = ''; ; ) {
        const page = (await api.call(key, { method: 'GET', url: `${url}${url.includes('?') ? '&' : '?'}page_size=2${token ? `&page_token=${token}` : ''}` })).json() as { cases: Case[]; next_page_token: string };
        out.push(...page.cases.map((c) => c.id));
        if (!page.next_page_token) return out;
        token = page.next_page_token;
      }
    };
    const all = await api.pool.query<{ case_id: string; org_id: string; severity: number; status: string }>('select case_id, org_id, severity, status from rm.support_cases order by created_at desc, case_id desc');
    const expected = (where: (row: (typeof all.rows)[number]) => boolean) => all.rows.filter(where).map((row) => row.case_id);
    expect(await ids(owner.apiKey, '/v1/support-cases')).toEqual(expected((row) => row.org_id === owner.orgId));
    expect(await ids(owner.apiKey, '/v1/support-cases?severity=1')).toEqual(expected((row) => row.org_id === owner.orgId && row.severity === 1));
    expect(await ids(owner.apiKey, '/v1/support-cases?status=closed')).toEqual(expected((row) => row.org_id === owner.orgId && row.status === 'closed'));
    expect(await ids(alice.token, '/v1/operator/support-cases?severity=1&status=open')).toEqual(expected((row) => row.severity === 1 && row.status === 'open'));
    expect(await ids(alice.token, `/v1/operator/support-cases?org_id=${other.orgId}`)).toEqual([theirs.id]);
    expect((await ids(owner.apiKey, '/v1/support-cases?severity=1'))[0]).toBe(critical.id);
    const forged = await api.call(owner.apiKey, { method: 'GET', url: `/v1/support-cases?page_token=${Buffer.from(JSON.stringify({ k: 'yesterday sc_1' })).toString('base64url')}` });
    expect([forged.statusCode, problem(forged).errors?.[0]?.field]).toEqual([400, 'page_token']);
  });

  it('makes one case of a retried create with one Idempotency-Key; another body with that key is 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const send = (title: string) => api.call(owner.apiKey, { method: 'POST', url: '/v1/support-cases', headers: { 'idempotency-key': 'case-1' }, payload: { org_id: owner.orgId, title, body: 'B' } });
    const first = await send('Once');
    const retry = await send('Once');
    expect([first.statusCode, retry.statusCode]).toEqual([201, 201]);
    expect(retry.json()).toEqual(first.json());
    const count = await api.pool.query(`select count(*)::int as n from rm.support_cases where title = 'Once'`);
    expect(count.rows[0].n).toBe(1);
    const reused = await send('Twice');
    expect([reused.statusCode, problem(reused).code]).toEqual([409, 'IDEMPOTENCY_KEY_REUSED']);
    const id = (first.json() as Case).id;
    const message = () => api.call(alice.token, { method: 'POST', url: `/v1/operator/support-cases/${id}/messages`, headers: { 'idempotency-key': 'm-1' }, payload: { body: 'once' } });
    const [m1, m2] = [await message(), await message()];
    expect(m2.json()).toEqual(m1.json());
    expect((await api.store.readStream(`supportcase-${id}`)).length).toBe(2);
  });

  it('keeps the sides apart: operator routes refuse organization keys (403), organization routes refuse operator tokens (403), an unknown operator token is 401', async () => {
    const created = await open();
    for (const url of ['/v1/operator/support-cases', `/v1/operator/support-cases/${created.id}`, '/v1/operator/billing-health']) {
      const response = await api.call(owner.apiKey, { method: 'GET', url });
      expect([response.statusCode, problem(response).code], url).toEqual([403, 'FORBIDDEN']);
    }
    const asOperator = await api.call(alice.token, { method: 'GET', url: '/v1/support-cases' });
    expect([asOperator.statusCode, problem(asOperator).code]).toEqual([403, 'FORBIDDEN']);
    const openAsOperator = await api.call(alice.token, { method: 'POST', url: '/v1/support-cases', payload: { org_id: owner.orgId, title: 'T', body: 'B' } });
    expect(openAsOperator.statusCode).toBe(403);
    const mcp = await api.call(alice.token, { method: 'POST', url: '/v1/mcp', headers: { accept: 'application/json, text/event-stream' }, payload: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect([mcp.statusCode, problem(mcp).code]).toEqual([403, 'FORBIDDEN']);
    const unknown = await api.call(unknownOperator.token, { method: 'GET', url: '/v1/operator/support-cases' });
    expect([unknown.statusCode, problem(unknown).code]).toEqual([401, 'UNAUTHORIZED']);
    const viewerWrites = await api.call(viewerKey, { method: 'POST', url: `/v1/support-cases/${created.id}/messages`, payload: { body: 'hi' } });
    expect([viewerWrites.statusCode, problem(viewerWrites).code]).toEqual([403, 'FORBIDDEN']);
  });
});

describe('cancellation feedback', () => {
  it('records feedback per organization (reason and text both optional), lists it, refuses an unknown reason and another organization', async () => {
    const url = `/v1/orgs/${owner.orgId}/cancellation-feedback`;
    const first = await api.call(owner.apiKey, { method: 'POST', url, payload: { reason: 'too_expensive', feedback: 'We only use it monthly' } });
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json()).toEqual({ id: expect.stringMatching(/^cfb_/), org_id: owner.orgId, reason: 'too_expensive', feedback: 'We only use it monthly', recorded_by: expect.stringMatching(/^api_key:/), created_at: expect.any(String) });
    const empty = await api.call(owner.apiKey, { method: 'POST', url });
    expect(empty.json()).toMatchObject({ reason: null, feedback: '' });
    const bad = await api.call(owner.apiKey, { method: 'POST', url, payload: { reason: 'bored' } });
    expect([bad.statusCode, problem(bad).errors?.[0]?.field]).toEqual([400, 'reason']);
    const tooLong = await api.call(owner.apiKey, { method: 'POST', url, payload: { feedback: 'x'.repeat(5_001) } });
    expect([tooLong.statusCode, problem(tooLong).errors?.[0]?.field]).toEqual([400, 'feedback']);
    const listed = (await api.call(owner.apiKey, { method: 'GET', url })).json() as { feedback: { id: string }[] };
    expect(listed.feedback.map((f) => f.id).sort()).toEqual([(first.json() as { id: string }).id, (empty.json() as { id: string }).id].sort());
    for (const method of ['GET', 'POST'] as const) {
      const foreign = await api.call(other.apiKey, { method, url });
      expect([foreign.statusCode, problem(foreign).code]).toEqual([404, 'NOT_FOUND']);
    }
    expect((await api.call(viewerKey, { method: 'POST', url, payload: { reason: 'unused' } })).statusCode).toBe(403);
    const retried = () => api.call(owner.apiKey, { method: 'POST', url, headers: { 'idempotency-key': 'fb-1' }, payload: { reason: 'unused' } });
    expect((await retried()).json()).toEqual((await retried()).json());
    expect(((await api.call(owner.apiKey, { method: 'GET', url })).json() as { feedback: unknown[] }).feedback).toHaveLength(3);
  });
});
