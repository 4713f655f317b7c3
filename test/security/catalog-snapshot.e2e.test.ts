/**
 * Every decision is made on the upstream catalog snapshot, through the real proxy and the hosted
 * MCP: when the catalog cannot be read, statements are refused (rule catalog.unavailable, SQLSTATE
 * 58000) and audited, never decided without it; once it can, they run. DDL the gateway forwards is
 * followed by a fresh read, so a decision never rests on the catalog as it was before it.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { connectAgentClient } from '../support/proxy-agents.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let mcpUrl: string;
const role = `catalog_blind_${randomBytes(3).toString('hex')}`;

/** A second project on the same upstream database, logging in as `role`, and an agent of it under `policy`. */
async function agentAsRole(policy: Record<string, unknown>): Promise<AgentSecrets> {
  const target = new URL(gateway.upstream.url);
  const created = await gateway.api.call(gateway.owner.apiKey, {
    method: 'POST',
    url: '/v1/projects',
    payload: {
      name: `as ${role}`,
      org_id: gateway.owner.orgId,
      database: { host: target.hostname, port: Number(target.port || 5432), name: target.pathname.slice(1), username: role, password: 'unused', ssl_mode: 'disable' },
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  const projectId = (created.json() as { project: { id: string } }).project.id;
  const policyCreated = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: policy });
  expect(policyCreated.statusCode, policyCreated.body).toBe(201);
  const registered = await gateway.api.call(gateway.owner.apiKey, {
    method: 'POST',
    url: `/v1/projects/${projectId}/agents`,
    payload: { name: String(policy.name), policy_profile_id: (policyCreated.json() as { id: string }).id },
  });
  expect(registered.statusCode, registered.body).toBe(201);
  return registered.json() as AgentSecrets;
}

const withMcp = <T>(agent: AgentSecrets, work: (client: Client) => Promise<T>): Promise<T> => withAgentMcp(mcpUrl, agent, work);

beforeAll(async () => {
  gateway = await startGateway('catalog_snapshot');
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
  // The role may read orders, but not pg_inherits: the gateway cannot read the catalog as it.
  await admin(gateway.upstream.url, (client) => client.query(`create role ${role} login; grant select on orders to ${role}; revoke select on pg_catalog.pg_inherits from public`));
});
afterAll(async () => {
  await admin(gateway.upstream.url, (client) => client.query(`grant select on pg_catalog.pg_inherits to public; drop owned by ${role}`)).catch(() => undefined);
  await gateway?.stop();
  await admin(gateway.upstream.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), (client) => client.query(`drop role if exists ${role}`)).catch(() => undefined);
});

describe('when the upstream catalog cannot be read', () => {
  it('every statement is refused with catalog.unavailable (58000) on the wire and the hosted MCP, audited; once it can, they run', async () => {
    const agent = await agentAsRole({ name: 'blind reader', read_only: true, allowed_tables: ['public.orders'] });
    const client = await connectAgentClient(agent);
    try {
      for (const query of ['select id from orders where id = 1', { text: 'select id from orders where id = 1', queryMode: 'extended' } as pg.QueryConfig, 'select 1 as one']) {
        const error = await client.query(query as string).then(() => undefined, (e: { code?: string; message: string }) => e);
        expect(error?.code).toBe('58000');
        expect(error?.message).toMatch(/^the gateway cannot read the upstream database’s catalog, which it needs to decide statements safely: reading it failed: .*permission denied for table pg_inherits.* \(rule catalog\.unavailable\); retry shortly$/);
      }
      await withMcp(agent, async (mcp) => {
        const result = await callTool(mcp, 'query', { sql: 'select id from orders where id = 1' });
        expect(result.isError).toBe(true);
        expect(textOf(result)).toMatch(/^Refused by the policy \(decision_rule catalog\.unavailable, SQLSTATE 58000\): the gateway cannot read the upstream database’s catalog/);
        const verdict = (await callTool(mcp, 'validate_sql', { sql: 'select 1' })).structuredContent as Record<string, unknown>;
        expect(verdict).toMatchObject({ allowed: false, decision_rule: 'catalog.unavailable', sqlstate: '58000', runs_as: null });
      });
      const audited = await gateway.decisionsOf(agent.credential.id, 3);
      expect(audited.filter((d) => d.decision_rule === 'catalog.unavailable' && d.event === 'blocked').length).toBeGreaterThanOrEqual(3);

      await admin(gateway.upstream.url, (other) => other.query('grant select on pg_catalog.pg_inherits to public'));
      // The next statement asks for a fresh read; the one after it runs.
      await waitFor(async () => (await client.query('select id from orders where id = 1').then((r) => r.rows, () => [])).length === 1, 5_000, 'statements to run again');
      await withMcp(agent, async (mcp) => {
        const result = await callTool(mcp, 'query', { sql: 'select id from orders where id = 1' });
        expect(result.isError).toBeFalsy();
        expect((result.structuredContent as { rows: unknown[] }).rows).toEqual([[1]]);
      });
    } finally {
      await client.end();
      await admin(gateway.upstream.url, (other) => other.query('revoke select on pg_catalog.pg_inherits from public'));
    }
  });
});

describe('after DDL the gateway forwards', () => {
  it('the catalog is read again: a child the owner added since the last read is no longer reached once the agent’s DDL committed (wire and MCP)', async () => {
    const agent = await registerAgentWith(gateway, { name: 'migrator', read_only: false, allowed_tables: ['public.*'] });
    await admin(gateway.upstream.url, (client) => client.query('grant select on pg_catalog.pg_inherits to public; create table ledger (id int); insert into ledger values (1)'));
    const client = await connectAgentClient(agent);
    try {
      await withMcp(agent, async (mcp) => {
        expect(((await callTool(mcp, 'validate_sql', { sql: 'select id from ledger' })).structuredContent as { runs_as: string }).runs_as).toBe('select id from ledger');
      });
      // Added outside the gateway after both snapshots were read: neither knows it yet.
      await admin(gateway.upstream.url, (other) => other.query('create table ledger_child () inherits (ledger); insert into ledger_child values (2)'));
      expect((await client.query('select id from ledger order by id')).rows).toEqual([{ id: 1 }, { id: 2 }]);
      await client.query('begin');
      await client.query('create table scratch (id int)');
      await client.query('commit');
      await waitFor(async () => (await client.query('select id from ledger order by id')).rows.length === 1, 3_000, 'the catalog read after the DDL');
      await withMcp(agent, async (mcp) => {
        expect((await callTool(mcp, 'query', { sql: 'create table scratch2 (id int)' })).isError).toBeFalsy();
        await waitFor(
          async () => ((await callTool(mcp, 'validate_sql', { sql: 'select id from ledger' })).structuredContent as { runs_as: string }).runs_as === 'SELECT id FROM ONLY ledger',
          3_000,
          'the MCP catalog read after the DDL',
        );
      });
    } finally {
      await client.end();
    }
  });
});
