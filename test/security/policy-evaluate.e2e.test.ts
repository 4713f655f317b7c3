/**
 * The policy what-if (POST /v1/projects/{id}/policies/evaluate) on a real upstream with a catalog:
 * exact answers for inline and saved policies, nothing saved and nothing audited, and agreement with
 * the wire proxy's own audit decision on a sample of the bypass corpus (node-postgres, simple protocol).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SEARCH_PATH } from '../../proxy/policy/names.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { admin } from '../support/pg.js';
import { recordsText } from '../support/recorded.js';
import { openSession, waitFor } from '../support/wire.js';
import { corpus, CORPUS_SCHEMA, corpusPolicies, type CorpusEntry, type CorpusPolicyName } from './corpus.js';

let gateway: TestGateway;
const inlinePolicies = new Map<CorpusPolicyName, Record<string, unknown>>();
const credentials = new Map<CorpusPolicyName, { id: string; url: string }>();

type Answer = { statusCode: number; body: Record<string, unknown> };

async function evaluate(payload: Record<string, unknown>, key = gateway.owner.apiKey, projectId = gateway.projectId): Promise<Answer> {
  const response = await gateway.api.call(key, { method: 'POST', url: `/v1/projects/${projectId}/policies/evaluate`, payload });
  return { statusCode: response.statusCode, body: response.json() as Record<string, unknown> };
}

async function created<T>(url: string, payload: Record<string, unknown>): Promise<T> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url, payload });
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as T;
}

const project = (path: string) => `/v1/projects/${gateway.projectId}${path}`;

async function policyCount(): Promise<number> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: project('/policies?page_size=100') });
  return (response.json() as { policies: unknown[] }).policies.length;
}

beforeAll(async () => {
  gateway = await startGateway('policy_evaluate');
  await admin(gateway.upstream.url, (client) => client.query(CORPUS_SCHEMA));
  const planted = new Map<string, string>();
  for (const [name, { canaries, hash_key: _key, ...rules }] of Object.entries(corpusPolicies) as [CorpusPolicyName, (typeof corpusPolicies)[CorpusPolicyName]][]) {
    for (const canary of canaries) {
      if (!planted.has(canary.honeytoken_id)) planted.set(canary.honeytoken_id, (await created<{ id: string }>(project('/honeytokens'), { kind: canary.kind, target: canary.target, disable_credential: false })).id);
    }
    const document = { name, ...rules, honeytokens: canaries.map((canary) => planted.get(canary.honeytoken_id)) };
    inlinePolicies.set(name, document);
    const policy = await created<{ id: string }>(project('/policies'), document);
    const agent = await created<{ credential: { id: string }; connection_string: string }>(project('/agents'), { name, policy_profile_id: policy.id });
    credentials.set(name, { id: agent.credential.id, url: agent.connection_string });
  }
});
afterAll(async () => {
  await gateway?.stop();
});

/** The hash mask as an operator is shown it: the project's key as a placeholder. */
const hashed = (column: string) =>
  `pg_catalog.encode(pg_catalog.sha256(pg_catalog.byteacat(pg_catalog.decode('<project hash key>', 'hex'), pg_catalog.sha256(pg_catalog.byteacat(pg_catalog.decode('<project hash key>', 'hex'), pg_catalog.convert_to(${column}::text, 'UTF8'))))), 'hex')`;

const MASKING = { name: 'masking', read_only: true, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'hash', 'public.customers.ssn': 'redact' } };

