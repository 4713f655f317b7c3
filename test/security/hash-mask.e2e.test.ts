/**
 * The `hash` mask is a keyed hash per project (HMAC-SHA-256 under a key generated once and kept
 * sealed): stable across queries, sessions and protocols in one project, different in another,
 * joinable, and its key is never shown to an agent or an operator (runs_as of validate_sql and the
 * what-if, EXPLAIN, errors, the audit trail's text). node-postgres simple and extended, MCP.
 */
import { createHash, createHmac } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKeyOf } from '../../proxy/policy/hash-key.js';
import { openSecret, parseKeyring } from '../../src/crypto/seal.js';
import { decodeWith } from '../../src/events/envelope.js';
import { ProjectHashKeyGenerated } from '../../src/events/projects.js';
import type { AgentSecrets } from '../support/gateway.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { callTool, listenForAgents, withAgentMcp } from '../support/agent-mcp.js';
import { admin } from '../support/pg.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let base: string;
let otherProjectId: string;
const agents: Record<'here' | 'again' | 'there', AgentSecrets> = {} as never;

const POLICY = {
  name: 'hashed',
  read_only: true,
  allowed_tables: ['public.customers', 'public.contacts'],
  masked_columns: { 'public.customers.email': 'hash', 'public.contacts.email': 'hash' },
};
const EMAIL_1 = 'user1@example.com';

async function created<T>(url: string, payload: Record<string, unknown>): Promise<T> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url, payload });
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as T;
}

async function agentIn(projectId: string, name: string): Promise<AgentSecrets> {
  const policy = await created<{ id: string }>(`/v1/projects/${projectId}/policies`, { ...POLICY, name });
  return created<AgentSecrets>(`/v1/projects/${projectId}/agents`, { name, policy_profile_id: policy.id });
}

/** The project's key, as only the gateway can read it: opened from its stream with the master key. */
async function projectKey(projectId: string): Promise<Buffer> {
  const [event] = await gateway.api.store.readStream(`hashkey-${projectId}`);
  const { data } = decodeWith(ProjectHashKeyGenerated, event!);
  return Buffer.from(openSecret(data.key, parseKeyring(gateway.api.masterKey), `hash-key:${projectId}`), 'hex');
}

/** Every spelling of the key an agent could be shown: the key and its HMAC pads, hex. */
async function keyTexts(projectId: string): Promise<string[]> {
  const key = await projectKey(projectId);
  const { inner, outer } = hashKeyOf(key);
  return [key.toString('hex'), inner, outer];
}

async function wire<T extends pg.QueryResultRow>(agent: AgentSecrets, sql: string, values?: unknown[]): Promise<pg.QueryResult<T>> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  await client.connect();
  try {
    return await client.query<T>(sql, values);
  } finally {
    await client.end();
  }
}

async function wireError(agent: AgentSecrets, sql: string): Promise<{ code: string; message: string; detail?: string; hint?: string; where?: string }> {
  return wire(agent, sql).then(
    () => expect.fail(`${sql} should fail`),
    (error: pg.DatabaseError) => ({ code: error.code!, message: error.message, ...(error.detail ? { detail: error.detail } : {}), ...(error.hint ? { hint: error.hint } : {}), ...(error.where ? { where: error.where } : {}) }),
  );
}

