/**
 * The API counts and times every request by its route's template, method and status code, and
 * both MCP servers count and time every tool call by tool and outcome (issue 18 item 6): read from
 * the API's /metrics after real requests, the agent MCP and the management MCP driven with the
 * official SDK client.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectAgent, listenForAgents, registerAgentWith, textOf } from '../support/agent-mcp.js';
import { freePort } from '../support/free-port.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;
let base: string;
let agent: AgentSecrets;

/** Every series of `name` in the API's /metrics, by its labels other than role. */
async function series(name: string): Promise<Record<string, number>> {
  const scraped = await fetch(`${base}/metrics`).then((response) => response.text());
  const out: Record<string, number> = {};
  for (const line of scraped.split('\n')) {
    const match = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (match?.[1] !== name) continue;
    const labels = match[2]!.split(',').filter((label) => !label.startsWith('role=') && !label.startsWith('le=')).join(',');
    out[labels] = (out[labels] ?? 0) + Number(match[3]);
  }
  return out;
}

beforeAll(async () => {
  gateway = await startGateway('served_metrics');
  base = await listenForAgents(gateway);
  agent = await registerAgentWith(gateway, { name: 'orders reader', read_only: true, allowed_tables: ['public.orders'] });
});
afterAll(async () => {
  await gateway?.stop();
});

describe('HTTP request metrics', () => {
  it('count and time each request by route template, method and status code: no id of a URL becomes a label', async () => {
    const key = { authorization: `Bearer ${gateway.owner.apiKey}` };
    const project = `/v1/projects/${gateway.projectId}`;
    const before = await series('pgward_http_requests_total');
    expect((await fetch(`${base}${project}`, { headers: key })).status).toBe(200);
    expect((await fetch(`${base}${project}`, { headers: key })).status).toBe(200);
    expect((await fetch(`${base}/v1/projects/prj_doesnotexist0000000000`, { headers: key })).status).toBe(404);
    expect((await fetch(`${base}${project}`)).status).toBe(401);
    expect((await fetch(`${base}/v1/nothing-here/${gateway.projectId}`, { headers: key })).status).toBe(404);
    expect((await fetch(`${base}/v1/projects`, { method: 'POST', headers: { ...key, 'content-type': 'application/json' }, body: '{"name":' })).status).toBe(400);

    const after = await series('pgward_http_requests_total');
    const added = Object.fromEntries(Object.entries(after).map(([labels, value]) => [labels, value - (before[labels] ?? 0)]).filter(([, value]) => value !== 0));
    expect(added).toEqual({
      'route="/v1/projects/:project_id",method="GET",status="200"': 2,
      'route="/v1/projects/:project_id",method="GET",status="404"': 1,
      'route="/v1/projects/:project_id",method="GET",status="401"': 1,
      'route="unmatched",method="GET",status="404"': 1,
      'route="/v1/projects",method="POST",status="400"': 1,
      // The scrape before this one.
      'route="/metrics",method="GET",status="200"': 1,
    });
    const scraped = await fetch(`${base}/metrics`).then((response) => response.text());
    expect(scraped).not.toContain(gateway.projectId);
    const timed = await series('pgward_http_request_duration_seconds_count');
    expect(timed['route="/v1/projects/:project_id",method="GET",status="200"']).toBe(after['route="/v1/projects/:project_id",method="GET",status="200"']);
  });
});