describe('an inline policy', () => {
  it('masks, with derived columns named by their masked source, on the catalog (a * is written out and masked)', async () => {
    const derived = await evaluate({ policy: MASKING, sql: 'WITH c AS (SELECT id, email FROM customers) SELECT id, upper(email) AS shout FROM c' });
    expect(derived).toMatchObject({ statusCode: 200, body: { verdict: 'mask', event: 'masked', decision_rule: 'masked_columns.masked', sqlstate: null, masked_columns: ['public.customers.email:hash'], row_filtered: false } });
    expect(derived.body.runs_as).toBe(
      `WITH c AS (SELECT id, ${hashed('email')} AS email FROM customers) SELECT id, pg_catalog.upper(email) AS shout FROM c`,
    );
    const star = await evaluate({ policy: MASKING, sql: 'SELECT * FROM customers' });
    expect(star.body).toMatchObject({
      verdict: 'mask',
      masked_columns: ['public.customers.email:hash', 'public.customers.ssn:redact'],
      statement_kind: 'select',
      tables: { read: ['public.customers'], written: [], blocked: [] },
      not_evaluated: ['budgets', 'kill_switch', 'audit_mode', 'upstream'],
    });
    expect(star.body.runs_as).toBe(
      `SELECT customers.id, customers.name, ${hashed('customers.email')} AS email, customers.phone, '[redacted]'::text AS ssn, customers.birth_date, customers.region, customers.text FROM customers`,
    );
    expect(star.body.database_id).toMatch(/^db_/);
  });

  it('allows a plain read as sent, and refuses with the exact rule, SQLSTATE and tables', async () => {
    expect((await evaluate({ policy: MASKING, sql: 'SELECT id FROM orders' })).body).toMatchObject({ verdict: 'allow', event: 'query', decision_rule: '', reason: '', runs_as: 'SELECT id FROM orders', masked_columns: [] });
    expect((await evaluate({ policy: MASKING, sql: 'DELETE FROM orders WHERE id = 1' })).body).toMatchObject({
      verdict: 'block', event: 'blocked', decision_rule: 'read_only.write', sqlstate: '42501', runs_as: null, statement_kind: 'delete', tables: { read: [], written: ['public.orders'], blocked: [] },
    });
    const denied = await evaluate({ policy: { ...MASKING, allowed_tables: ['public.orders'] }, sql: 'SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id' });
    expect(denied.body).toMatchObject({ verdict: 'block', decision_rule: 'allowed_tables.not_allowed', tables: { blocked: ['public.customers'] } });
    expect(denied.body.reason).toContain('public.customers');
    const kinds = await evaluate({ policy: { name: 'no deletes', read_only: false, allowed_tables: ['public.*'], statement_deny: ['delete'] }, sql: 'DELETE FROM orders' });
    expect(kinds.body).toMatchObject({ verdict: 'block', decision_rule: 'statement_kind.denied' });
  });

  it('says a row filter applies, and shows the operator the text that would run with it', async () => {
    const filtered = await evaluate({ policy: { name: 'big orders', read_only: true, allowed_tables: ['public.*'], row_filters: { 'public.orders': 'total > 10' } }, sql: 'SELECT id FROM orders' });
    expect(filtered.body).toMatchObject({ verdict: 'row_filter', event: 'query', decision_rule: 'row_filters.filtered', row_filtered: true, masked_columns: [] });
    expect(filtered.body.runs_as).toBe('SELECT id FROM ( SELECT * FROM ONLY public.orders WHERE orders.total > 10 OFFSET 0 ) AS orders');
    const unfiltered = await evaluate({ policy: { name: 'big orders', read_only: true, allowed_tables: ['public.*'], row_filters: { 'public.orders': 'total > 10' } }, sql: 'SELECT id FROM customers' });
    expect(unfiltered.body).toMatchObject({ verdict: 'allow', row_filtered: false, runs_as: 'SELECT id FROM customers' });
  });

  it('decides a filter on pgward.credential_id() for the credential_id it is given, and refuses without one (400, the field)', async () => {
    const OWN = { name: 'own notes', read_only: true, allowed_tables: ['public.*'], row_filters: { 'public.orders': 'note = pgward.credential_id()' } };
    const credentialId = credentials.get('readonly_orders')!.id;
    const decided = await evaluate({ policy: OWN, sql: 'SELECT id FROM orders', credential_id: credentialId });
    expect(decided).toMatchObject({ statusCode: 200, body: { verdict: 'row_filter', decision_rule: 'row_filters.filtered', row_filtered: true } });
    expect(decided.body.runs_as).toBe(`SELECT id FROM ( SELECT * FROM ONLY public.orders WHERE orders.note = '${credentialId}' OFFSET 0 ) AS orders`);
    const missing = await evaluate({ policy: OWN, sql: 'SELECT id FROM orders' });
    expect(missing).toMatchObject({ statusCode: 400, body: { code: 'INVALID_INPUT', errors: [{ field: 'credential_id', message: 'required when the policy’s row filters name pgward.credential_id()' }] } });
    // A policy without a session value in its filters needs none; pgward.project_id() is the project's own.
    const project = await evaluate({ policy: { ...OWN, row_filters: { 'public.orders': 'note = pgward.project_id()' } }, sql: 'SELECT id FROM orders' });
    expect(project.body.runs_as).toBe(`SELECT id FROM ( SELECT * FROM ONLY public.orders WHERE orders.note = '${gateway.projectId}' OFFSET 0 ) AS orders`);
  });

  it('is validated as a create validates it: 400 with the field, and exactly one of policy and policy_id', async () => {
    const invalid = await evaluate({ policy: { name: 'bad', allowed_tables: ['no_schema'] }, sql: 'SELECT 1' });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.body).toMatchObject({ code: 'INVALID_INPUT', errors: [expect.objectContaining({ field: 'policy.allowed_tables.0' })] });
    expect((await evaluate({ policy: { name: 'bad', read_only: true, row_caps: 3 }, sql: 'SELECT 1' })).statusCode).toBe(400);
    expect((await evaluate({ policy: MASKING, policy_id: gateway.policyId, sql: 'SELECT 1' })).body).toMatchObject({ code: 'INVALID_INPUT', errors: [expect.objectContaining({ field: 'policy' })] });
    expect((await evaluate({ sql: 'SELECT 1' })).statusCode).toBe(400);
    expect((await evaluate({ policy: MASKING, sql: 'SELECT 1', surprise: true })).statusCode).toBe(400);
    const unknownCanary = await evaluate({ policy: { ...MASKING, honeytokens: ['hnt_aaaaaaaaaaaaaaaaaaaaaaaa'] }, sql: 'SELECT 1' });
    expect(unknownCanary.body).toMatchObject({ code: 'INVALID_INPUT', errors: [{ field: 'policy.honeytokens.0', message: 'names no honeytoken of this project' }] });
  });
});

