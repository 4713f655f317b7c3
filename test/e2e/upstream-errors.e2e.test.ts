/**
 * Issue 18, item 4: an upstream that cannot be connected to is answered by what is wrong. Each
 * case is a real failure of a real connection (a host under .invalid that the resolver refuses, a
 * NOLOGIN role, a database that does not exist, a port nobody listens on, a role whose connection
 * limit is 0), seen through node-postgres on the wire and the MCP SDK client: the exact SQLSTATE
 * and wording, "retry" only when retrying can help, none of the operator's connection details, the
 * classified reason in the audit trail, and the cause logged once, structured.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { freePort } from '../support/free-port.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { captureLogs, duplicateKeys } from '../support/logs.js';
import { openSession, waitFor } from '../support/wire.js';

const logs = captureLogs();
let gateway: TestGateway;
let mcpUrl: string;
let upstream: URL;
const NOLOGIN = 'pgw_uperr_nologin';
const FULL = 'pgw_uperr_full';

const NOT_RETRYABLE = 'Retrying will not help: the gateway’s operator must correct the database’s settings.';

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A project of its own whose database is the test upstream with `override` applied, a read-only policy, and an agent under it. */
async function agentOn(name: string, override: Record<string, unknown>): Promise<{ agent: AgentSecrets; databaseId: string; projectId: string }> {
  const database = { host: upstream.hostname, port: Number(upstream.port || 5432), name: upstream.pathname.slice(1), username: decodeURIComponent(upstream.username), password: 'trust', ssl_mode: 'disable', ...override };
  const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: '/v1/projects', payload: { name, org_id: gateway.owner.orgId, database } });
  expect(created.statusCode, created.body).toBe(201);
  const { project, database: registered } = created.json() as { project: { id: string }; database: { id: string } };
  const policy = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${project.id}/policies`, payload: { name: 'reader', read_only: true, allowed_tables: ['public.*'] } });
  expect(policy.statusCode, policy.body).toBe(201);
  const agent = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${project.id}/agents`, payload: { name, policy_profile_id: (policy.json() as { id: string }).id } });
  expect(agent.statusCode, agent.body).toBe(201);
  return { agent: agent.json() as AgentSecrets, databaseId: registered.id, projectId: project.id };
}

async function loginFailure(agent: AgentSecrets): Promise<{ code?: string; severity?: string; message: string }> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  client.on('error', () => undefined);
  const error = await client.connect().then(
    () => client.end().then(() => undefined),
    (e: unknown) => e as { code?: string; severity?: string; message: string },
  );
  if (!error) throw new Error('the login succeeded');
  return { code: error.code, severity: error.severity, message: error.message };
}

beforeAll(async () => {
  gateway = await startGateway('upstream_errors', undefined, 60_000, {}, logs.logger);
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
  upstream = new URL(gateway.upstream.url);
  await admin(`drop role if exists ${NOLOGIN}; drop role if exists ${FULL}; create role ${NOLOGIN} nologin; create role ${FULL} login connection limit 0`);
});
afterAll(async () => {
  await admin(`drop role if exists ${NOLOGIN}; drop role if exists ${FULL}`).catch(() => undefined);
  await gateway?.stop();
});

interface Case {
  readonly name: string;
  /** What differs from the test upstream's settings (made when the case runs). */
  readonly override: () => Promise<Record<string, unknown>> | Record<string, unknown>;
  readonly reason: string;
  readonly sqlstate: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly cause: RegExp;
  readonly causeCode: string;
}

