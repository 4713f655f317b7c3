/**
 * Policy replay (POST /v1/projects/{id}/policies/{policy_id}/replay) over a trail recorded by real
 * traffic: node-postgres (simple and extended protocol) and the hosted MCP `query` tool under
 * policy A, replayed under policy B. The replay equals a naive re-decision of each recorded
 * statement through the what-if endpoint; pages add up to one call; a credential filter; strict
 * validation; 404 for another project's policy; nothing recorded.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changed } from '../../proxy/policy/replay.js';
import { startIngest } from '../../src/ingest/ingest.js';
import type { AgentSecrets } from '../support/gateway.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let ingest: Awaited<ReturnType<typeof startIngest>>;
let base: string;
let wireAgent: AgentSecrets;
let mcpAgent: AgentSecrets;
let candidateId: string;
let start: string;
let end: string;

const POLICY_A = { name: 'A', read_only: true, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'partial' }, max_rows: 500 };
const POLICY_B = { name: 'B', read_only: false, allowed_tables: ['public.orders'], statement_deny: ['delete'], max_rows: 5 };

/** Statements sent on the wire (simple protocol unless params are given) under A. */
const WIRE: { sql: string; params?: unknown[] }[] = [
  { sql: 'SELECT id FROM orders WHERE id = 1' },
  { sql: 'SELECT id FROM orders WHERE id = $1', params: [2] },
  { sql: 'SELECT email FROM customers WHERE id = 1' },
  { sql: 'SELECT count(*) FROM customers' },
  { sql: 'DELETE FROM orders WHERE id = -1' },
  { sql: 'UPDATE orders SET total = total WHERE id = -1' },
  { sql: 'SELECT passwd FROM pg_shadow' },
  { sql: 'SELECT id FROM orders ORDER BY id' },
  { sql: 'SELECT o.id, c.email FROM orders o JOIN customers c ON c.id = o.id WHERE o.id < 3' },
  { sql: 'SELECT 1' },
  // Kept abridged by the trail (over its 4,096 characters): not replayed.
  { sql: `/* ${'x'.repeat(4_100)} */ SELECT id FROM orders WHERE id = 4` },
];
const MCP = ['SELECT id FROM orders WHERE id = 3', 'SELECT email FROM customers WHERE id = 2', 'DELETE FROM orders WHERE id = -2'];

type Outcome = { event: string; decision_rule: string };
type Group = { old: Outcome; new: Outcome; changed: boolean; count: number; examples: { seq: number; credential_id: string; sql: string; source: string }[] };
type Replay = { total: number; done: number; scanned: number; changed: number; unchanged: number; skipped: Record<string, number>; groups: Group[]; next_cursor: string | null; policy_version: number };

const project = (path: string, projectId = gateway.projectId) => `/v1/projects/${projectId}${path}`;

async function replay(payload: Record<string, unknown>, policyId = candidateId, key = gateway.owner.apiKey): Promise<{ statusCode: number; body: Record<string, unknown> }> {
  const response = await gateway.api.call(key, { method: 'POST', url: project(`/policies/${policyId}/replay`), payload });
  return { statusCode: response.statusCode, body: response.json() as Record<string, unknown> };
}

async function replayed(payload: Record<string, unknown>): Promise<Replay> {
  const answer = await replay(payload);
  expect(answer.statusCode, JSON.stringify(answer.body)).toBe(200);
  return answer.body as unknown as Replay;
}

type Entry = { seq: string; event: string; decision_rule: string; sql: string; source: string; credential_id: string };

/** The window's entries of the project, oldest first, through the audit listing. */
async function trail(): Promise<Entry[]> {
  const entries: Entry[] = [];
  let token = '';
  do {
    const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: project(`/audit?page_size=100&start=${encodeURIComponent(start)}&end=${encodeURIComponent(end)}${token ? `&page_token=${token}` : ''}`) });
    const page = response.json() as { entries: Entry[]; next_page_token: string };
    entries.push(...page.entries);
    token = page.next_page_token;
  } while (token);
  return entries.reverse();
}

