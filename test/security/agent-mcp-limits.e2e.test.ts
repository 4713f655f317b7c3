/**
 * The hosted agent MCP (src/mcp/agent) at its limits: a statement whose end was never read, a
 * kill-switch during a request, the audit session id, budgets under a JSON-RPC batch, and the size
 * of a result; each as the behaviour docs/mcp.md promises.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { callTool, connectAgent, registerAgentWith, textOf } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { waitFor } from '../support/wire.js';
import { findCredentialByTokenHash } from '../../queries/credentials.js';
import { sha256Hex } from '../../src/crypto/tokens.js';

let gateway: TestGateway;
let ingest: RunningIngest;
let base: string;

const agentWith = (policy: Record<string, unknown>): Promise<AgentSecrets> => registerAgentWith(gateway, policy);
const connect = (token: string, path = '/mcp'): Promise<Client> => connectAgent(`${base}${path}`, token, 'pgward-limits');
const call = callTool;

/** One POST carrying a JSON-RPC batch of tools/call, as revision 2025-03-26 allows. */
async function batch(token: string, calls: { name: string; arguments: Record<string, unknown> }[]): Promise<{ id: number; result?: CallToolResult }[]> {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-03-26' },
    body: JSON.stringify(calls.map((params, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params }))),
  });
  expect(response.status).toBe(200);
  const answers = (await response.json()) as { id: number; result?: CallToolResult } | { id: number; result?: CallToolResult }[];
  return (Array.isArray(answers) ? answers : [answers]).sort((a, b) => a.id - b.id);
}

/** Sets some of the gateway database's pool_config through the REST API; gives back a function that restores the rest. */
async function setPoolConfig(changes: Record<string, number>): Promise<() => Promise<void>> {
  const listed = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
  const database = (listed.json() as { databases: { id: string; pool_config: Record<string, unknown> }[] }).databases[0]!;
  const patch = async (poolConfig: Record<string, unknown>) => {
    const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/databases/${database.id}`, payload: { pool_config: poolConfig } });
    expect(patched.statusCode, patched.body).toBe(200);
  };
  await patch({ ...database.pool_config, ...changes });
  return () => patch(database.pool_config);
}

beforeAll(async () => {
  gateway = await startGateway('mcp_limits');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  await gateway.api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = gateway.api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  base = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

describe('a statement whose result breaks the upstream reader (a value over 1 MB)', () => {
  it('is audited as the wire audits a lost statement, and the agent is not told it did not run', async () => {
    const writer = await gateway.register('big returning');
    const client = await connect(writer.mcp_token);
    const sql = `UPDATE orders SET customer = 'mcp-big' WHERE id = 5 RETURNING id, repeat('x', 1100000) AS padding`;
    const result = await call(client, 'query', { sql });
    await client.close();
    expect(result.isError).toBe(true);
    expect(textOf(result)).not.toMatch(/did not run/);
    // The statement reached PostgreSQL: the audit trail must say so.
    const decisions = await gateway.decisionsOf(writer.credential.id, 1).catch(() => []);
    expect(decisions.map((d) => [d.source, d.sql])).toEqual([['mcp', sql]]);
    expect(String(decisions[0]?.reason)).toMatch(/may have run/);
  });

  it('counts against the daily budget', async () => {
    const budgeted = await agentWith({ name: 'one a day, big', read_only: true, allowed_tables: ['public.orders'], queries_per_day: 1 });
    const client = await connect(budgeted.mcp_token);
    for (let i = 0; i < 3; i++) expect((await call(client, 'query', { sql: `SELECT repeat('x', 1100000) AS padding` })).isError).toBe(true);
    const after = await call(client, 'query', { sql: 'SELECT 1 AS one' });
    await client.close();
    expect(after.isError).toBe(true);
    expect(textOf(after)).toMatch(/budget\.queries_per_day/);
  });
});

describe('a kill-switch during an open request', () => {
  // Ordered by what the test observes (sessions waiting on its lock, a published decision, the read
  // model), never by timers: a statement waiting for a connection here never times out.
  it('stops a statement of a request authenticated before it that had not started yet', async () => {
    const agent = await gateway.register('statement after disable');
    const restorePool = await setPoolConfig({ max_connections_per_credential: 2, acquire_timeout_ms: 300_000 });
    // One session holds the lock; the other watches (pg_stat_activity is read once per transaction).
    const [locker, upstream] = [new pg.Client({ connectionString: gateway.upstream.url }), new pg.Client({ connectionString: gateway.upstream.url })];
    await Promise.all([locker.connect(), upstream.connect()]);
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE customers IN ACCESS EXCLUSIVE MODE');
      // Two statements take the credential's two connections and wait on the test's lock.
      const holding = { name: 'query', arguments: { sql: 'SELECT count(*) AS n FROM customers' } };
      const busy = batch(agent.mcp_token, [holding, holding]);
      const waitingOnLock = async () =>
        (await upstream.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where application_name = 'pgward-mcp' and wait_event_type = 'Lock' and query like '%customers%'`)).rows[0]!.n;
      await waitFor(async () => (await waitingOnLock()) === 2, 30_000, 'two MCP statements waiting on the lock');
      // A second request: its refused call is decided (so the request was authenticated); its UPDATE can get no connection.
      const late = batch(agent.mcp_token, [
        { name: 'query', arguments: { sql: 'SELEC 1' } },
        { name: 'query', arguments: { sql: `UPDATE orders SET customer = 'after-disable' WHERE id = 6 RETURNING id` } },
      ]);
      await waitFor(() => gateway.decisions.some((d) => (d.decision as { credential_id?: string } | undefined)?.credential_id === agent.credential.id), 30_000, 'the refused call decided');
      const disabled = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/agents/${agent.credential.id}`, payload: { status: 'disabled' } });
      expect(disabled.statusCode).toBe(200);
      await waitFor(async () => (await findCredentialByTokenHash(gateway.api.pool, sha256Hex(agent.mcp_token))) === undefined, 30_000, 'the credentials read model saw the disable');
      await locker.query('COMMIT');
      const [refused, answer] = await late;
      const held = await busy;
      const { rows } = await upstream.query<{ customer: string }>('select customer from orders where id = 6');
      expect(rows[0]?.customer).not.toBe('after-disable');
      expect(refused?.result?.isError).toBe(true);
      expect(answer?.result?.isError).toBe(true);
      expect(textOf(answer!.result!)).toMatch(/may no longer be used.*did not run/);
      // The two that had started before the kill-switch ran to their end.
      expect(held.map((h) => h.result?.isError ?? false)).toEqual([false, false]);
    } finally {
      await Promise.all([locker.end(), upstream.end()]);
      await restorePool();
    }
  });
});

describe('the audit session id of an MCP request', () => {
  // The request id is the client's X-Request-Id when it sends one: the session id is prefixed with the credential.
  it('is not chosen by the agent: two credentials never share one', async () => {
    const [one, two] = [await gateway.register('session one'), await gateway.register('session two')];
    for (const agent of [one, two]) {
      const response = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${agent.mcp_token}`, 'x-request-id': 'chosen-by-the-agent' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'query', arguments: { sql: 'SELECT 1 AS one' } } }),
      });
      expect(response.status).toBe(200);
    }
    const sessions = [...(await gateway.decisionsOf(one.credential.id, 1)), ...(await gateway.decisionsOf(two.credential.id, 1))].map((d) => d.session_id);
    expect(new Set(sessions).size).toBe(2);
  });
});