const cases: Case[] = [
  {
    name: 'a host name that does not resolve',
    override: () => ({ host: 'db.pgward-upstream.invalid' }),
    reason: 'dns_not_found',
    sqlstate: '08004',
    message: `the gateway cannot reach this credential’s database: its configured host name does not resolve. ${NOT_RETRYABLE}`,
    retryable: false,
    cause: /^upstream [^@]+@db\.pgward-upstream\.invalid:\d+\/[a-z0-9_]+: getaddrinfo ENOTFOUND db\.pgward-upstream\.invalid$/,
    causeCode: 'ENOTFOUND',
  },
  {
    name: 'a role that may not log in (28000)',
    override: () => ({ username: NOLOGIN }),
    reason: 'auth_failed',
    sqlstate: '08004',
    message: `the gateway could not log in to this credential’s database: the database refused the login the gateway is configured with (upstream SQLSTATE 28000). ${NOT_RETRYABLE}`,
    retryable: false,
    cause: new RegExp(`^upstream ${NOLOGIN}@127\\.0\\.0\\.1:\\d+/[a-z0-9_]+: role "${NOLOGIN}" is not permitted to log in \\(SQLSTATE 28000\\)$`),
    causeCode: '28000',
  },
  {
    name: 'a database that does not exist (3D000)',
    override: () => ({ name: 'pgw_uperr_absent' }),
    reason: 'database_missing',
    sqlstate: '08004',
    message: `the gateway could not connect to this credential’s database: the configured database does not exist on the upstream server (upstream SQLSTATE 3D000). ${NOT_RETRYABLE}`,
    retryable: false,
    cause: /^upstream [^@]+@127\.0\.0\.1:\d+\/pgw_uperr_absent: database "pgw_uperr_absent" does not exist \(SQLSTATE 3D000\)$/,
    causeCode: '3D000',
  },
  {
    name: 'a port nobody listens on',
    override: async () => ({ port: await freePort() }),
    reason: 'refused',
    sqlstate: '08006',
    message: 'the gateway cannot reach this credential’s database: the connection was refused (the server may be down or restarting). Retry shortly.',
    retryable: true,
    cause: /^upstream [^@]+@127\.0\.0\.1:\d+\/[a-z0-9_]+: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
    causeCode: 'ECONNREFUSED',
  },
  {
    name: 'a role with no connection slots left (53300)',
    override: () => ({ username: FULL }),
    reason: 'too_many_connections',
    sqlstate: '53300',
    message: 'this credential’s database has no connection slots free. Retry shortly.',
    retryable: true,
    cause: new RegExp(`^upstream ${FULL}@127\\.0\\.0\\.1:\\d+/[a-z0-9_]+: too many connections for role "${FULL}" \\(SQLSTATE 53300\\)$`),
    causeCode: '53300',
  },
];

describe('an upstream the gateway cannot connect to', () => {
  it.each(cases)('$name: the wire and the MCP say what is wrong, the audit records why, the log has the cause once', async (c) => {
    const override = await c.override();
    const { agent, databaseId, projectId } = await agentOn(`uperr ${c.reason}`, override);
    const rule = `upstream.${c.reason}`;

    const wire = await loginFailure(agent);
    expect(wire).toEqual({ code: c.sqlstate, severity: 'FATAL', message: c.message });

    const mcp = await withAgentMcp(mcpUrl, agent, (client) => callTool(client, 'query', { sql: 'select 1 as one' }));
    expect(mcp.isError).toBe(true);
    expect(textOf(mcp)).toBe(`The statement did not run (decision_rule ${rule}, SQLSTATE ${c.sqlstate}): ${c.message}`);
    expect(mcp._meta?.['pgward/decision']).toEqual({ event: 'blocked', decision_rule: rule, reason: c.message, sqlstate: c.sqlstate, tables_blocked: [] });

    // Nothing of the operator's: no host, port, user or database name of the upstream.
    for (const told of [wire.message, textOf(mcp)]) {
      for (const detail of [String(override.host ?? upstream.hostname), String(override.port ?? upstream.port), String(override.username ?? decodeURIComponent(upstream.username)), String(override.name ?? upstream.pathname.slice(1))]) {
        expect(told).not.toContain(detail);
      }
    }

    const [login, statement] = await gateway.decisionsOf(agent.credential.id, 2);
    expect(login).toMatchObject({ event: 'auth_failed', source: 'wire', decision_rule: rule, reason: c.message, sql: '' });
    expect(statement).toMatchObject({ event: 'blocked', source: 'mcp', decision_rule: rule, reason: c.message, sql: 'select 1 as one' });

    const failures = logs.events('upstream_connect_failed').filter((line) => line.database === databaseId);
    // The wire's login read the catalog and then asked for a connection; the MCP read the catalog: one line per attempt.
    expect(failures.length).toBe(3);
    for (const line of failures) {
      expect(line).toMatchObject({ level: 40, event: 'upstream_connect_failed', database: databaseId, project: projectId, reason: c.reason, retryable: c.retryable, sqlstate: c.sqlstate, cause_code: c.causeCode, msg: 'could not connect to the upstream database' });
      expect(String(line.cause)).toMatch(c.cause);
      expect(line).not.toHaveProperty('err');
    }
    const refused = logs.events('login_refused').filter((line) => line.credential_id === agent.credential.id);
    expect(refused).toEqual([expect.objectContaining({ level: 40, source: 'wire', project_id: projectId, rule, reason: c.message, msg: 'login refused' })]);
    for (const line of logs.lines) expect(duplicateKeys(line)).toEqual([]);
  });
});