const key = (old: Outcome, candidate: Outcome) => JSON.stringify([old.event, old.decision_rule, candidate.event, candidate.decision_rule]);
const countsOf = (groups: readonly Group[]) => {
  const counts = new Map<string, number>();
  for (const group of groups) counts.set(key(group.old, group.new), (counts.get(key(group.old, group.new)) ?? 0) + group.count);
  return Object.fromEntries([...counts].sort());
};

beforeAll(async () => {
  gateway = await startGateway('policy_replay');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  base = await listenForAgents(gateway);
  start = new Date(Date.now() - 1_000).toISOString();
  wireAgent = await registerAgentWith(gateway, POLICY_A);
  mcpAgent = await registerAgentWith(gateway, { ...POLICY_A, name: 'A (mcp)' });
  const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: project('/policies'), payload: POLICY_B });
  candidateId = (created.json() as { id: string }).id;
  const client = new pg.Client({ connectionString: wireAgent.connection_string });
  await client.connect();
  for (const { sql, params } of WIRE) await client.query(sql, params).catch(() => undefined);
  await client.end();
  await withAgentMcp(`${base}/mcp`, mcpAgent, async (mcp) => {
    for (const sql of MCP) await callTool(mcp, 'query', { sql });
  });
  end = new Date(Date.now() + 60_000).toISOString();
  await waitFor(async () => (await trail()).filter((entry) => entry.credential_id === wireAgent.credential.id || entry.credential_id === mcpAgent.credential.id).length >= WIRE.length + MCP.length, 15_000, 'the trail of both agents');
}, 120_000);
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

