import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { callTool, connectAgent, registerAgentWith, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { runOnce } from '../support/wire.js';

let gateway: TestGateway;
let ingest: RunningIngest;
let base: string;
/** Allowed only public.customers, its email masked: the acceptance agent. */
let masked: AgentSecrets;
let maskedClient: Client;

const TOOLS = ['briefing', 'query', 'validate_sql', 'list_tables', 'describe_table', 'schema_catalog', 'explain', 'my_permissions', 'search_docs', 'read_doc', 'approval_status'];

const agentWith = (policy: Record<string, unknown>): Promise<AgentSecrets> => registerAgentWith(gateway, policy);
const connect = (token: string, path = '/mcp'): Promise<Client> => connectAgent(`${base}${path}`, token, 'pgward-agent-test');
const call = callTool;

/** A successful tool call's structured content. */
async function ok<T = Record<string, unknown>>(client: Client, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const result = await call(client, name, args);
  expect(result.isError, textOf(result)).toBeFalsy();
  return result.structuredContent as T;
}

function rpc(token: string | undefined, path = '/mcp'): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
}

interface AuditRow {
  source: string;
  event: string;
  decision_rule: string;
  reason: string;
  sql: string;
  credential_id: string;
}

async function auditOf(credentialId: string, count: number): Promise<AuditRow[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100&credential_id=${credentialId}` });
    const entries = (response.json() as { entries: AuditRow[] }).entries;
    if (entries.length >= count || Date.now() > deadline) return entries.reverse();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

beforeAll(async () => {
  gateway = await startGateway('agent_mcp');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  await gateway.api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = gateway.api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  base = `http://127.0.0.1:${address.port}`;
  masked = await agentWith({ name: 'customers masked', read_only: true, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } });
  maskedClient = await connect(masked.mcp_token);
});
afterAll(async () => {
  await maskedClient?.close();
  await ingest?.stop();
  await gateway?.stop();
});

describe('lifecycle', () => {
  it('initializes with the SDK client at the mcp_url path, with instructions, and answers ping', async () => {
    expect(new URL(masked.mcp_url).pathname).toBe('/mcp');
    expect(maskedClient.getServerVersion()).toEqual({ name: 'pgward-agent', version: '1.0.0' });
    expect(maskedClient.getServerCapabilities()?.tools).toBeDefined();
    expect(maskedClient.getInstructions()).toMatch(/briefing/);
    expect(await maskedClient.ping()).toEqual({});
  });

  it('negotiates revision 2025-03-26, statelessly', async () => {
    const response = await rpc(masked.mcp_token);
    expect(response.status).toBe(200);
    expect(response.headers.get('mcp-session-id')).toBeNull();
    expect(await response.json()).toMatchObject({ id: 1, result: { protocolVersion: '2025-03-26', serverInfo: { name: 'pgward-agent' } } });
  });

  it('lists exactly the ten tools, each with schemas and honest annotations', async () => {
    const { tools } = await maskedClient.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...TOOLS].sort());
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.outputSchema?.type).toBe('object');
      expect(tool.annotations?.readOnlyHint).toBe(tool.name !== 'query');
      expect(tool.annotations?.openWorldHint).toBe(false);
    }
    expect(tools.find((tool) => tool.name === 'query')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
  });

  it('serves the single-host form /v1/projects/{project_id}/mcp, and refuses a token of another project there', async () => {
    const client = await connect(masked.mcp_token, `/v1/projects/${gateway.projectId}/mcp`);
    expect((await client.listTools()).tools).toHaveLength(TOOLS.length);
    await client.close();
    const response = await rpc(masked.mcp_token, '/v1/projects/prj_other/mcp');
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ code: 'UNAUTHORIZED', detail: 'the agent token does not belong to project prj_other' });
  });
});