describe('approval holds', () => {
  const WRITER = { name: 'writer', read_only: false, allowed_tables: ['public.*'] };
  const NOT_HELD = { required: false, rule: null, reason: null, held_above_rows: null };
  const HELD_UPDATE = "it runs a statement of kind update, which this credential's policy holds for approval (rule approval.held_kind)";

  it('answers hold (audited as approval_requested) for a statement the approval rules hold whatever its rows, with the text it would run once approved', async () => {
    const held = await evaluate({ policy: { ...WRITER, approval: { held_kinds: ['update'] } }, sql: 'UPDATE orders SET total = 0 WHERE id = 1' });
    expect(held.body).toEqual({
      verdict: 'hold', event: 'approval_requested', decision_rule: 'approval.held_kind', reason: HELD_UPDATE, sqlstate: null, masked_columns: [], row_filtered: false,
      runs_as: 'UPDATE orders SET total = 0 WHERE id = 1', statement_kind: 'update', tables: { read: [], written: ['public.orders'], blocked: [] }, flags: [],
      database_id: held.body.database_id, not_evaluated: ['budgets', 'kill_switch', 'audit_mode', 'upstream'],
      approval: { required: true, rule: 'approval.held_kind', reason: HELD_UPDATE, held_above_rows: null },
    });
    expect(held.body.database_id).toMatch(/^db_/);
    // Its siblings: a statement of another kind, and a read, are not held.
    expect((await evaluate({ policy: { ...WRITER, approval: { held_kinds: ['update'] } }, sql: 'DELETE FROM orders WHERE id = 1' })).body).toMatchObject({ verdict: 'allow', event: 'query', decision_rule: '', approval: NOT_HELD });
    expect((await evaluate({ policy: { ...WRITER, approval: { held_kinds: ['update'] } }, sql: 'SELECT id FROM orders' })).body).toMatchObject({ verdict: 'allow', approval: NOT_HELD });
    // By every kind it runs: a writable CTE is an update too.
    expect((await evaluate({ policy: { ...WRITER, approval: { held_kinds: ['update'] } }, sql: 'WITH u AS (UPDATE orders SET total = 0 RETURNING id) SELECT count(*) FROM u' })).body).toMatchObject({
      verdict: 'hold', decision_rule: 'approval.held_kind', approval: { required: true },
    });
  });

  it('holds writes to the tables the rules name (approval.held_table), not reads of them or writes elsewhere', async () => {
    const policy = { ...WRITER, approval: { tables: ['public.orders'] } };
    const reason = "it writes public.orders, whose writes this credential's policy holds for approval (rule approval.held_table)";
    expect((await evaluate({ policy, sql: 'INSERT INTO orders (id, customer, total) VALUES (5000, $1, 1)', params: ['c1'] })).body).toMatchObject({
      verdict: 'hold', event: 'approval_requested', decision_rule: 'approval.held_table', reason, approval: { required: true, rule: 'approval.held_table', reason, held_above_rows: null },
    });
    expect((await evaluate({ policy, sql: 'SELECT total FROM orders' })).body).toMatchObject({ verdict: 'allow', approval: NOT_HELD });
    expect((await evaluate({ policy, sql: "UPDATE customers SET name = 'x' WHERE id = 1" })).body).toMatchObject({ verdict: 'allow', approval: NOT_HELD });
  });

  it('says a write under a row threshold or an auto-approve ceiling is held only when estimated above it (the gateway estimates before holding); rows it cannot count are held', async () => {
    const threshold = { ...WRITER, approval: { row_threshold: 100 } };
    const estimated = "its rows could not be estimated, and this credential's policy holds writes of more than 100 rows (rule approval.row_threshold)";
    expect((await evaluate({ policy: threshold, sql: 'DELETE FROM orders WHERE total > 10' })).body).toMatchObject({
      verdict: 'allow', event: 'query', decision_rule: '', approval: { required: false, rule: 'approval.row_threshold', reason: estimated, held_above_rows: 100 },
    });
    expect((await evaluate({ policy: threshold, sql: 'TRUNCATE orders' })).body).toMatchObject({
      verdict: 'hold', decision_rule: 'approval.row_threshold',
      approval: { required: true, rule: 'approval.row_threshold', reason: "the rows TRUNCATE affects cannot be counted, and this credential's policy holds writes of more than 100 rows (rule approval.row_threshold)", held_above_rows: null },
    });
    const ceiling = { ...WRITER, approval: { held_kinds: ['delete'], auto_approve: { 'public.orders': { max_rows: 5 } } } };
    expect((await evaluate({ policy: ceiling, sql: 'DELETE FROM orders WHERE id = 1' })).body).toMatchObject({ verdict: 'allow', approval: { required: false, rule: 'approval.held_kind', held_above_rows: 5 } });
    expect((await evaluate({ policy: ceiling, sql: 'DELETE FROM customers WHERE id = 1' })).body).toMatchObject({ verdict: 'hold', approval: { required: true, rule: 'approval.held_kind', held_above_rows: null } });
  });

  it('never holds what the policy refuses: the refusal stands', async () => {
    expect((await evaluate({ policy: { ...WRITER, read_only: true, approval: { held_kinds: ['delete'] } }, sql: 'DELETE FROM orders' })).body).toMatchObject({
      verdict: 'block', decision_rule: 'read_only.write', sqlstate: '42501', approval: NOT_HELD,
    });
  });
});