describe('a replay of the recorded trail under policy B', () => {
  it('equals a naive re-decision of each recorded statement through the what-if endpoint', async () => {
    const whole = await replayed({ start, end, limit: 5_000 });
    const recorded = (await trail()).filter((entry) => ['wire', 'mcp'].includes(entry.source) && ['query', 'masked', 'truncated', 'blocked', 'canary_tripped'].includes(entry.event));
    expect(recorded.length).toBeGreaterThanOrEqual(WIRE.length + MCP.length);
    const statements = recorded.filter((entry) => !entry.sql.includes('/* pgward: '));
    expect(recorded.length - statements.length).toBe(1);
    const naive: Group[] = [];
    for (const entry of statements) {
      const protocol = entry.source === 'mcp' ? 'extended' : 'simple';
      const answer = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: project('/policies/evaluate'), payload: { policy_id: candidateId, sql: entry.sql, protocol } });
      const decided = answer.json() as Outcome;
      const old = { event: entry.event, decision_rule: entry.decision_rule };
      const candidate = { event: decided.event, decision_rule: decided.decision_rule };
      naive.push({ old, new: candidate, changed: changed(old, candidate), count: 1, examples: [] });
    }
    expect(countsOf(whole.groups)).toEqual(countsOf(naive));
    expect(whole).toMatchObject({ total: recorded.length, done: recorded.length, scanned: recorded.length, next_cursor: null, changed: naive.filter((g) => g.changed).length });
    expect(whole.unchanged).toBe(naive.filter((g) => !g.changed).length);
    expect(whole.skipped).toEqual({ budget: 0, upstream: 0, abridged: 1, credential: 0 });
  });

  it('groups by old and new rule, with examples as the trail keeps them', async () => {
    const { groups } = await replayed({ start, end });
    const find = (oldRule: string, newRule: string, event?: string) => groups.find((g) => g.old.decision_rule === oldRule && g.new.decision_rule === newRule && (event === undefined || g.old.event === event));
    // Under A a masked read of customers; under B the table is off the list.
    expect(find('masked_columns.masked', 'allowed_tables.not_allowed')).toMatchObject({ changed: true, new: { event: 'blocked' } });
    // Under A a DELETE is a write of a read-only policy; under B deletes are denied: still refused, for another rule.
    const deletes = find('read_only.write', 'statement_kind.denied')!;
    expect(deletes).toMatchObject({ changed: true, count: 2 });
    expect(deletes.examples.map((e) => [e.source, e.sql]).sort()).toEqual([['mcp', 'DELETE FROM orders WHERE id = -2'], ['wire', 'DELETE FROM orders WHERE id = -1']]);
    // An UPDATE refused under A runs under B.
    expect(find('read_only.write', '')).toMatchObject({ changed: true, new: { event: 'query' }, count: 1 });
    // The reads of orders are decided alike; one cut at A's row cap ran, and runs under B too (cut at B's cap as it runs).
    expect(find('', '', 'query')).toMatchObject({ changed: false, new: { event: 'query' } });
    expect(find('max_rows.truncated', '', 'truncated')).toMatchObject({ changed: false, count: 1, examples: [expect.objectContaining({ sql: 'SELECT id FROM orders ORDER BY id' })] });
    // A count of customers ran under A; B does not allow the table.
    expect(find('', 'allowed_tables.not_allowed', 'query')).toMatchObject({ changed: true, count: 1 });
    expect(groups[0]!.changed).toBe(true);
    for (const group of groups) expect(group.examples.length).toBeLessThanOrEqual(3);
  });

  it('pages add up to one call, with progress', async () => {
    const whole = await replayed({ start, end });
    const pages: Replay[] = [];
    let cursor: string | null | undefined;
    do {
      const page = await replayed({ start, end, limit: 4, ...(cursor ? { cursor } : {}) });
      pages.push(page);
      cursor = page.next_cursor;
    } while (cursor);
    expect(pages.length).toBe(Math.ceil(whole.total / 4));
    expect(pages.map((p) => p.done)).toEqual(pages.map((_, i) => Math.min(whole.total, 4 * (i + 1))));
    expect(pages.every((p) => p.total === whole.total)).toBe(true);
    expect(pages.reduce((n, p) => n + p.scanned, 0)).toBe(whole.total);
    expect(pages.reduce((n, p) => n + p.changed, 0)).toBe(whole.changed);
    expect(countsOf(pages.flatMap((p) => p.groups))).toEqual(countsOf(whole.groups));
  });

  it('replays an inline policy document, never saved, exactly as the saved one', async () => {
    const url = project('/policies/replay');
    const inline = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url, payload: { policy: POLICY_B, start, end } });
    expect(inline.statusCode, inline.body).toBe(200);
    const saved = await replayed({ start, end });
    const body = inline.json() as Replay & { policy_id: unknown };
    expect(body.policy_id).toBeNull();
    expect(countsOf(body.groups)).toEqual(countsOf(saved.groups));
    expect([body.total, body.changed, body.unchanged]).toEqual([saved.total, saved.changed, saved.unchanged]);
    const invalid = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url, payload: { policy: { ...POLICY_B, allowed_tables: ['no_schema'] }, start, end } });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toMatchObject({ code: 'INVALID_INPUT', errors: [expect.objectContaining({ field: 'policy.allowed_tables.0' })] });
    const first = (await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url, payload: { policy: POLICY_B, start, end, limit: 1 } })).json() as Replay;
    const otherDocument = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url, payload: { policy: { ...POLICY_B, max_rows: 6 }, start, end, cursor: first.next_cursor } });
    expect(otherDocument.json()).toMatchObject({ code: 'INVALID_INPUT', errors: [{ field: 'cursor', message: 'belongs to another policy or window' }] });
    const policies = (await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: project('/policies?page_size=100') })).json() as { policies: unknown[] };
    expect(policies.policies.length).toBe(4);
  });

  it('keeps to one credential when named', async () => {
    const mcpOnly = await replayed({ start, end, credential_id: mcpAgent.credential.id });
    expect(mcpOnly.total).toBe(MCP.length);
    expect(mcpOnly.groups.flatMap((g) => g.examples).every((e) => e.credential_id === mcpAgent.credential.id && e.source === 'mcp')).toBe(true);
    const none = await replayed({ start, end, credential_id: 'crd_nobody' });
    expect(none).toMatchObject({ total: 0, scanned: 0, groups: [], next_cursor: null });
  });

  it('records nothing and saves nothing', async () => {
    const published = gateway.decisions.length;
    await replayed({ start, end });
    const policies = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: project(`/policies/${candidateId}`) });
    expect((policies.json() as { version: number }).version).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(gateway.decisions.length).toBe(published);
  });
});