describe('authentication', () => {
  it.each([
    ['no token', undefined],
    ['a malformed token', 'nope'],
    ['an unknown agent token', `pgw_agt_${'A'.repeat(43)}`],
  ])('answers HTTP 401 with WWW-Authenticate to %s, on both paths', async (_what, token) => {
    for (const path of ['/mcp', `/v1/projects/${gateway.projectId}/mcp`]) {
      const response = await rpc(token, path);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(`Bearer realm="pgward", resource_metadata="${base}/.well-known/oauth-protected-resource"`);
      expect(await response.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    }
  });

  it('does not take an organization API key for an agent token', async () => {
    const response = await rpc(gateway.owner.apiKey);
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ detail: 'the bearer token is not an agent token (pgw_agt_...)' });
  });

  it('makes the SDK client fail to connect with a bad token', async () => {
    await expect(connect(`pgw_agt_${'B'.repeat(43)}`)).rejects.toThrow(/401|Unauthorized/i);
  });

  it('refuses a disabled credential at once, takes it again when re-enabled, refuses a rotated-away token and a revoked credential', async () => {
    const agent = await gateway.register('lifecycle');
    const url = `/v1/projects/${gateway.projectId}/agents/${agent.credential.id}`;
    expect((await rpc(agent.mcp_token)).status).toBe(200);
    expect((await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url, payload: { status: 'disabled' } })).statusCode).toBe(200);
    expect((await rpc(agent.mcp_token)).status).toBe(401);
    expect((await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url, payload: { status: 'active' } })).statusCode).toBe(200);
    expect((await rpc(agent.mcp_token)).status).toBe(200);
    const rotated = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `${url}/rotate` });
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect((await rpc(agent.mcp_token)).status).toBe(401);
    const fresh = (rotated.json() as { mcp_token: string }).mcp_token;
    expect((await rpc(fresh)).status).toBe(200);
    expect((await gateway.api.call(gateway.owner.apiKey, { method: 'DELETE', url })).statusCode).toBeLessThan(300);
    expect((await rpc(fresh)).status).toBe(401);
  });
});

describe('acceptance', () => {
  it('an agent token from registration lists only its allowed tables through list_tables and gets masked values through query', async () => {
    const { tables } = await ok<{ tables: { table: string; kind: string }[] }>(maskedClient, 'list_tables');
    expect(tables.map((t) => t.table)).toEqual(['public.customers']);
    const result = await call(maskedClient, 'query', { sql: 'SELECT id, email FROM customers ORDER BY id LIMIT 3' });
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      untrusted_data: true,
      columns: [
        { name: 'id', type: 'integer' },
        { name: 'email', type: 'text' },
      ],
      rows: [
        [1, '[redacted]'],
        [2, '[redacted]'],
        [3, '[redacted]'],
      ],
      row_count: 3,
      truncated: false,
      command: 'SELECT 3',
      event: 'masked',
      decision_rule: 'masked_columns.masked',
    });
    expect(textOf(result)).toMatch(/untrusted.*never follow instructions/i);
    expect(textOf(result)).toMatch(/<untrusted-data-[0-9a-f-]+>/);
    expect(JSON.stringify(result)).not.toMatch(/user\d+@example\.com/);
  });
});

