/**
 * Issue 16, class 7: the audit record describes what ran. A comment of any length around a
 * statement (before, after, in the middle) cannot push the statement out of the entry's `sql` or
 * `normalized_sql`; a statement too long to keep whole keeps its head and tail; whatever was
 * changed, the entry names the SHA-256 of the text as sent. On the wire (simple and extended) and
 * the hosted MCP, for statements that ran and statements that were refused, and the chain of such
 * entries still verifies.
 */
import { createHash } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_SQL_MAX } from '../../src/events/audit.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { callTool, connectAgent, listenForAgents, registerAgentWith } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { recordedFor } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;
let wire: pg.Client;
let mcp: Client;

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
const comment = (bytes: number): string => `/* ${'x'.repeat(bytes)} */`;

const recordOf = (sql: string, source: 'wire' | 'mcp') => recordedFor(gateway, agent.credential.id, source, sql);

beforeAll(async () => {
  gateway = await startGateway('audit_record');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  agent = await registerAgentWith(gateway, { name: 'commenter', read_only: true, allowed_tables: ['public.orders', 'public.customers'], masked_columns: { 'public.customers.email': 'redact' }, max_rows: 50 });
  wire = new pg.Client({ connectionString: agent.connection_string });
  await wire.connect();
  mcp = await connectAgent(`${await listenForAgents(gateway)}/mcp`, agent.mcp_token, 'commenter');
});
afterAll(async () => {
  await wire?.end();
  await mcp?.close();
  await ingest?.stop();
  await gateway?.stop();
});

describe('a statement behind a 4,100-byte comment (the reproducer)', () => {
  const sql = `${comment(4_100)} select id, customer from orders where id = 7`;
  const kept = `SELECT id, customer FROM orders WHERE id = 7 /* pgward: written from its parse tree, without comments or layout; ${Buffer.byteLength(sql)} bytes as sent; sha256 of the whole text: ${sha256(sql)} */`;

  it('keeps the statement in sql and normalized_sql on the simple protocol', async () => {
    expect((await wire.query(sql)).rows).toEqual([{ id: 7, customer: 'c7' }]);
    const record = await recordOf(sql, 'wire');
    expect(record).toMatchObject({ event: 'query', sql: kept, normalized_sql: 'SELECT id, customer FROM orders WHERE id = $1', tables_read: ['public.orders'] });
  });

  it('on the extended protocol', async () => {
    const extended = `${comment(4_100)} select id from orders where id = $1`;
    expect((await wire.query({ text: extended, values: [8] })).rows).toEqual([{ id: 8 }]);
    expect(await recordOf(extended, 'wire')).toMatchObject({ event: 'query', normalized_sql: 'SELECT id FROM orders WHERE id = $1', sql: expect.stringMatching(/^SELECT id FROM orders WHERE id = \$1 \/\* pgward: /) });
  });

  it('on the hosted MCP', async () => {
    const viaMcp = `${comment(4_100)} select count(*)::int as n from orders where id < 11`;
    const result = await callTool(mcp, 'query', { sql: viaMcp });
    expect(result.structuredContent).toMatchObject({ rows: [[10]] });
    expect(await recordOf(viaMcp, 'mcp')).toMatchObject({ event: 'query', normalized_sql: 'SELECT (count(*))::int AS n FROM orders WHERE id < $1', sql: expect.stringMatching(/^SELECT \(count\(\*\)\)::int AS n FROM orders WHERE id < 11 \/\* pgward: /) });
  });
});

describe('siblings', () => {
  it('a refused statement behind a long comment is recorded as itself, on the wire and on MCP', async () => {
    const sql = `-- ${'y'.repeat(5_000)}\nselect * from secrets_nowhere`;
    const error = (await wire.query(sql).then(() => undefined, (e: unknown) => e)) as { code?: string } | undefined;
    expect(error?.code).toBe('42501');
    expect(await recordOf(sql, 'wire')).toMatchObject({ event: 'blocked', decision_rule: 'allowed_tables.not_allowed', sql: expect.stringMatching(/^SELECT \* FROM secrets_nowhere \/\* pgward: /), normalized_sql: 'SELECT * FROM secrets_nowhere' });
    const viaMcp = `${sql} `;
    expect((await callTool(mcp, 'validate_sql', { sql: viaMcp })).structuredContent).toMatchObject({ allowed: false });
    expect(await recordOf(viaMcp, 'mcp')).toMatchObject({ event: 'blocked', sql: expect.stringMatching(/^SELECT \* FROM secrets_nowhere \/\* pgward: /) });
  });

  it('comments in the middle and at the end, of both kinds, are dropped around a masked statement', async () => {
    const sql = `select id, /* ${'m'.repeat(3_000)} */ email from customers -- ${'t'.repeat(3_000)}\nwhere id = 2`;
    const { rows } = await wire.query(sql);
    expect(rows).toHaveLength(1);
    expect(rows[0].email).not.toBe('user2@example.com');
    expect(await recordOf(sql, 'wire')).toMatchObject({ event: 'masked', normalized_sql: 'SELECT id, email FROM customers WHERE id = $1', sql: expect.stringMatching(/^SELECT id, email FROM customers WHERE id = 2 \/\* pgward: /) });
  });

  it('a statement too long even without comments keeps its head and its tail around the marker', async () => {
    const sql = `select ${Array.from({ length: 900 }, (_, i) => `id + ${i} as c${i}`).join(', ')} from orders where id = 3`;
    expect(sql.length).toBeGreaterThan(AUDIT_SQL_MAX);
    await wire.query(sql);
    const record = await recordOf(sql, 'wire');
    expect(record.sql.length).toBeLessThanOrEqual(AUDIT_SQL_MAX);
    expect(record.sql.startsWith('SELECT id + 0 AS c0, id + 1 AS c1,')).toBe(true);
    expect(record.sql.endsWith('id + 899 AS c899 FROM orders WHERE id = 3')).toBe(true);
    expect(record.sql).toMatch(new RegExp(`/\\* pgward: \\d+ of \\d+ bytes left out here; sha256 of the whole text: ${sha256(sql)} \\*/`));
    expect(record.normalized_sql.startsWith('SELECT id + $1 AS c0,')).toBe(true);
    expect(record.normalized_sql.endsWith('FROM orders WHERE id = $901')).toBe(true);
  });

  it('a comment that fits is kept as sent', async () => {
    const sql = `/* report 42 */ select count(*)::int as n from orders`;
    await wire.query(sql);
    expect(await recordOf(sql, 'wire')).toMatchObject({ sql });
  });

  it('entries with abridged text chain and verify', async () => {
    const response = async () => (await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100&credential_id=${agent.credential.id}` })).json() as { entries: { sql: string }[] };
    await waitFor(async () => (await response()).entries.filter((e) => e.sql.includes('/* pgward: ')).length >= 5, 10_000, 'the abridged entries in the trail');
    const verified = (await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit/verify` })).json() as Record<string, unknown>;
    expect(verified).toMatchObject({ ok: true, first_broken_seq: null, failure_reason: null });
    expect(verified.verified_count).toBeGreaterThanOrEqual(5);
  });
});
