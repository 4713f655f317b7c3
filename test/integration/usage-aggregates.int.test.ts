/**
 * DailyUsage and BillingHealthSummary through the real API over a real PostgreSQL, from a known
 * set of decisions appended as ingest appends them; and the operations found by the management
 * MCP's search_endpoints through the official SDK client.
 */
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditStream } from '../../projections/audit.js';
import { connectionStream } from '../../projections/connections.js';
import { WireSessionClosed, WireSessionOpened } from '../../src/events/connections.js';
import { DAY_MS } from '../../projections/audit-usage.js';
import { projectionsFor } from '../../projections/index.js';
import { awaitApplied } from '../../projections/maintenance.js';
import { newOperatorToken } from '../../src/auth/operators.js';
import { StatementDecided, type AuditEventKind, type AuditSource, type CacheStatus } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { startApi, type TestApi } from '../support/api.js';
import { placed } from '../support/decisions.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let other: { orgId: string; apiKey: string };
let scale: { orgId: string; apiKey: string };
const operator = newOperatorToken('ops');
const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
const day = (offset: number) => new Date(today + offset * DAY_MS).toISOString().slice(0, 10);
const at = (offset: number, time: string) => `${day(offset)}T${time}Z`;
let seq = 0;

interface Decision {
  ts: string;
  session: string;
  source?: AuditSource;
  event?: AuditEventKind;
  cache: CacheStatus;
  bytes: number;
}

/** Appends the decisions to the project's audit stream as ingest would, and waits until every read model applied them. */
async function decide(projectId: string, decisions: Decision[]): Promise<void> {
  const events = decisions.map((d) => {
    const source = d.source ?? 'wire';
    const proxied = source === 'wire' || source === 'mcp';
    const decision = placed({
      event: d.event ?? 'query', project_id: projectId, credential_id: null, session_id: d.session, source, region: 'local', client_ip: proxied ? '127.0.0.1' : '', ts: d.ts,
      sql: 'select 1', normalized_sql: 'select $1', query_hash: 'ab'.repeat(8), statement_kind: 'select', decision_rule: '', reason: '', cache_status: d.cache,
      rows_returned: '1', bytes_out: String(d.bytes), latency_us: 100, tables_read: [], tables_written: [], tables_blocked: [], parsed: true,
      proxy_id: proxied ? 'usage-test' : null, boot_epoch: proxied ? 1 : null, seq: proxied ? String(++seq) : null, approval_id: null,
    });
    return encodeEvent(StatementDecided, decision, { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: d.ts });
  });
  const appended = await api.store.append(auditStream(projectId), events, 'any');
  expect(await awaitApplied(api.pool, projectionsFor({ auditKeys: { keys: new Map() } }), auditStream(projectId), appended.position, 10_000)).toBe(true);
}

/** Records wire sessions' connections as ingest appends the proxy's session marks, and waits until the read models applied them. */
async function connect(projectId: string, marks: { session: string; opened?: string; closed?: string }[]): Promise<void> {
  const meta = (at: string) => ({ event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at });
  const events = marks.flatMap((m) => [
    ...(m.opened ? [encodeEvent(WireSessionOpened, { project_id: projectId, session_id: m.session, credential_id: `agt_${'b'.repeat(26)}`, at: m.opened }, meta(m.opened))] : []),
    ...(m.closed ? [encodeEvent(WireSessionClosed, { project_id: projectId, session_id: m.session, at: m.closed }, meta(m.closed))] : []),
  ]);
  const appended = await api.store.append(connectionStream(projectId), events, 'any');
  expect(await awaitApplied(api.pool, projectionsFor({ auditKeys: { keys: new Map() } }), connectionStream(projectId), appended.position, 10_000)).toBe(true);
}

const problem = (response: LightMyRequestResponse) => response.json() as { code: string; errors?: { field: string }[] };