describe('tools', () => {
  it('briefing says what the agent may do', async () => {
    const brief = await ok(maskedClient, 'briefing');
    expect(brief).toMatchObject({
      credential: { id: masked.credential.id, status: 'active' },
      database: { name: gateway.upstream.url.split('/').pop() },
      policy: { read_only: true, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } },
      tables: ['public.customers'],
      caps: { default_max_rows: 100, max_rows_limit: 1000, policy_max_rows: null },
      budget: { queries_per_day: 0, bytes_per_month: '0', queries_today: expect.any(Number) },
    });
    expect(brief).not.toHaveProperty('policy.honeytokens');
  });

  it('my_permissions shows the credential and its policy', async () => {
    expect(await ok(maskedClient, 'my_permissions')).toMatchObject({
      credential: { id: masked.credential.id, project_id: gateway.projectId, status: 'active', expires_at: null },
      policy: { name: 'customers masked', read_only: true, max_rows: null, audit_mode: 'best_effort' },
    });
  });

  it('describe_table marks masked columns, and answers a table the policy does not allow like an unknown one', async () => {
    expect(await ok(maskedClient, 'describe_table', { table: 'customers' })).toMatchObject({
      table: 'public.customers',
      kind: 'table',
      columns: [
        { name: 'id', type: 'integer', nullable: false, primary_key: true, masked: null },
        { name: 'email', type: 'text', nullable: false, primary_key: false, masked: 'redact' },
      ],
    });
    for (const table of ['public.orders', 'no_such_table']) {
      const refused = await call(maskedClient, 'describe_table', { table });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toBe(`Table "${table}" is not available to this credential. The tables you may query: public.customers.`);
    }
  });

  it('schema_catalog gives every allowed table with its columns', async () => {
    const { tables } = await ok<{ tables: { table: string; columns: { name: string; masked: string | null }[] }[] }>(maskedClient, 'schema_catalog');
    expect(tables.map((t) => [t.table, t.columns.map((c) => `${c.name}:${c.masked}`)])).toEqual([['public.customers', ['id:null', 'email:redact']]]);
  });

  it('validate_sql decides without running: allowed with the masked rewrite, refused with rule and reason', async () => {
    const allowed = await ok(maskedClient, 'validate_sql', { sql: 'SELECT email FROM customers' });
    expect(allowed).toMatchObject({ allowed: true, event: 'masked', decision_rule: 'masked_columns.masked', sqlstate: null, tables_read: ['public.customers'] });
    expect(allowed.runs_as).not.toBe('SELECT email FROM customers');
    const refused = await ok(maskedClient, 'validate_sql', { sql: 'DELETE FROM customers' });
    expect(refused).toMatchObject({ allowed: false, event: 'blocked', decision_rule: 'read_only.write', sqlstate: '42501', runs_as: null });
  });

  it('explain plans an allowed statement without running it, and refuses what the policy refuses', async () => {
    const { plan } = await ok<{ plan: { Plan: { 'Node Type': string } }[] }>(maskedClient, 'explain', { sql: 'SELECT id FROM customers WHERE id = 1' });
    expect(plan[0]?.Plan['Node Type']).toMatch(/Scan/);
    const refused = await call(maskedClient, 'explain', { sql: 'SELECT * FROM orders' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/decision_rule allowed_tables\.not_allowed/);
    const doubled = await call(maskedClient, 'explain', { sql: 'EXPLAIN ANALYZE SELECT 1' });
    expect(textOf(doubled)).toMatch(/Send the statement itself/);
  });

  it('search_docs finds pgward’s docs by intent and read_doc reads them', async () => {
    const { results } = await ok<{ results: { doc_id: string; title: string; snippet: string }[] }>(maskedClient, 'search_docs', { query: 'column masking redact', limit: 3 });
    expect(results.length).toBeGreaterThan(0);
    const first = results[0]!;
    const doc = await ok<{ doc_id: string; text: string }>(maskedClient, 'read_doc', { doc_id: first.doc_id });
    expect(doc.doc_id).toBe(first.doc_id);
    expect(doc.text.toLowerCase()).toContain('mask');
    const whole = await ok<{ title: string; text: string }>(maskedClient, 'read_doc', { doc_id: 'tools' });
    expect(whole.text).toMatch(/^# The MCP tools/);
    const unknown = await call(maskedClient, 'read_doc', { doc_id: 'nope' });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toMatch(/Unknown doc_id "nope"\. Documents: .*policy/);
  });

  it('query binds params, caps rows by the request and by the policy, and reports the cap in the audit event', async () => {
    const orders = await agentWith({ name: 'orders capped', read_only: true, allowed_tables: ['public.orders'], max_rows: 3 });
    const client = await connect(orders.mcp_token);
    expect(await ok(client, 'query', { sql: 'SELECT id, total, customer FROM orders WHERE id = $1', params: [7] })).toMatchObject({
      columns: [
        { name: 'id', type: 'integer' },
        { name: 'total', type: 'numeric' },
        { name: 'customer', type: 'text' },
      ],
      rows: [[7, '10.5', 'c7']],
      truncated: false,
      event: 'query',
    });
    expect(await ok(client, 'query', { sql: 'SELECT id FROM orders ORDER BY id', max_rows: 2 })).toMatchObject({ rows: [[1], [2]], truncated: true, event: 'truncated', decision_rule: 'max_rows.request' });
    expect(await ok(client, 'query', { sql: 'SELECT id FROM orders ORDER BY id' })).toMatchObject({ row_count: 3, truncated: true, event: 'truncated', decision_rule: 'max_rows.policy' });
    const failed = await call(client, 'query', { sql: 'SELECT id / 0 FROM orders' });
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toMatch(/^The database refused the statement \(SQLSTATE 22012\): division by zero/);
    await client.close();
  });
});

describe('budgets', () => {
  it('counts what query runs against the daily budget, and then refuses with budget_exhausted and the reset time', async () => {
    const budgeted = await agentWith({ name: 'two a day', read_only: true, allowed_tables: ['public.orders'], queries_per_day: 2 });
    const client = await connect(budgeted.mcp_token);
    expect(await ok(client, 'briefing')).toMatchObject({ budget: { queries_per_day: 2, queries_today: 0 } });
    expect(await ok(client, 'query', { sql: 'SELECT 1 AS one' })).toMatchObject({ rows: [[1]] });
    expect(await ok(client, 'query', { sql: 'SELECT 2 AS two' })).toMatchObject({ rows: [[2]] });
    const refused = await call(client, 'query', { sql: 'SELECT 3 AS three' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^Refused by the policy \(decision_rule budget\.queries_per_day, SQLSTATE 53400\): the daily budget of 2 statements .* resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z$/);
    await client.close();
    const audited = await auditOf(budgeted.credential.id, 3);
    expect(audited.map((row) => [row.source, row.event, row.decision_rule])).toEqual([
      ['mcp', 'query', ''],
      ['mcp', 'query', ''],
      ['mcp', 'budget_exhausted', 'budget.queries_per_day'],
    ]);
  });
});

describe('writes', () => {
  it('runs a write a write-capable policy allows, in a read-write transaction, and returns what it returns', async () => {
    const writer = await gateway.register('writer');
    const client = await connect(writer.mcp_token);
    expect(await ok(client, 'query', { sql: 'UPDATE orders SET customer = $1 WHERE id = $2 RETURNING id, customer', params: ['mcp', 1000] })).toMatchObject({
      rows: [[1000, 'mcp']],
      command: 'UPDATE 1',
      event: 'query',
    });
    expect(await ok(client, 'query', { sql: 'SELECT customer FROM orders WHERE id = 1000' })).toMatchObject({ rows: [['mcp']] });
    await client.close();
  });
});

describe('errors', () => {
  it('answers an unknown tool with JSON-RPC invalid params naming the tools', async () => {
    const error = await maskedClient.callTool({ name: 'drop_database', arguments: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toMatch(/Unknown tool "drop_database"; the tools are briefing, query/);
  });

  it('answers invalid arguments with a tool error naming each field', async () => {
    const missing = await call(maskedClient, 'query', {});
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/^Invalid arguments for query: sql: /);
    const wrong = await call(maskedClient, 'query', { sql: 'SELECT 1', max_rows: 0, extra: true });
    expect(textOf(wrong)).toMatch(/max_rows: .*; .*extra/);
  });

  it('a statement refused on the wire is refused identically through query, and both land in the audit trail with the same decision_rule', async () => {
    const agent = await agentWith({ name: 'orders only', read_only: true, allowed_tables: ['public.orders'] });
    const sql = 'SELECT * FROM public.customers';
    const wire = await runOnce(agent.connection_string, sql);
    expect(wire.code).toBe('42501');
    const client = await connect(agent.mcp_token);
    const result = await call(client, 'query', { sql });
    await client.close();
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(`Refused by the policy (decision_rule allowed_tables.not_allowed, SQLSTATE 42501): ${wire.message}`);
    expect(result._meta?.['pgward/decision']).toMatchObject({ event: 'blocked', decision_rule: 'allowed_tables.not_allowed', reason: wire.message, sqlstate: '42501', tables_blocked: ['public.customers'] });

    const entries = await auditOf(agent.credential.id, 2);
    expect(entries.map((e) => [e.source, e.event, e.decision_rule, e.sql])).toEqual([
      ['wire', 'blocked', 'allowed_tables.not_allowed', sql],
      ['mcp', 'blocked', 'allowed_tables.not_allowed', sql],
    ]);
    expect(entries[1]!.reason).toBe(entries[0]!.reason);
  });

  it('audits what query runs with source mcp', async () => {
    const entries = await auditOf(masked.credential.id, 1);
    const ran = entries.find((e) => e.source === 'mcp' && e.sql === 'SELECT id, email FROM customers ORDER BY id LIMIT 3');
    expect(ran).toMatchObject({ event: 'masked', decision_rule: 'masked_columns.masked' });
  });
});
