/** The management MCP reaches the custom domain and sandbox branch operations through the OpenAPI document. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let mcp: Client;

beforeAll(async () => {
  api = await startApi('domains_mcp');
  owner = await api.org('pro');
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = api.app.server.address() as { port: number };
  mcp = new Client({ name: 'pgward-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${address.port}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${owner.apiKey}` } } }));
});
afterAll(async () => {
  await mcp?.close();
  await api?.stop();
});

const call = async (name: string, args: Record<string, unknown>) => (await mcp.callTool({ name, arguments: args })) as CallToolResult;

describe('custom domains and branches on the management MCP', () => {
  it('search_endpoints finds every operation by what it does', async () => {
    const found = async (query: string): Promise<string[]> => ((await call('search_endpoints', { query })).structuredContent as { endpoints: { operation_id: string }[] }).endpoints.map((e) => e.operation_id);
    expect((await found('custom domain')).slice(0, 5).sort()).toEqual(['createCustomDomain', 'deleteCustomDomain', 'getCustomDomain', 'listCustomDomains', 'verifyCustomDomain']);
    expect(await found('verify custom domain DNS')).toContain('verifyCustomDomain');
    expect((await found('sandbox branch')).slice(0, 4).sort()).toEqual(['createBranch', 'deleteBranch', 'getBranch', 'listBranches']);
  });

  it('call_endpoint adds a domain and describe_endpoint names the verification failure code', async () => {
    const projectId = await api.project(owner, 'Shop');
    const created = await call('call_endpoint', { operation_id: 'createCustomDomain', path_params: { project_id: projectId }, body: { domain: 'mcp.example.com' } });
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ status: 201, body: { domain: 'mcp.example.com', verified: false } });
    const described = await call('describe_endpoint', { operation_id: 'verifyCustomDomain' });
    expect(JSON.stringify(described.structuredContent)).toContain('DNS_VERIFICATION_FAILED');
  });
});