beforeAll(async () => {
  api = await startApi('usage_aggregates', { PGWARD_OPERATOR_TOKENS: operator.entry });
  owner = await api.org('pro');
  other = await api.org('pro');
  scale = await api.org('scale');
  const [a, b, c] = [await api.project(owner, 'a'), await api.project(owner, 'b'), await api.project(other, 'c')];
  await decide(a, [
    { ts: at(-3, '12:00:00.000'), session: 'usage-test:1.3', cache: 'miss', bytes: 5000 },
    { ts: at(-1, '10:00:00.000'), session: 'usage-test:1.1', cache: 'hit', bytes: 100 },
    { ts: at(-1, '10:00:30.500'), session: 'usage-test:1.1', cache: 'miss', bytes: 200 },
    { ts: at(-1, '23:59:00.000'), session: 'usage-test:1.2', cache: 'stale', bytes: 50 },
    { ts: at(0, '00:01:00.000'), session: 'usage-test:1.2', cache: 'miss', bytes: 25 },
    { ts: at(-1, '12:00:00.000'), session: 'mcp:1', source: 'mcp', cache: 'bypass', bytes: 1000 },
    { ts: at(-1, '12:10:00.000'), session: 'mcp:1', source: 'mcp', cache: 'bypass', bytes: 1000 },
    { ts: at(-1, '13:00:00.000'), session: '', source: 'control', event: 'blocked', cache: 'none', bytes: 0 },
  ]);
  await decide(b, [
    { ts: at(0, '00:00:00.000'), session: 'usage-test:2.1', cache: 'hit', bytes: 7 },
    { ts: at(0, '00:00:02.250'), session: 'usage-test:2.1', event: 'masked', cache: 'hit', bytes: 3 },
  ]);
  await decide(c, [{ ts: at(0, '00:00:01.000'), session: 'usage-test:3.1', cache: 'hit', bytes: 999_999 }]);
  await connect(a, [
    // Connected 30 s before its first statement, disconnected 89.5 s after its last: 150 s.
    { session: 'usage-test:1.1', opened: at(-1, '09:59:30.000'), closed: at(-1, '10:02:00.000') },
    // A session with no statement at all.
    { session: 'usage-test:1.4', opened: at(-2, '08:00:00.000'), closed: at(-2, '08:00:12.500') },
  ]);
  // Not closed (yet): it counts to its last decision, from its connection.
  await connect(b, [{ session: 'usage-test:2.1', opened: at(-1, '23:59:58.000') }]);
});
afterAll(async () => {
  await api?.stop();
});