describe('budgets under a JSON-RPC batch', () => {
  // A statement counts as it is admitted, not when it ends: the batch's statements cannot overrun the budget together.
  it('do not let one request run more statements than the daily budget leaves', async () => {
    const budgeted = await agentWith({ name: 'one a day, batched', read_only: true, allowed_tables: ['public.orders'], queries_per_day: 1 });
    const answers = await batch(budgeted.mcp_token, Array.from({ length: 20 }, (_, i) => ({ name: 'query', arguments: { sql: `SELECT ${i} AS n` } })));
    expect(answers.filter((a) => a.result && !a.result.isError).length).toBeLessThanOrEqual(1);
  });
});

describe('the size of a query result', () => {
  // Rows are held in memory and answered twice over (text and structured content): a result is
  // bounded in bytes (MAX_RESULT_BYTES) as max_rows bounds it in rows, and says it was cut.
  it('is bounded in bytes, as it is in rows', async () => {
    const reader = await agentWith({ name: 'big rows', read_only: true, allowed_tables: ['public.orders'] });
    const client = await connect(reader.mcp_token);
    const result = await call(client, 'query', { sql: `SELECT repeat('x', 600000) AS padding FROM generate_series(1, 100)`, max_rows: 1000 });
    await client.close();
    expect(result.isError).toBeFalsy();
    const structured = result.structuredContent as { rows: unknown[]; truncated: boolean; reason: string; decision_rule: string };
    expect(structured.truncated).toBe(true);
    // 16 MiB of rows of 600,000 bytes and their headers: 27 rows.
    expect(structured.rows).toHaveLength(27);
    expect(textOf(result).length).toBeLessThan(40 * 1024 * 1024);
    const audited = await gateway.decisionsOf(reader.credential.id, 1);
    expect(audited.at(-1)).toMatchObject({ event: 'truncated', decision_rule: 'max_result_bytes', rows_returned: '27' });
  });
});
