/**
 * Issue 16, class 9: a honeytoken must not betray itself. Every agent-facing channel (the wire,
 * simple and extended; every hosted MCP tool; the docs an agent can read) answers a statement that
 * touches a table, column or value honeytoken exactly as it answers a table that is simply not
 * allowed; only the audit trail (and so the operator) records the trip.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectAgent, listenForAgents, registerAgentWith } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { decisionsOfCredential, type RecordedDecision } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let base: string;
/** Planted with a policy that lists the canary table among its allowed tables. */
let trapped: AgentSecrets;
/** The same allowlist without the canary table, and no honeytokens. */
let plain: AgentSecrets;
let trappedMcp: Client;
let plainMcp: Client;
const honeytokenIds: string[] = [];

const ALLOWED = ['public.orders', 'public.customers'];

async function plant(payload: Record<string, unknown>): Promise<string> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/honeytokens`, payload });
  expect(response.statusCode, response.body).toBe(201);
  return (response.json() as { id: string }).id;
}

async function upstreamCount(sql: string): Promise<number> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>(sql)).rows[0]!.n;
  } finally {
    await client.end();
  }
}

/** Everything a pg error carries that a client can see, as one comparable value. */
type WireError = Record<string, unknown>;
const ERROR_FIELDS = ['severity', 'code', 'message', 'detail', 'hint', 'position', 'internalPosition', 'internalQuery', 'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'file', 'line', 'routine'] as const;

async function wireError(secrets: AgentSecrets, query: string | pg.QueryConfig): Promise<WireError> {
  const client = new pg.Client({ connectionString: secrets.connection_string });
  await client.connect();
  try {
    const error = (await client.query(query).then(
      () => ({}),
      (e: unknown) => e,
    )) as Record<string, unknown>;
    // The session lives on, as after any refusal.
    expect((await client.query('select 1::int as one')).rows).toEqual([{ one: 1 }]);
    return Object.fromEntries(ERROR_FIELDS.map((field) => [field, error[field]]));
  } finally {
    await client.end();
  }
}

/** The value with one table name replaced by another wherever it appears. */
function renamed<T>(value: T, from: string, to: string): T {
  return JSON.parse(JSON.stringify(value).split(from).join(to)) as T;
}

/** The decisions of a credential, once one for `sql` has arrived. */
async function decisionsWith(secrets: AgentSecrets, sql: string): Promise<RecordedDecision[]> {
  await waitFor(() => decisionsOfCredential(gateway, secrets.credential.id).some((d) => d.sql === sql), 3_000, `the decision on ${sql}`);
  return decisionsOfCredential(gateway, secrets.credential.id);
}

const tool = (client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> => callTool(client, name, args);

beforeAll(async () => {
  gateway = await startGateway('honeytoken_disguise');
  const seed = new pg.Client({ connectionString: gateway.upstream.url });
  await seed.connect();
  await seed.query(`create table api_keys (id int primary key, secret text not null); insert into api_keys values (1, 'sk_live_canary');
    create table secrets (id int primary key, token text not null); insert into secrets values (1, 'tok');
    alter table customers add column ssn text`);
  await seed.end();
  honeytokenIds.push(await plant({ kind: 'table', target: 'public.api_keys' }));
  honeytokenIds.push(await plant({ kind: 'column', target: 'public.customers.ssn' }));
  honeytokenIds.push(await plant({ kind: 'value', target: 'canary-4411@example.com' }));
  trapped = await registerAgentWith(gateway, { name: 'trapped', read_only: true, allowed_tables: [...ALLOWED, 'public.api_keys'], honeytokens: honeytokenIds });
  plain = await registerAgentWith(gateway, { name: 'plain', read_only: true, allowed_tables: ALLOWED });
  base = await listenForAgents(gateway);
  trappedMcp = await connectAgent(`${base}/mcp`, trapped.mcp_token, 'trapped');
  plainMcp = await connectAgent(`${base}/mcp`, plain.mcp_token, 'plain');
});
afterAll(async () => {
  await trappedMcp?.close();
  await plainMcp?.close();
  await gateway?.stop();
});

describe('a table honeytoken on the wire', () => {
  it('is refused exactly as a table off the allowlist (simple protocol), and as the same table under a policy without it', async () => {
    const trap = await wireError(trapped, 'select secret from api_keys');
    const offList = await wireError(trapped, 'select token from secrets');
    expect(trap).toEqual(renamed(renamed(offList, 'public.secrets', 'public.api_keys'), 'token', 'secret'));
    expect(trap).toMatchObject({ code: '42501', message: 'table public.api_keys is not in the allowed tables (public.orders, public.customers); query only those (rule allowed_tables.not_allowed).' });
    expect(await wireError(plain, 'select secret from api_keys')).toEqual(trap);
  });

  it('is refused exactly as a table off the allowlist (extended protocol)', async () => {
    const trap = await wireError(trapped, { text: 'select secret from api_keys where id = $1', values: [1] });
    const offList = await wireError(trapped, { text: 'select token from secrets where id = $1', values: [1] });
    expect(trap).toEqual(renamed(renamed(offList, 'public.secrets', 'public.api_keys'), 'token', 'secret'));
    expect(await wireError(plain, { text: 'select secret from api_keys where id = $1', values: [1] })).toEqual(trap);
  });

  it('leaves the truth in the audit trail: canary_tripped, honeytoken.table, the table blocked', async () => {
    await wireError(trapped, 'select id from public.api_keys where id = 1');
    const trip = (await decisionsWith(trapped, 'select id from public.api_keys where id = 1')).find((d) => d.sql === 'select id from public.api_keys where id = 1');
    expect(trip).toMatchObject({ event: 'canary_tripped', decision_rule: 'honeytoken.table', tables_blocked: ['public.api_keys'] });
    expect(String(trip?.reason)).toContain(honeytokenIds[0]);
    const plainDecisions = await decisionsWith(plain, 'select secret from api_keys');
    expect(plainDecisions.find((d) => d.sql === 'select secret from api_keys')).toMatchObject({ event: 'blocked', decision_rule: 'allowed_tables.not_allowed' });
    expect(await upstreamCount('select count(*)::int as n from api_keys')).toBe(1);
  });
});

describe('column and value honeytokens on the wire', () => {
  it('a column honeytoken is answered as its table off the allowlist would be', async () => {
    const trap = await wireError(trapped, 'select ssn from customers');
    const offList = await wireError(trapped, 'select ssn from secrets');
    // The quoted allowlist leaves out the table the refusal denies, so that the refusal does not contradict itself.
    expect(trap).toEqual(renamed(renamed(offList, 'public.secrets', 'public.customers'), 'public.orders, public.customers', 'public.orders'));
    expect(trap).toMatchObject({ code: '42501', message: 'table public.customers is not in the allowed tables (public.orders); query only those (rule allowed_tables.not_allowed).' });
  });

  it('a value honeytoken is answered as the tables it reads off the allowlist would be, on both protocols', async () => {
    const simple = await wireError(trapped, `select id from orders where customer = 'CANARY-4411@example.com'`);
    const extended = await wireError(trapped, { text: `select id from orders where customer = 'canary-4411@example.com' and id > $1`, values: [0] });
    const offList = await wireError(trapped, `select id from secrets where token = 'x'`);
    expect(simple).toEqual(renamed(renamed(offList, 'public.secrets', 'public.orders'), 'public.orders, public.customers', 'public.customers'));
    expect(extended).toEqual(simple);
    const decisions = await decisionsWith(trapped, `select id from orders where customer = 'canary-4411@example.com' and id > $1`);
    expect(decisions.filter((d) => d.decision_rule === 'honeytoken.value').map((d) => d.event)).toEqual(['canary_tripped', 'canary_tripped']);
    expect(decisions.filter((d) => d.decision_rule === 'honeytoken.column').map((d) => d.event)).toEqual(['canary_tripped']);
  });
});

describe('a honeytoken on the hosted MCP', () => {
  it('query, validate_sql and explain answer it as a table off the allowlist, byte for byte', async () => {
    for (const name of ['query', 'validate_sql', 'explain']) {
      const trap = await tool(trappedMcp, name, { sql: 'select secret from api_keys' });
      const offList = await tool(trappedMcp, name, { sql: 'select secret from secrets' });
      expect(trap, name).toEqual(renamed(offList, 'public.secrets', 'public.api_keys'));
      expect(await tool(plainMcp, name, { sql: 'select secret from api_keys' }), name).toEqual(trap);
      expect(JSON.stringify(trap), name).not.toMatch(/honeytoken|canary/i);
    }
    const validated = await tool(trappedMcp, 'validate_sql', { sql: 'select secret from api_keys' });
    expect(validated.structuredContent).toMatchObject({ allowed: false, event: 'blocked', decision_rule: 'allowed_tables.not_allowed', sqlstate: '42501', tables_blocked: ['public.api_keys'] });
    const queried = await tool(trappedMcp, 'query', { sql: 'select secret from api_keys' });
    expect(queried._meta?.['pgward/decision']).toMatchObject({ event: 'blocked', decision_rule: 'allowed_tables.not_allowed' });
  });

  it('column and value honeytokens too', async () => {
    const column = await tool(trappedMcp, 'query', { sql: 'select ssn from customers' });
    const offList = await tool(trappedMcp, 'query', { sql: 'select ssn from secrets' });
    expect(column).toEqual(renamed(renamed(offList, 'public.secrets', 'public.customers'), 'public.orders, public.customers', 'public.orders'));
    const value = await tool(trappedMcp, 'validate_sql', { sql: `select id from orders where customer = 'canary-4411@example.com'` });
    expect(value.structuredContent).toMatchObject({ event: 'blocked', decision_rule: 'allowed_tables.not_allowed', reason: 'table public.orders is not in the allowed tables (public.customers); query only those (rule allowed_tables.not_allowed).' });
  });

  it('describe_table, list_tables, schema_catalog and my_permissions show the canary table as they show a table off the allowlist: not at all', async () => {
    const described = await tool(trappedMcp, 'describe_table', { table: 'public.api_keys' });
    expect(described).toEqual(renamed(await tool(trappedMcp, 'describe_table', { table: 'public.secrets' }), 'public.secrets', 'public.api_keys'));
    expect(await tool(plainMcp, 'describe_table', { table: 'public.api_keys' })).toEqual(described);
    expect(await tool(trappedMcp, 'list_tables')).toEqual(await tool(plainMcp, 'list_tables'));
    expect(await tool(trappedMcp, 'schema_catalog')).toEqual(await tool(plainMcp, 'schema_catalog'));
    const permissions = (await tool(trappedMcp, 'my_permissions')).structuredContent as { policy: { allowed_tables: string[] } };
    expect(permissions.policy.allowed_tables).toEqual(ALLOWED);
    expect(JSON.stringify(permissions)).not.toMatch(/honeytoken|canary|api_keys/i);
  });

  it('search_docs and read_doc say nothing of honeytokens', async () => {
    for (const query of ['honeytoken', 'canary trap', 'canary_tripped', 'what happens when I touch a honeytoken']) {
      const found = await tool(trappedMcp, 'search_docs', { query });
      expect(JSON.stringify(found), query).not.toMatch(/honeytoken|canar|trap/i);
    }
    const failed = await tool(trappedMcp, 'read_doc', { doc_id: 'no-such-doc' });
    const docIds = /Documents: ([^;]+);/.exec(JSON.stringify(failed))?.[1]?.split(', ') ?? [];
    expect(docIds).toContain('policy');
    for (const docId of docIds) {
      const doc = await tool(trappedMcp, 'read_doc', { doc_id: docId });
      expect(doc.isError, docId).toBeFalsy();
      expect(JSON.stringify(doc), docId).not.toMatch(/honeytoken|canar/i);
    }
  });

  it('records the truth for the operator: canary_tripped with its honeytoken rule, from the MCP source', async () => {
    const rules = () => new Set(decisionsOfCredential(gateway, trapped.credential.id).filter((d) => d.source === 'mcp' && d.event === 'canary_tripped').map((d) => d.decision_rule));
    await waitFor(() => rules().size === 3, 3_000, 'the MCP trips of all three honeytokens');
    expect(rules()).toEqual(new Set(['honeytoken.table', 'honeytoken.column', 'honeytoken.value']));
    expect(await upstreamCount('select count(*)::int as n from api_keys')).toBe(1);
  });
});
