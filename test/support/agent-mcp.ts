import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import type { AgentSecrets, TestGateway } from './gateway.js';

/** Creates a policy through the API and registers an agent under it (named as the policy). */
export async function registerAgentWith(gateway: TestGateway, policy: Record<string, unknown>): Promise<AgentSecrets> {
  const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: policy });
  expect(created.statusCode, created.body).toBe(201);
  const registered = await gateway.api.call(gateway.owner.apiKey, {
    method: 'POST',
    url: `/v1/projects/${gateway.projectId}/agents`,
    payload: { name: String(policy.name), policy_profile_id: (created.json() as { id: string }).id },
  });
  expect(registered.statusCode, registered.body).toBe(201);
  return registered.json() as AgentSecrets;
}

/** One agent for each policy (registerAgentWith), by the policies' keys. */
export async function registerAgentsWith<K extends string>(gateway: TestGateway, policies: Readonly<Record<K, Record<string, unknown>>>): Promise<Record<K, AgentSecrets>> {
  const agents = {} as Record<K, AgentSecrets>;
  for (const key of Object.keys(policies) as K[]) agents[key] = await registerAgentWith(gateway, policies[key]);
  return agents;
}

/** An MCP SDK client connected to `url` with an agent token. */
export async function connectAgent(url: string, token: string, name: string): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

export async function callTool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** The text of a tool result's first content item. */
export function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

/** Starts the gateway's HTTP API on a free port and gives the URL agents reach its hosted MCP at. */
export async function listenForAgents(gateway: TestGateway): Promise<string> {
  await gateway.api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = gateway.api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  return `http://127.0.0.1:${address.port}`;
}

/** Runs `work` with an MCP client of the agent, then closes it. */
export async function withAgentMcp<T>(url: string, agent: AgentSecrets, work: (client: Client) => Promise<T>): Promise<T> {
  const client = await connectAgent(url, agent.mcp_token, 'pgward-test');
  try {
    return await work(client);
  } finally {
    await client.close();
  }
}