describe('daily usage', () => {
  it('totals bytes, cache hits and misses and wire connection seconds (connect to disconnect, else first to last decision) per UTC day across the organization’s projects, and no other organization’s', async () => {
    const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/orgs/${owner.orgId}/usage/daily?days=4` });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({
      org_id: owner.orgId,
      days: [
        // Session 1.3 has one decision and no recorded connection: 0 s.
        { date: day(-3), bytes_transferred: 5000, cache_hits: 0, cache_misses: 1, connection_seconds: 0 },
        // Session 1.4 connected for 12.5 s without a statement.
        { date: day(-2), bytes_transferred: 0, cache_hits: 0, cache_misses: 0, connection_seconds: 12.5 },
        // Session 1.1's 150 s connection, 1.2's minute before midnight (decisions only) and 2.1's 2 s before midnight; the MCP and control entries move bytes but hold no wire connection.
        { date: day(-1), bytes_transferred: 2350, cache_hits: 2, cache_misses: 1, connection_seconds: 212 },
        // 1.2's minute after midnight and 2.25 s of session 2.1 in the other project.
        { date: day(0), bytes_transferred: 35, cache_hits: 2, cache_misses: 1, connection_seconds: 62.25 },
      ],
    });
    const defaults = (await api.call(owner.apiKey, { method: 'GET', url: `/v1/orgs/${owner.orgId}/usage/daily` })).json() as { days: { date: string }[] };
    expect(defaults.days.map((d) => d.date)).toEqual(Array.from({ length: 30 }, (_, i) => day(i - 29)));
    const theirs = (await api.call(other.apiKey, { method: 'GET', url: `/v1/orgs/${other.orgId}/usage/daily?days=1` })).json();
    expect(theirs).toEqual({ org_id: other.orgId, days: [{ date: day(0), bytes_transferred: 999_999, cache_hits: 1, cache_misses: 0, connection_seconds: 0 }] });
  });

  it('refuses a window outside 1-92 days naming days, and another organization with 404', async () => {
    for (const days of ['0', '93', 'x', '1.5']) {
      const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/orgs/${owner.orgId}/usage/daily?days=${days}` });
      expect([response.statusCode, problem(response).errors?.[0]?.field], days).toEqual([400, 'days']);
    }
    expect((await api.call(owner.apiKey, { method: 'GET', url: `/v1/orgs/${owner.orgId}/usage/daily?days=92` })).statusCode).toBe(200);
    const foreign = await api.call(other.apiKey, { method: 'GET', url: `/v1/orgs/${owner.orgId}/usage/daily` });
    expect([foreign.statusCode, problem(foreign).code]).toEqual([404, 'NOT_FOUND']);
  });

  it('gives operators any organization’s daily usage, the same figures; an unknown organization is 404 and an organization key 403', async () => {
    const own = (await api.call(owner.apiKey, { method: 'GET', url: `/v1/orgs/${owner.orgId}/usage/daily?days=4` })).json();
    const seen = await api.call(operator.token, { method: 'GET', url: `/v1/operator/orgs/${owner.orgId}/usage/daily?days=4` });
    expect(seen.statusCode).toBe(200);
    expect(seen.json()).toEqual(own);
    const missing = await api.call(operator.token, { method: 'GET', url: `/v1/operator/orgs/org_${'a'.repeat(26)}/usage/daily` });
    expect([missing.statusCode, problem(missing).code]).toEqual([404, 'NOT_FOUND']);
    const asOwner = await api.call(owner.apiKey, { method: 'GET', url: `/v1/operator/orgs/${owner.orgId}/usage/daily` });
    expect([asOwner.statusCode, problem(asOwner).code]).toEqual([403, 'FORBIDDEN']);
  });
});