describe('a saved policy', () => {
  it('decides under the saved profile', async () => {
    expect((await evaluate({ policy_id: gateway.policyId, sql: 'DELETE FROM orders WHERE id = 1' })).body).toMatchObject({
      verdict: 'allow', event: 'query', decision_rule: '', runs_as: 'DELETE FROM orders WHERE id = 1', tables: { read: [], written: ['public.orders'], blocked: [] },
    });
  });

  it('answers 404 for another project’s policy, and for a policy that does not exist', async () => {
    const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'trust', ssl_mode: 'disable' };
    const other = await created<{ project: { id: string } }>('/v1/projects', { name: 'other', org_id: gateway.owner.orgId, database });
    const foreign = await created<{ id: string }>(`/v1/projects/${other.project.id}/policies`, { name: 'foreign', allowed_tables: ['public.*'] });
    expect(await evaluate({ policy_id: foreign.id, sql: 'SELECT 1' })).toMatchObject({ statusCode: 404, body: { code: 'NOT_FOUND' } });
    expect(await evaluate({ policy_id: 'pol_missing', sql: 'SELECT 1' })).toMatchObject({ statusCode: 404, body: { code: 'NOT_FOUND' } });
  });

  it('shows a viewer a tripped canary as the agent is told, and a member as the audit trail records it', async () => {
    const viewer = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/orgs/${gateway.owner.orgId}/api-keys`, payload: { name: 'viewer', role: 'viewer' } });
    const viewerKey = (viewer.json() as { api_key: string }).api_key;
    const payload = { policy: inlinePolicies.get('readonly_orders'), sql: 'SELECT secret FROM api_keys' };
    expect((await evaluate(payload, viewerKey)).body).toMatchObject({ verdict: 'block', event: 'blocked', decision_rule: 'allowed_tables.not_allowed' });
    expect((await evaluate(payload)).body).toMatchObject({ verdict: 'block', event: 'canary_tripped', decision_rule: 'honeytoken.table' });
  });
});

it('saves nothing and audits nothing', async () => {
  const policies = await policyCount();
  const published = gateway.decisions.length;
  for (const sql of ['SELECT * FROM customers', 'DELETE FROM orders', 'SELECT secret FROM api_keys']) {
    expect((await evaluate({ policy: { ...MASKING, name: 'unsaved' }, sql })).statusCode).toBe(200);
  }
  // A decision would reach the bus within milliseconds; a wire statement afterwards proves the bus delivers.
  const client = new pg.Client({ connectionString: credentials.get('readonly_none')!.url });
  await client.connect();
  await client.query('SELECT 1');
  await client.end();
  await waitFor(() => gateway.decisions.length > published, 3_000, 'the wire statement’s decision');
  expect(gateway.decisions.slice(published).map((d) => (d.decision as { sql?: string } | undefined)?.sql)).toEqual(['SELECT 1']);
  expect(await policyCount()).toBe(policies);
});

describe('the other ways in', () => {
  let base: string;
  beforeAll(async () => {
    base = await listenForAgents(gateway);
  });

  it('the management MCP reaches it like any operation: search, describe, call', async () => {
    const mcp = new Client({ name: 'pgward-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${gateway.owner.apiKey}` } } }));
    try {
      const found = (await mcp.callTool({ name: 'search_endpoints', arguments: { query: 'evaluate a policy on a statement what-if', limit: 5 } })) as CallToolResult;
      expect(JSON.stringify(found.structuredContent)).toContain('evaluatePolicy');
      const described = (await mcp.callTool({ name: 'describe_endpoint', arguments: { operation_id: 'evaluatePolicy' } })) as CallToolResult;
      expect(described.structuredContent).toMatchObject({ operation_id: 'evaluatePolicy', method: 'POST', path: '/v1/projects/{project_id}/policies/evaluate' });
      const called = (await mcp.callTool({
        name: 'call_endpoint',
        arguments: { operation_id: 'evaluatePolicy', path_params: { project_id: gateway.projectId }, body: { policy: MASKING, sql: 'DELETE FROM orders' } },
      })) as CallToolResult;
      expect(called.structuredContent).toMatchObject({ status: 200, body: { verdict: 'block', decision_rule: 'read_only.write' } });
    } finally {
      await mcp.close();
    }
  });

  it('the agent MCP’s validate_sql gives the same answer for the agent’s own policy', async () => {
    const agent = await registerAgentWith(gateway, { ...MASKING, name: 'validating' });
    for (const sql of ['SELECT * FROM customers', 'DELETE FROM orders', 'SELECT nope FROM pg_shadow']) {
      const whatIf = (await evaluate({ policy: { ...MASKING, name: 'validating' }, sql })).body;
      const validated = await withAgentMcp(`${base}/mcp`, agent, async (client) => (await callTool(client, 'validate_sql', { sql })).structuredContent as Record<string, unknown>);
      expect({ event: validated.event, decision_rule: validated.decision_rule, reason: validated.reason, runs_as: validated.runs_as, tables_read: validated.tables_read }).toEqual({
        event: whatIf.event, decision_rule: whatIf.decision_rule, reason: whatIf.reason, runs_as: whatIf.runs_as, tables_read: (whatIf.tables as { read: unknown }).read,
      });
    }
  });
});