describe('refusals', () => {
  it('validates the window strictly', async () => {
    const invalid = async (payload: Record<string, unknown>, field: string) => {
      const answer = await replay(payload);
      expect(answer.statusCode, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toMatchObject({ code: 'INVALID_INPUT', errors: [expect.objectContaining({ field })] });
    };
    await invalid({ start: end, end: start }, 'end');
    await invalid({ start, end: start }, 'end');
    await invalid({ start: '2026-01-01T00:00:00Z', end: '2026-03-01T00:00:00Z' }, 'end');
    await invalid({ start: 'yesterday', end }, 'start');
    await invalid({ end }, 'start');
    await invalid({ start, end, limit: 0 }, 'limit');
    await invalid({ start, end, limit: 5_001 }, 'limit');
    expect((await replay({ start, end, surprise: 1 })).statusCode).toBe(400);
    await invalid({ start, end, cursor: 'bm90IGEgY3Vyc29y' }, 'cursor');
    const first = await replayed({ start, end, limit: 1 });
    await invalid({ start, end: new Date(Date.parse(end) + 1_000).toISOString(), cursor: first.next_cursor }, 'cursor');
  });

  it('answers 404 for another project’s policy and for one that does not exist', async () => {
    const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'trust', ssl_mode: 'disable' };
    const other = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'other', org_id: gateway.owner.orgId, database } });
    const otherId = (other.json() as { project: { id: string } }).project.id;
    const foreign = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: project('/policies', otherId), payload: { name: 'foreign', allowed_tables: ['public.*'] } });
    expect(await replay({ start, end }, (foreign.json() as { id: string }).id)).toMatchObject({ statusCode: 404, body: { code: 'NOT_FOUND' } });
    expect(await replay({ start, end }, 'pol_missing')).toMatchObject({ statusCode: 404, body: { code: 'NOT_FOUND' } });
  });

  it('needs the member role', async () => {
    const viewer = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/orgs/${gateway.owner.orgId}/api-keys`, payload: { name: 'viewer', role: 'viewer' } });
    expect(await replay({ start, end }, candidateId, (viewer.json() as { api_key: string }).api_key)).toMatchObject({ statusCode: 403, body: { code: 'FORBIDDEN' } });
  });
});

it('the management MCP reaches it like any operation: search, describe, call', async () => {
  const mcp = new Client({ name: 'pgward-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${gateway.owner.apiKey}` } } }));
  try {
    const found = (await mcp.callTool({ name: 'search_endpoints', arguments: { query: 'replay a policy over the audit trail: which decisions would change', limit: 5 } })) as CallToolResult;
    expect(JSON.stringify(found.structuredContent)).toContain('replayPolicy');
    const described = (await mcp.callTool({ name: 'describe_endpoint', arguments: { operation_id: 'replayPolicy' } })) as CallToolResult;
    expect(described.structuredContent).toMatchObject({ operation_id: 'replayPolicy', method: 'POST', path: '/v1/projects/{project_id}/policies/{policy_id}/replay' });
    const called = (await mcp.callTool({
      name: 'call_endpoint',
      arguments: { operation_id: 'replayPolicy', path_params: { project_id: gateway.projectId, policy_id: candidateId }, body: { start, end, credential_id: mcpAgent.credential.id } },
    })) as CallToolResult;
    expect(called.structuredContent).toMatchObject({ status: 200, body: { total: MCP.length, next_cursor: null } });
  } finally {
    await mcp.close();
  }
});
