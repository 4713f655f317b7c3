/**
 * Issue 18, item 5: every security event writes one structured log line with a stable `event`,
 * read here from pgward's own logger (src/logger.ts) as the proxy and the API of a real gateway
 * write it: honeytoken trips, sessions closed by a kill-switch or a revocation, policy changes,
 * spent budgets, refused logins, expired credentials. No line holds a secret or repeats a key.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { captureLogs, duplicateKeys } from '../support/logs.js';
import { openSession, waitFor } from '../support/wire.js';

const logs = captureLogs();
let gateway: TestGateway;
let mcpUrl: string;
const agents: AgentSecrets[] = [];

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** The event's lines about one credential (or, without one, all of them), once there are `count`. */
async function linesOf(event: string, count: number, credentialId?: string): Promise<Record<string, unknown>[]> {
  const of = () => logs.events(event).filter((line) => credentialId === undefined || line.credential_id === credentialId);
  await waitFor(() => of().length >= count, 3_000, `${count} ${event} lines`);
  return of();
}

async function agentWith(policy: Record<string, unknown>): Promise<AgentSecrets> {
  const agent = await registerAgentWith(gateway, policy);
  agents.push(agent);
  return agent;
}

async function failureOf(connectionString: string, sql: string): Promise<string | undefined> {
  const { client } = await openSession(connectionString);
  try {
    return await client.query(sql).then(() => undefined, (error: { code?: string }) => error.code);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  gateway = await startGateway('security_logs', undefined, 60_000, {}, logs.logger);
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

describe('security events in the log', () => {
  it('a tripped honeytoken: one honeytoken_tripped line per statement, wire and MCP', async () => {
    const planted = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/honeytokens`, payload: { kind: 'table', target: 'public.customers' } });
    expect(planted.statusCode, planted.body).toBe(201);
    const agent = await agentWith({ name: 'canary reader', read_only: true, allowed_tables: ['public.*'], honeytokens: [(planted.json() as { id: string }).id] });
    expect(await failureOf(agent.connection_string, 'select email from customers')).toBe('42501');
    await withAgentMcp(mcpUrl, agent, async (client) => expect((await callTool(client, 'query', { sql: 'select email from customers' })).isError).toBe(true));
    const lines = await linesOf('honeytoken_tripped', 2, agent.credential.id);
    expect(lines.map(({ level, source, project_id, rule, msg }) => ({ level, source, project_id, rule, msg }))).toEqual(
      ['wire', 'mcp'].map((source) => ({ level: 40, source, project_id: gateway.projectId, rule: 'honeytoken.table', msg: 'a statement touched a honeytoken' })),
    );
    for (const line of lines) expect(line.session).toEqual(expect.any(String));
  });

  it('a kill-switch and a revocation: sessions_closed, with how many sessions and why', async () => {
    const killed = await agentWith({ name: 'killed', read_only: true, allowed_tables: ['public.orders'] });
    const revoked = await agentWith({ name: 'revoked', read_only: true, allowed_tables: ['public.orders'] });
    const sessions = await Promise.all([openSession(killed.connection_string), openSession(killed.connection_string), openSession(revoked.connection_string)]);
    const disabled = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/agents/${killed.credential.id}`, payload: { status: 'disabled' } });
    expect(disabled.statusCode, disabled.body).toBe(200);
    const deleted = await gateway.api.call(gateway.owner.apiKey, { method: 'DELETE', url: `/v1/projects/${gateway.projectId}/agents/${revoked.credential.id}` });
    expect(deleted.statusCode, deleted.body).toBe(204);
    await waitFor(() => sessions.every((session) => session.ended()), 3_000, 'every session ended');
    expect(await linesOf('sessions_closed', 1, killed.credential.id)).toEqual([
      expect.objectContaining({ level: 40, project_id: gateway.projectId, sessions: 2, reason: 'the credential was disabled', msg: 'closed the live sessions of a credential that may no longer be used' }),
    ]);
    expect(await linesOf('sessions_closed', 1, revoked.credential.id)).toEqual([expect.objectContaining({ level: 40, project_id: gateway.projectId, sessions: 1, reason: 'the credential was revoked' })]);
  });

  it('a policy change: policy_changed, naming the policy, the change, its revision and who made it', async () => {
    const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: { name: 'changing', read_only: true, allowed_tables: ['public.orders'] } });
    const policyId = (created.json() as { id: string }).id;
    const updated = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${policyId}`, payload: { max_rows: 10 } });
    expect(updated.statusCode, updated.body).toBe(200);
    const deleted = await gateway.api.call(gateway.owner.apiKey, { method: 'DELETE', url: `/v1/projects/${gateway.projectId}/policies/${policyId}` });
    expect(deleted.statusCode, deleted.body).toBe(204);
    const lines = logs.events('policy_changed').filter((line) => line.policy_id === policyId);
    expect(lines.map(({ level, project_id, change, msg }) => ({ level, project_id, change, msg }))).toEqual(
      ['created', 'updated', 'deleted'].map((change) => ({ level: 30, project_id: gateway.projectId, change, msg: `policy ${change}` })),
    );
    // A deletion names the revision it deleted.
    expect(lines.map((line) => line.revision)).toEqual([0, 1, 1]);
    for (const line of lines) expect(line.actor).toMatch(/^api_key:/);
  });

  it('a spent budget: budget_exhausted for each refused statement, wire and MCP', async () => {
    const agent = await agentWith({ name: 'one a day', read_only: true, allowed_tables: ['public.orders'], queries_per_day: 1 });
    expect(await failureOf(agent.connection_string, 'select 1')).toBeUndefined();
    expect(await failureOf(agent.connection_string, 'select 2')).toBe('53400');
    await withAgentMcp(mcpUrl, agent, async (client) => expect((await callTool(client, 'query', { sql: 'select 3' })).isError).toBe(true));
    const lines = await linesOf('budget_exhausted', 2, agent.credential.id);
    expect(lines.map(({ level, source, project_id, rule, msg }) => ({ level, source, project_id, rule, msg }))).toEqual(
      ['wire', 'mcp'].map((source) => ({ level: 40, source, project_id: gateway.projectId, rule: 'budget.queries_per_day', msg: 'a statement was refused: a query budget is spent' })),
    );
  });

  it('a refused login: login_refused, on the wire (a wrong password) and the MCP (an unknown token)', async () => {
    const agent = await agentWith({ name: 'refused', read_only: true, allowed_tables: ['public.orders'] });
    const wrong = new URL(agent.connection_string);
    wrong.password = 'not-the-password';
    const client = new pg.Client({ connectionString: wrong.toString() });
    expect(await client.connect().then(() => undefined, (error: { code?: string }) => error.code)).toBe('28P01');
    expect(await linesOf('login_refused', 1, agent.credential.id)).toEqual([
      expect.objectContaining({ level: 40, source: 'wire', project_id: gateway.projectId, rule: 'auth.auth_failed', reason: 'wrong password or unknown user', msg: 'login refused' }),
    ]);
    const response = await fetch(mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer pgw_agt_${'x'.repeat(43)}` }, body: '{}' });
    expect(response.status).toBe(401);
    const mcp = logs.events('login_refused').filter((line) => line.source === 'mcp');
    expect(mcp).toEqual([expect.objectContaining({ level: 40, reason: 'the agent token is unknown, disabled, revoked, rotated away or expired', msg: 'agent token refused' })]);
  });

  it('an expired credential: credential_expired when its session ends and when it logs in again', async () => {
    const expiresAt = new Date(Date.now() + 1_500).toISOString();
    const registered = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents`, payload: { name: 'short-lived', policy_profile_id: gateway.policyId, expires_at: expiresAt } });
    const agent = registered.json() as AgentSecrets;
    agents.push(agent);
    const { ended } = await openSession(agent.connection_string);
    await waitFor(ended, 4_000, 'the session ended at expiry');
    const client = new pg.Client({ connectionString: agent.connection_string });
    expect(await client.connect().then(() => undefined, (error: { code?: string }) => error.code)).toBe('28P01');
    const lines = await linesOf('credential_expired', 2, agent.credential.id);
    expect(lines.map(({ level, source, project_id, rule, during }) => ({ level, source, project_id, rule, during }))).toEqual([
      { level: 30, source: 'wire', project_id: gateway.projectId, rule: 'credential.expired', during: 'session' },
      { level: 30, source: 'wire', project_id: gateway.projectId, rule: 'auth.credential_expired', during: 'login' },
    ]);
  });

  it('every line: ISO time, no key twice, no secret', () => {
    expect(logs.lines.length).toBeGreaterThan(20);
    for (const line of logs.lines) {
      expect(duplicateKeys(line)).toEqual([]);
      expect((JSON.parse(line) as { time: string }).time).toMatch(ISO_TIME);
      for (const agent of agents) {
        expect(line).not.toContain(agent.mcp_token);
        expect(line).not.toContain(decodeURIComponent(new URL(agent.connection_string).password));
      }
    }
  });
});
