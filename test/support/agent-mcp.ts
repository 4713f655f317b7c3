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