beforeAll(async () => {
  gateway = await startGateway('hash_mask');
  base = await listenForAgents(gateway);
  await admin(gateway.upstream.url, (client) =>
    client.query(`create table contacts (customer_id int primary key, email text not null);
      insert into contacts select g, 'user' || g || '@example.com' from generate_series(1, 10, 3) g;`),
  );
  const target = new URL(gateway.upstream.url);
  const database = { host: target.hostname, port: Number(target.port || 5432), name: target.pathname.slice(1), username: decodeURIComponent(target.username), password: decodeURIComponent(target.password) || 'trust', ssl_mode: 'disable' };
  otherProjectId = (await created<{ project: { id: string } }>('/v1/projects', { name: 'other', org_id: gateway.owner.orgId, database })).project.id;
  agents.here = await agentIn(gateway.projectId, 'here');
  agents.again = await agentIn(gateway.projectId, 'again');
  agents.there = await agentIn(otherProjectId, 'there');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('a keyed, stable hash', () => {
  it('is HMAC-SHA-256 of the value under the project’s key, never a plain SHA-256', async () => {
    const { rows } = await wire<{ email: string }>(agents.here, 'SELECT email FROM customers WHERE id = 1');
    const key = await projectKey(gateway.projectId);
    expect(key.length).toBe(32);
    expect(rows).toEqual([{ email: createHmac('sha256', key).update(EMAIL_1).digest('hex') }]);
    expect(rows[0]!.email).not.toBe(createHash('sha256').update(EMAIL_1).digest('hex'));
  });

  it('is the same across queries, sessions, credentials, protocols and MCP in one project', async () => {
    const simple = (await wire<{ email: string }>(agents.here, 'SELECT email FROM customers WHERE id = 1')).rows[0]!.email;
    const extended = (await wire<{ email: string }>(agents.again, 'SELECT email FROM customers WHERE id = $1', [1])).rows[0]!.email;
    const other = (await wire<{ h: string }>(agents.here, 'SELECT c.email AS h FROM customers c ORDER BY c.id LIMIT 1')).rows[0]!.h;
    const mcp = await withAgentMcp(`${base}/mcp`, agents.again, async (client) => (await callTool(client, 'query', { sql: 'SELECT email FROM customers WHERE id = 1' })).structuredContent as { rows: unknown[][] });
    expect(new Set([simple, extended, other, String(mcp.rows[0]![0])]).size).toBe(1);
  });

  it('differs in another project, for the same value of the same database', async () => {
    const here = (await wire<{ email: string }>(agents.here, 'SELECT email FROM customers WHERE id = 1')).rows[0]!.email;
    const there = (await wire<{ email: string }>(agents.there, 'SELECT email FROM customers WHERE id = 1')).rows[0]!.email;
    expect(there).not.toBe(here);
    expect(there).toBe(createHmac('sha256', await projectKey(otherProjectId)).update(EMAIL_1).digest('hex'));
  });

  it('joins and compares on the hashed value', async () => {
    const joined = await wire<{ id: number; customer_id: number }>(agents.here, 'SELECT c.id, k.customer_id FROM customers c JOIN contacts k ON k.email = c.email ORDER BY c.id');
    expect(joined.rows).toEqual([1, 4, 7, 10].map((id) => ({ id, customer_id: id })));
    const hashed = (await wire<{ email: string }>(agents.here, 'SELECT email FROM customers WHERE id = 4')).rows[0]!.email;
    expect((await wire<{ id: number }>(agents.here, 'SELECT id FROM customers WHERE email = $1', [hashed])).rows).toEqual([{ id: 4 }]);
    expect((await wire(agents.here, `SELECT id FROM customers WHERE email = '${EMAIL_1}'`)).rows).toEqual([]);
  });
});

describe('the key is never shown', () => {
  it('not in validate_sql’s runs_as, nor in the what-if’s', async () => {
    const secrets = await keyTexts(gateway.projectId);
    const sql = 'SELECT id, upper(email) AS e FROM customers WHERE email IS NOT NULL';
    const validated = await withAgentMcp(`${base}/mcp`, agents.here, async (client) => (await callTool(client, 'validate_sql', { sql })).structuredContent as { runs_as: string });
    const whatIf = (await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies/evaluate`, payload: { policy: POLICY, sql } })).json() as { runs_as: string };
    const shown = "pg_catalog.encode(pg_catalog.sha256(pg_catalog.byteacat(pg_catalog.decode('<project hash key>', 'hex'), pg_catalog.sha256(pg_catalog.byteacat(pg_catalog.decode('<project hash key>', 'hex'), pg_catalog.convert_to(email::text, 'UTF8'))))), 'hex')";
    expect(whatIf.runs_as).toBe(`SELECT id, pg_catalog.upper(${shown}) AS e FROM customers WHERE ${shown} IS NOT NULL`);
    expect(validated.runs_as).toBe(whatIf.runs_as);
    for (const secret of secrets) expect(JSON.stringify([validated, whatIf])).not.toContain(secret);
  });

  it('EXPLAIN of a hashed statement is refused, on the wire and by the MCP explain tool', async () => {
    const secrets = await keyTexts(gateway.projectId);
    for (const sql of ['EXPLAIN SELECT email FROM customers', 'EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM customers WHERE email = $1']) {
      const refused = await wireError(agents.here, sql);
      expect(refused).toMatchObject({ code: '42501', message: expect.stringContaining('rule masked_columns.explain') });
      for (const secret of secrets) expect(JSON.stringify(refused)).not.toContain(secret);
    }
    const explained = await withAgentMcp(`${base}/mcp`, agents.here, async (client) => callTool(client, 'explain', { sql: 'SELECT id FROM customers WHERE email IS NOT NULL' }));
    expect(explained.isError).toBe(true);
    expect(JSON.stringify(explained)).toContain('masked_columns.explain');
    for (const secret of secrets) expect(JSON.stringify(explained)).not.toContain(secret);
    // EXPLAIN of a statement no hash mask applies to still plans.
    expect((await wire(agents.here, 'EXPLAIN SELECT id FROM customers')).rows.length).toBeGreaterThan(0);
  });

  it('not in upstream errors of hashed statements, on the wire and on MCP', async () => {
    const secrets = await keyTexts(gateway.projectId);
    const failing = ['SELECT email::int FROM customers', 'SELECT 1 / (length(email) - 64) FROM customers', "SELECT email FROM customers WHERE email::date > '2020-01-01'", 'SELECT substr(email, -1, -1) FROM customers'];
    for (const sql of failing) {
      const error = await wireError(agents.here, sql);
      for (const secret of secrets) expect(JSON.stringify(error), sql).not.toContain(secret);
      const mcp = await withAgentMcp(`${base}/mcp`, agents.here, async (client) => callTool(client, 'query', { sql }));
      expect(mcp.isError, sql).toBe(true);
      for (const secret of secrets) expect(JSON.stringify(mcp), sql).not.toContain(secret);
    }
  });

  it('not in the audit trail’s text, which keeps the statement as sent', async () => {
    const secrets = await keyTexts(gateway.projectId);
    const sql = 'SELECT id FROM customers WHERE email IS NOT NULL ORDER BY email';
    await wire(agents.here, sql);
    const recorded = () => gateway.decisions.map((d) => d.decision as { sql?: string; normalized_sql?: string; reason?: string } | undefined).filter((d) => d?.sql !== undefined);
    await waitFor(() => recorded().some((d) => d!.sql === sql), 3_000, 'the decision on the hashed statement');
    expect(recorded().length).toBeGreaterThan(20);
    for (const secret of secrets) expect(JSON.stringify(recorded())).not.toContain(secret);
  });
});

describe('no keyed-hash oracle', () => {
  // Before: each name also bound to customers.email (an outer level, or an alias reused), so the gateway hashed the agent's own guess under the project's key.
  const oracles = [
    `SELECT (SELECT email FROM (VALUES ('${EMAIL_1}')) v(email)) AS h FROM customers WHERE id = 1`,
    `WITH v(email) AS (VALUES ('${EMAIL_1}')) SELECT (SELECT email FROM v) AS h FROM customers WHERE id = 1`,
    `SELECT id FROM customers WHERE email IN (SELECT email FROM (VALUES ('${EMAIL_1}')) v(email))`,
    `SELECT (SELECT c.email FROM (VALUES ('${EMAIL_1}')) c(email)) AS h FROM customers c WHERE c.id = 1`,
  ];

  it('a hash is never computed on a value another FROM item supplies: refused on the wire (simple, extended) and MCP', async () => {
    const digest = createHmac('sha256', await projectKey(gateway.projectId)).update(EMAIL_1).digest('hex');
    for (const sql of oracles) {
      for (const queryMode of ['simple', 'extended'] as const) {
        const client = new pg.Client({ connectionString: agents.here.connection_string });
        await client.connect();
        const outcome = await client.query({ text: sql, queryMode } as pg.QueryConfig).then(
          (result) => ({ rows: result.rows }),
          (error: pg.DatabaseError) => ({ code: error.code, message: error.message }),
        );
        await client.end();
        expect(outcome, `${queryMode}: ${sql}`).toEqual({ code: '42501', message: expect.stringContaining('masked with hash, or a column of another FROM item as near to it') as unknown });
        expect((outcome as { message: string }).message).toContain('(rule masked_columns.ambiguous)');
      }
      const mcp = await withAgentMcp(`${base}/mcp`, agents.here, async (client) => callTool(client, 'query', { sql }));
      expect(mcp.isError, sql).toBe(true);
      expect(JSON.stringify(mcp)).toContain('decision_rule masked_columns.ambiguous, SQLSTATE 42501');
      expect(JSON.stringify(mcp)).not.toContain(digest);
    }
  });

  it('the column itself, qualified or alone in its scope, still reads hashed', async () => {
    const digest = createHmac('sha256', await projectKey(gateway.projectId)).update(EMAIL_1).digest('hex');
    expect((await wire(agents.here, 'SELECT c.email FROM customers c JOIN contacts k ON k.customer_id = c.id WHERE c.id = 1')).rows).toEqual([{ email: digest }]);
    expect((await wire(agents.here, 'SELECT (SELECT c.email FROM contacts k WHERE k.customer_id = c.id) AS h FROM customers c WHERE c.id = 1')).rows).toEqual([{ h: digest }]);
  });
});
