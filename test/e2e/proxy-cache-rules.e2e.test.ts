/**
 * Issue 22's cache rules and recommendations through the real proxy, API and projections, with
 * ingest appending the proxy's decisions to the audit trail: a statement shape's figures and
 * recommendation from its entries, the database's hit/miss summary, an override per shape
 * (If-Match) that the proxy applies at the shape's next statement, and a purge the proxy's view
 * folds; the hosted agent MCP following both from a live view of its own, with no read of the
 * cache controls per call; each operation in the OpenAPI document and reached by the management MCP.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { decodeEvent } from '../../src/events/catalog.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { connectAgent, listenForAgents } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { createPolicy, registerOn, withAgentClient } from '../support/proxy-agents.js';
import { decisionsOfCredential, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

const exec = promisify(execFile);

let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;
let databaseId: string;
let base: string;
let httpUrl: string;

beforeAll(async () => {
  gateway = await startGateway('cache_rules');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), appendLingerMs: 0 });
  agent = await registerOn(gateway, await createPolicy(gateway, { name: 'reads', read_only: false, allowed_tables: ['public.*'] }), 'reader');
  const databases = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
  databaseId = (databases.json() as { databases: { id: string }[] }).databases[0]!.id;
  base = `/v1/projects/${gateway.projectId}/databases/${databaseId}/cache`;
  httpUrl = await listenForAgents(gateway);
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

async function psql(sql: string): Promise<string> {
  const { stdout } = await exec('psql', [agent.connection_string, '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql], { env: { ...process.env, PGCONNECT_TIMEOUT: '10' }, timeout: 20_000 });
  return stdout.trim();
}

const call = (method: 'GET' | 'PATCH' | 'POST', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = {}) =>
  gateway.api.call(gateway.owner.apiKey, { method, url, headers, ...(payload ? { payload } : {}) });

/** The cache_status of each recorded run of `sql` (from the wire, or the hosted MCP), in order, once there are `count`. */
async function statuses(sql: string, count: number, source: 'wire' | 'mcp' = 'wire'): Promise<unknown[]> {
  const find = () => decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === source && recordsText(d.sql, sql));
  await waitFor(() => find().length >= count, 3_000, `${count} decisions on ${sql}`);
  return find().map((d) => d.cache_status);
}

/** Runs `sql` once and gives its recorded cache_status. */
async function run(sql: string): Promise<unknown> {
  const before = decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === 'wire' && recordsText(d.sql, sql)).length;
  await psql(sql);
  return (await statuses(sql, before + 1))[before];
}

/** Runs `sql` until its run is recorded with `status` (a change reaches the proxy's views within moments). */
const runUntil = (sql: string, status: string) => waitFor(async () => (await run(sql)) === status, 5_000, `a ${status} of ${sql}`);

/** The query hash the audit trail gives `sql`. */
async function hashOf(sql: string): Promise<string> {
  await statuses(sql, 1);
  return decisionsOfCredential(gateway, agent.credential.id).find((d) => recordsText(d.sql, sql))!.query_hash as string;
}

type Rule = Record<string, unknown> & { query_hash: string; call_count: number };

/** The database's rules once the shape of `hash` shows `calls` calls (the audit projection follows ingest). */
async function ruleOnceCalled(hash: string, calls: number): Promise<Rule> {
  let found: Rule | undefined;
  await waitFor(async () => {
    const rules = (await call('GET', `${base}/rules?page_size=100`)).json() as { rules: Rule[] };
    found = rules.rules.find((rule) => rule.query_hash === hash);
    return found?.call_count === calls;
  }, 10_000, `${calls} calls of ${hash}`);
  return found!;
}