describe('billing health', () => {
  it('counts organizations by plan, billing provider and subscription status, as operators record them with If-Match', async () => {
    const health = async () => (await api.call(operator.token, { method: 'GET', url: '/v1/operator/billing-health' })).json() as unknown;
    expect(await health()).toEqual({ entries: [{ plan: 'pro', billing_provider: 'none', subscription_status: 'none', org_count: 2 }, { plan: 'scale', billing_provider: 'none', subscription_status: 'none', org_count: 1 }] });
    const billing = `/v1/operator/orgs/${owner.orgId}/billing`;
    const got = await api.call(operator.token, { method: 'GET', url: billing });
    expect(got.json()).toMatchObject({ org_id: owner.orgId, plan: 'pro', billing_provider: 'none', subscription_status: 'none' });
    const tag = got.headers.etag as string;
    expect(tag).toMatch(/^"\d+"$/);
    const set = await api.call(operator.token, { method: 'PATCH', url: billing, headers: { 'if-match': tag }, payload: { billing_provider: 'stripe', subscription_status: 'active' } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ billing_provider: 'stripe', subscription_status: 'active' });
    expect(set.headers.etag).not.toBe(tag);
    const stale = await api.call(operator.token, { method: 'PATCH', url: billing, headers: { 'if-match': tag }, payload: { subscription_status: 'past_due' } });
    expect([stale.statusCode, problem(stale).code]).toEqual([412, 'PRECONDITION_FAILED']);
    await api.call(operator.token, { method: 'PATCH', url: `/v1/operator/orgs/${other.orgId}/billing`, payload: { billing_provider: 'stripe' } });
    await api.call(operator.token, { method: 'PATCH', url: `/v1/operator/orgs/${other.orgId}/billing`, payload: { subscription_status: 'past_due' } });
    expect(await health()).toEqual({
      entries: [
        { plan: 'pro', billing_provider: 'stripe', subscription_status: 'active', org_count: 1 },
        { plan: 'pro', billing_provider: 'stripe', subscription_status: 'past_due', org_count: 1 },
        { plan: 'scale', billing_provider: 'none', subscription_status: 'none', org_count: 1 },
      ],
    });
    expect((await api.store.readStream(`org-${other.orgId}`)).filter((e) => e.type === 'OrganizationBillingChanged.v1')).toHaveLength(2);
  });

  it('refuses bad billing input naming the field, an unknown organization with 404, and organization keys with 403', async () => {
    const billing = `/v1/operator/orgs/${scale.orgId}/billing`;
    for (const [payload, field] of [
      [{ subscription_status: 'overdue' }, 'subscription_status'],
      [{ billing_provider: 'Stripe Inc' }, 'billing_provider'],
      [{}, '(body)'],
      [{ plan: 'free' }, '(body)'],
    ] as const) {
      const response = await api.call(operator.token, { method: 'PATCH', url: billing, payload });
      expect([response.statusCode, problem(response).errors?.map((e) => e.field)], JSON.stringify(payload)).toEqual([400, expect.arrayContaining([field])]);
    }
    const missing = await api.call(operator.token, { method: 'PATCH', url: `/v1/operator/orgs/org_${'a'.repeat(26)}/billing`, payload: { subscription_status: 'active' } });
    expect([missing.statusCode, problem(missing).code]).toEqual([404, 'NOT_FOUND']);
    expect((await api.call(operator.token, { method: 'GET', url: `/v1/operator/orgs/org_${'a'.repeat(26)}/billing` })).statusCode).toBe(404);
    const asOwner = await api.call(scale.apiKey, { method: 'PATCH', url: billing, payload: { subscription_status: 'active' } });
    expect([asOwner.statusCode, problem(asOwner).code]).toEqual([403, 'FORBIDDEN']);
    expect((await api.store.readStream(`org-${scale.orgId}`)).filter((e) => e.type === 'OrganizationBillingChanged.v1')).toHaveLength(0);
  });
});

describe('the management MCP', () => {
  it('lists every new operation in /v1/openapi.json with its operation id, and search_endpoints finds them', async () => {
    const ids = [
      'createSupportCase', 'listSupportCases', 'getSupportCase', 'createSupportMessage', 'closeSupportCase',
      'listOperatorSupportCases', 'getOperatorSupportCase', 'createOperatorSupportMessage', 'closeOperatorSupportCase',
      'createCancellationFeedback', 'listCancellationFeedback', 'getDailyUsage', 'getOperatorDailyUsage', 'getBillingHealthSummary', 'getOrganizationBilling', 'updateOrganizationBilling',
    ];
    const openapi = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId?: string }>> };
    const documented = Object.values(openapi.paths).flatMap((methods) => Object.values(methods).map((op) => op.operationId));
    expect(documented).toEqual(expect.arrayContaining(ids));
    await api.app.listen({ port: 0, host: '127.0.0.1' });
    const address = api.app.server.address();
    if (!address || typeof address === 'string') throw new Error('not listening');
    const client = new Client({ name: 'pgward-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${address.port}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${owner.apiKey}` } } }));
    try {
      const search = async (query: string) => {
        const result = (await client.callTool({ name: 'search_endpoints', arguments: { query, limit: 5 } })) as CallToolResult;
        return (result.structuredContent as { endpoints: { operation_id: string }[] }).endpoints.map((e) => e.operation_id);
      };
      expect(await search('open a support case')).toContain('createSupportCase');
      expect(await search('daily usage bytes transferred cache hits')).toContain('getDailyUsage');
      expect(await search('billing health summary')).toContain('getBillingHealthSummary');
      expect(await search('cancellation feedback')).toContain('createCancellationFeedback');
    } finally {
      await client.close();
    }
  });
});