describe('an upstream that goes away under a live session', () => {
  it('the next statement on the wire and on the MCP is refused as retryable (08006), audited with its text, and the session lives on', async () => {
    const { agent, databaseId, projectId } = await agentOn('uperr moved', {});
    const { client, ended } = await openSession(agent.connection_string);
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await withAgentMcp(mcpUrl, agent, async (mcp) => expect((await callTool(mcp, 'query', { sql: 'select 2 as two' })).isError).toBeFalsy());

    const closed = await freePort();
    // In transaction pooling the session is between transactions: its connection is parked, lent back to the pool.
    const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${projectId}/databases/${databaseId}`, payload: { port: closed, password: 'trust' } });
    expect(patched.statusCode, patched.body).toBe(200);
    const message = 'the gateway cannot reach this credential’s database: the connection was refused (the server may be down or restarting). Retry shortly.';
    // A new login follows the database to its new port (and retires the pool the session parked its connection in).
    await waitFor(async () => (await loginFailure(agent).catch(() => undefined))?.code === '08006', 5_000, 'the proxy to follow the database to its new port');
    const failed = await client.query('select 3 as three').then(() => undefined, (e: unknown) => e as { code?: string; message: string });
    expect({ code: failed?.code, message: failed?.message }).toEqual({ code: '08006', message });
    expect(ended()).toBe(false);

    const mcp = await withAgentMcp(mcpUrl, agent, (client) => callTool(client, 'query', { sql: 'select 4 as four' }));
    expect(textOf(mcp)).toBe(`The statement did not run (decision_rule upstream.refused, SQLSTATE 08006): ${message}`);
    await client.end();

    const refusedOf = () => gateway.decisions.map((d) => d.decision as Record<string, unknown> | undefined).filter((d) => d?.credential_id === agent.credential.id && d.decision_rule === 'upstream.refused') as Record<string, unknown>[];
    await waitFor(() => refusedOf().length >= 3, 3_000, 'the refused login and both statements audited');
    // The wire's decisions keep their order; the MCP publishes on its own, so its entry may land between or before them.
    const bySource = (source: string) => refusedOf().filter((d) => d.source === source);
    expect([...bySource('wire'), ...bySource('mcp')].map((d) => ({ event: d.event, source: d.source, sql: d.sql, reason: d.reason, cache_status: d.cache_status }))).toEqual([
      { event: 'auth_failed', source: 'wire', sql: '', reason: message, cache_status: 'none' },
      { event: 'blocked', source: 'wire', sql: 'select 3 as three', reason: message, cache_status: 'none' },
      { event: 'blocked', source: 'mcp', sql: 'select 4 as four', reason: message, cache_status: 'none' },
    ]);
    const unavailable = logs.events('upstream_unavailable').filter((line) => line.credential_id === agent.credential.id);
    expect(unavailable.map((line) => ({ rule: line.rule, retryable: line.retryable, database: line.database }))).toEqual([
      { rule: 'upstream.refused', retryable: true, database: databaseId },
      { rule: 'upstream.refused', retryable: true, database: databaseId },
    ]);
  });
});