describe('cache rules and recommendations', () => {
  it('gives a shape its figures from the audit trail: calls, latency, bytes, stability of its refreshes; and the database its hits and misses', async () => {
    const read = 'select total from orders where id = 11';
    for (let i = 0; i < 3; i++) expect(await psql(read)).toBe('16.5');
    expect(await statuses(read, 3)).toEqual(['miss', 'hit', 'hit']);
    const hash = await hashOf(read);
    // A purge makes the next run a refresh of the shape: the same rows and bytes as the run before.
    expect((await call('POST', `${base}/purge`)).statusCode).toBe(202);
    await runUntil(read, 'miss');
    const calls = (await statuses(read, 4)).length;
    const rule = await ruleOnceCalled(hash, calls);
    expect(rule).toMatchObject({
      query_hash: hash,
      normalized_sql: 'select total from orders where id = $1',
      query_type: 'read',
      cache_enabled: true,
      cache_ttl_seconds: null,
      cache_swr_seconds: null,
      call_count: calls,
      stability_rate: 1,
      recommendation: expect.stringMatching(/^(fair|good)$/),
    });
    expect(rule.avg_latency_ms).toBeGreaterThan(0);
    expect(rule.p95_latency_ms).toBeGreaterThan(0);
    expect(rule.avg_response_bytes).toBeGreaterThan(0);
    const summary = (await call('GET', base)).json() as { total_hits: number; total_misses: number; hit_rate: number };
    const all = decisionsOfCredential(gateway, agent.credential.id);
    const hits = all.filter((d) => d.cache_status === 'hit' || d.cache_status === 'stale').length;
    const misses = all.filter((d) => d.cache_status === 'miss').length;
    expect(summary).toEqual({ total_hits: hits, total_misses: misses, hit_rate: hits / (hits + misses) });
  });

  it('an override keeps a shape out of the cache at its next statement (If-Match on its version), and returns it when reset', async () => {
    const read = 'select customer from orders where id = 12';
    expect(await psql(read)).not.toBe('');
    expect(await psql(read)).not.toBe('');
    expect(await statuses(read, 2)).toEqual(['miss', 'hit']);
    const hash = await hashOf(read);
    const path = `${base}/rules/${hash}`;
    const stale = await call('PATCH', path, { cache_enabled: false }, { 'if-match': '"3"' });
    expect(stale.statusCode).toBe(412);
    expect((stale.json() as { code: string }).code).toBe('PRECONDITION_FAILED');
    const off = await call('PATCH', path, { cache_enabled: false }, { 'if-match': '"0"' });
    expect(off.statusCode, off.body).toBe(200);
    expect(off.headers.etag).toBe('"1"');
    expect(off.json()).toMatchObject({ query_hash: hash, cache_enabled: false, cache_ttl_seconds: null });
    await runUntil(read, 'bypass');
    const on = await call('PATCH', path, { cache_enabled: null }, { 'if-match': '"1"' });
    expect(on.headers.etag).toBe('"2"');
    // Its entry was kept while the shape bypassed the cache.
    await runUntil(read, 'hit');
    const stored = (await gateway.api.store.readStream(`cache-${databaseId}`)).map(decodeEvent).filter((e) => e.type === 'CacheRuleSet.v1');
    expect(stored.map((e) => e.data)).toEqual([
      { project_id: gateway.projectId, database_id: databaseId, query_hash: hash, cache_enabled: false, cache_ttl_seconds: null, cache_swr_seconds: null },
      { project_id: gateway.projectId, database_id: databaseId, query_hash: hash, cache_enabled: null, cache_ttl_seconds: null, cache_swr_seconds: null },
    ]);
  });

  it('applies an override on the extended protocol too: the shape of the Parse’s text, whatever its parameters', async () => {
    const text = 'select customer from orders where id = $1';
    const read = (id: string) => withAgentClient(agent, (client) => client.query({ text, values: [id] }));
    await read('21');
    await read('21');
    const recorded = () => decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === 'wire' && d.sql === text);
    await waitFor(() => recorded().length >= 2, 3_000, 'two extended reads');
    expect(recorded().map((d) => d.cache_status)).toEqual(['miss', 'hit']);
    const hash = recorded()[0]!.query_hash as string;
    expect((await call('PATCH', `${base}/rules/${hash}`, { cache_enabled: false })).statusCode).toBe(200);
    await waitFor(async () => {
      const before = recorded().length;
      await read('22');
      await waitFor(() => recorded().length > before, 3_000, 'an extended read');
      return recorded().at(-1)!.cache_status === 'bypass';
    }, 5_000, 'an extended bypass');
  });

  it('a ttl override gives the shape’s entries their own time', async () => {
    const read = 'select id from orders where id = 13';
    expect(await psql(read)).toBe('13');
    const hash = await hashOf(read);
    expect((await call('PATCH', `${base}/rules/${hash}`, { cache_ttl_seconds: 1, cache_swr_seconds: 0 })).statusCode).toBe(200);
    // The purge after it, in the same stream, reaches the proxy's view after it: the first miss then is stored under the override.
    expect((await call('POST', `${base}/purge`)).statusCode).toBe(202);
    await runUntil(read, 'miss');
    expect(await run(read)).toBe('hit');
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await run(read)).toBe('miss');
    expect(await run(read)).toBe('hit');
  });

  it('a purge drops the database’s entries in the proxy: the next read is a miss', async () => {
    const read = 'select total from orders where id = 14';
    expect(await run(read)).toBe('miss');
    expect(await run(read)).toBe('hit');
    const purges = (await gateway.api.store.readStream(`cache-${databaseId}`)).filter((e) => e.type === 'CachePurged.v1').length;
    const purged = await call('POST', `${base}/purge`);
    expect(purged.statusCode).toBe(202);
    expect(purged.json()).toEqual({ database_id: databaseId, purges: purges + 1 });
    await runUntil(read, 'miss');
    expect((await statuses(read, 3)).join(' ')).toMatch(/^miss (hit )+miss$/);
  });

  it('the hosted MCP follows overrides and purges from a live view: no call reads the cache controls, a change applies at its next call', async () => {
    const read = 'select total from orders where id = 15';
    const pool = gateway.api.pool;
    const query = pool.query.bind(pool);
    // What the API's pool is asked while an MCP call is under way (the PATCH and purge routes read the read models themselves).
    const statements: string[] = [];
    let calling = false;
    pool.query = ((...args: Parameters<pg.Pool['query']>) => {
      if (calling) statements.push(typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text);
      return (query as (...a: unknown[]) => unknown)(...args);
    }) as unknown as pg.Pool['query'];
    const mcp = await connectAgent(`${httpUrl}/mcp`, agent.mcp_token, 'pgward-cache-rules-test');
    try {
      const runMcp = async (): Promise<unknown> => {
        const before = decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === 'mcp' && recordsText(d.sql, read)).length;
        calling = true;
        const result = await mcp.callTool({ name: 'query', arguments: { sql: read } }).finally(() => (calling = false));
        expect(result.isError ?? false).toBe(false);
        expect((result.structuredContent as { rows: unknown[][] }).rows).toEqual([['22.5']]);
        return (await statuses(read, before + 1, 'mcp'))[before];
      };
      const mcpUntil = (status: string) => waitFor(async () => (await runMcp()) === status, 5_000, `an MCP ${status} of ${read}`);
      expect(await runMcp()).toBe('miss');
      expect(await runMcp()).toBe('hit');
      const hash = decisionsOfCredential(gateway, agent.credential.id).find((d) => d.source === 'mcp' && recordsText(d.sql, read))!.query_hash as string;
      expect((await call('PATCH', `${base}/rules/${hash}`, { cache_enabled: false })).statusCode).toBe(200);
      await mcpUntil('bypass');
      expect((await call('PATCH', `${base}/rules/${hash}`, { cache_enabled: null })).statusCode).toBe(200);
      // Its entry was kept while the shape bypassed the cache.
      await mcpUntil('hit');
      expect((await call('POST', `${base}/purge`)).statusCode).toBe(202);
      await mcpUntil('miss');
      expect(await runMcp()).toBe('hit');
      expect(statements.length).toBeGreaterThan(0);
      expect(statements.filter((text) => text.includes('cache_controls')).map((t) => t.slice(0, 300))).toEqual([]);
    } finally {
      pool.query = query;
      await mcp.close();
    }
  });

  it('every operation has its OpenAPI id, and the management MCP reaches them', async () => {
    const document = (await gateway.api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId: string }>> };
    const path = '/v1/projects/{project_id}/databases/{database_id}/cache';
    expect(document.paths[path]!.get!.operationId).toBe('getCacheSummary');
    expect(document.paths[`${path}/rules`]!.get!.operationId).toBe('listCacheRules');
    expect(document.paths[`${path}/rules/{query_hash}`]!.patch!.operationId).toBe('updateCacheRule');
    expect(document.paths[`${path}/purge`]!.post!.operationId).toBe('purgeCache');
    const client = new Client({ name: 'pgward-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${httpUrl}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${gateway.owner.apiKey}` } } }));
    try {
      const found = (await client.callTool({ name: 'search_endpoints', arguments: { query: 'result cache rules purge hits', limit: 6 } })) as CallToolResult;
      const ids = (found.structuredContent as { endpoints: { operation_id: string }[] }).endpoints.map((e) => e.operation_id);
      expect(ids).toEqual(expect.arrayContaining(['getCacheSummary', 'listCacheRules', 'updateCacheRule', 'purgeCache']));
      const summary = (await client.callTool({ name: 'call_endpoint', arguments: { operation_id: 'getCacheSummary', path_params: { project_id: gateway.projectId, database_id: databaseId } } })) as CallToolResult;
      expect(summary.isError ?? false).toBe(false);
      expect(JSON.stringify(summary.structuredContent)).toContain('hit_rate');
    } finally {
      await client.close();
    }
  });
});