/**
 * Every third entry of the corpus whose outcome does not depend on session state the proxy cannot
 * have (a search_path) or on a malformed message (a NUL, which no decision follows).
 */
const sample = corpus.filter((entry, index) => index % 3 === 0 && (entry.searchPath ?? DEFAULT_SEARCH_PATH).join() === DEFAULT_SEARCH_PATH.join() && !entry.sql.includes('\u0000'));

describe('agreement with the wire proxy', () => {
  const sessions = new Map<CorpusPolicyName, { client: pg.Client; ended: () => boolean }>();
  afterAll(async () => {
    await Promise.all([...sessions.values()].map((session) => session.client.end().catch(() => undefined)));
  });

  async function sessionOf(policy: CorpusPolicyName): Promise<pg.Client> {
    const open = sessions.get(policy);
    if (open && !open.ended()) return open.client;
    const session = await openSession(credentials.get(policy)!.url);
    sessions.set(policy, session);
    return session.client;
  }

  /** The proxy's audit decision on the entry: its writes run in a transaction rolled back after. */
  async function proxyDecision(entry: CorpusEntry, from: number): Promise<{ event: unknown; decision_rule: unknown }> {
    const client = await sessionOf(entry.policy);
    const writable = !corpusPolicies[entry.policy].read_only;
    if (writable) await client.query('BEGIN');
    await client.query(entry.sql).catch(() => undefined);
    if (!sessions.get(entry.policy)!.ended() && client.getTransactionStatus() !== 'I') await client.query('ROLLBACK');
    const credentialId = credentials.get(entry.policy)!.id;
    // The harness's own BEGIN comes first when the entry is a BEGIN too.
    const skip = writable && recordsText('BEGIN', entry.sql) ? 1 : 0;
    const find = () =>
      gateway.decisions
        .slice(from)
        .map((record) => record.decision as { credential_id?: string; sql: string; event: string; decision_rule: string } | undefined)
        .filter((d) => d?.credential_id === credentialId && d.event !== 'migration_flagged' && recordsText(d.sql, entry.sql))[skip];
    await waitFor(() => find() !== undefined, 3_000, `the decision on ${entry.sql.slice(0, 60)}`);
    const { event, decision_rule } = find()!;
    return { event, decision_rule };
  }

  it(`evaluate(policy, sql) has the proxy's event and decision_rule for ${sample.length} corpus statements`, { timeout: 60_000 }, async () => {
    const disagreements: unknown[] = [];
    for (const entry of sample) {
      const from = gateway.decisions.length;
      const answer = await evaluate({ policy: inlinePolicies.get(entry.policy), sql: entry.sql });
      expect(answer.statusCode, JSON.stringify(answer.body)).toBe(200);
      const proxy = await proxyDecision(entry, from);
      const whatIf = { event: answer.body.event, decision_rule: answer.body.decision_rule };
      if (JSON.stringify(whatIf) !== JSON.stringify(proxy)) disagreements.push({ sql: entry.sql.slice(0, 120), policy: entry.policy, whatIf, proxy });
    }
    expect(disagreements).toEqual([]);
    expect(sample.length).toBeGreaterThan(100);
  });
});