describe('MCP tool-call metrics', () => {
  it('the agent MCP: ran, refused by the policy, and error for an unknown tool (named unknown); its HTTP requests counted under its route', async () => {
    const client: Client = await connectAgent(`${base}/mcp`, agent.mcp_token, 'metrics-test');
    try {
      const before = await series('pgward_mcp_tool_calls_total');
      const httpBefore = await series('pgward_http_requests_total');
      const ran = await callTool(client, 'query', { sql: 'SELECT id FROM orders ORDER BY id LIMIT 2' });
      expect(ran.isError, textOf(ran)).toBeFalsy();
      expect((await callTool(client, 'query', { sql: 'DELETE FROM orders' })).isError).toBe(true);
      expect((await callTool(client, 'query', { sql: 'SELECT * FROM customers' })).isError).toBe(true);
      expect((await callTool(client, 'list_tables')).isError).toBeFalsy();
      await expect(callTool(client, 'drop_everything_please')).rejects.toThrow(/Unknown tool/);

      const after = await series('pgward_mcp_tool_calls_total');
      const added = Object.fromEntries(Object.entries(after).map(([labels, value]) => [labels, value - (before[labels] ?? 0)]).filter(([, value]) => value !== 0));
      expect(added).toEqual({
        'server="agent",tool="query",outcome="ran"': 1,
        'server="agent",tool="query",outcome="refused"': 2,
        'server="agent",tool="list_tables",outcome="ran"': 1,
        'server="agent",tool="unknown",outcome="error"': 1,
      });
      const timed = await series('pgward_mcp_tool_call_duration_seconds_count');
      expect(timed['server="agent",tool="query",outcome="refused"']).toBe(after['server="agent",tool="query",outcome="refused"']);
      const http = await series('pgward_http_requests_total');
      expect((http['route="/mcp",method="POST",status="200"'] ?? 0) - (httpBefore['route="/mcp",method="POST",status="200"'] ?? 0)).toBe(5);
    } finally {
      await client.close();
    }
  });

  it('the agent MCP: error when the database cannot be reached (nothing listens on its port)', async () => {
    const owner = gateway.owner.apiKey;
    const created = await gateway.api.call(owner, {
      method: 'POST',
      url: '/v1/projects',
      payload: { name: 'unreachable', org_id: gateway.owner.orgId, database: { host: '127.0.0.1', port: await freePort(), name: 'gone', username: 'postgres', password: 'pw' } },
    });
    expect(created.statusCode, created.body).toBe(201);
    const projectId = (created.json() as { project: { id: string } }).project.id;
    const policy = await gateway.api.call(owner, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'reader', read_only: true, allowed_tables: ['public.orders'] } });
    expect(policy.statusCode, policy.body).toBe(201);
    const registered = await gateway.api.call(owner, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'stranded', policy_profile_id: (policy.json() as { id: string }).id } });
    expect(registered.statusCode, registered.body).toBe(201);
    const client: Client = await connectAgent(`${base}/mcp`, (registered.json() as AgentSecrets).mcp_token, 'metrics-test');
    try {
      const before = await series('pgward_mcp_tool_calls_total');
      const listed = await callTool(client, 'list_tables');
      expect(listed.isError).toBe(true);
      expect(textOf(listed)).toMatch(/upstream\.refused/);
      const after = await series('pgward_mcp_tool_calls_total');
      const key = 'server="agent",tool="list_tables",outcome="error"';
      expect((after[key] ?? 0) - (before[key] ?? 0)).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('the management MCP: ran, and refused for a project that does not exist and for an operation that does not exist', async () => {
    const client: Client = await connectAgent(`${base}/v1/mcp`, gateway.owner.apiKey, 'metrics-test');
    try {
      const before = await series('pgward_mcp_tool_calls_total');
      expect((await callTool(client, 'search_endpoints', { query: 'list projects' })).isError).toBeFalsy();
      expect((await callTool(client, 'call_endpoint', { operation_id: 'getProject', path_params: { project_id: gateway.projectId } })).isError).toBeFalsy();
      expect((await callTool(client, 'call_endpoint', { operation_id: 'getProject', path_params: { project_id: 'prj_doesnotexist0000000000' } })).isError).toBe(true);
      expect((await callTool(client, 'call_endpoint', { operation_id: 'noSuchOperation' })).isError).toBe(true);

      const after = await series('pgward_mcp_tool_calls_total');
      const added = Object.fromEntries(Object.entries(after).map(([labels, value]) => [labels, value - (before[labels] ?? 0)]).filter(([, value]) => value !== 0));
      expect(added).toEqual({
        'server="management",tool="search_endpoints",outcome="ran"': 1,
        'server="management",tool="call_endpoint",outcome="ran"': 1,
        'server="management",tool="call_endpoint",outcome="refused"': 2,
      });
    } finally {
      await client.close();
    }
  });
});
