/**
 * How a tool call's outcome is told apart for pgward_mcp_tool_calls_total: a result ran, a tool
 * error refused what was asked, and a failure (a handler that threw, a toolFailure, an unknown
 * tool) is an error. Driven through the MCP SDK's client and server over its in-memory transport.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { structuredResult, toolbox, toolError, toolFailure, type McpTool, type ToolOutcome } from '../../src/mcp/tool.js';

const Input = z.object({ how: z.enum(['ran', 'refused', 'failed', 'threw']) });

const answering: McpTool<typeof Input, undefined> = {
  name: 'answer',
  title: 'Answers as told',
  description: 'Answers as told',
  inputSchema: Input,
  outputSchema: z.object({}),
  annotations: {},
  async handler({ how }) {
    if (how === 'ran') return structuredResult({});
    if (how === 'refused') return toolError('refused');
    if (how === 'failed') return toolFailure('the upstream database is unavailable');
    throw new Error('the handler failed');
  },
};

describe('tool call outcomes', () => {
  it('ran, refused, error for a failure, a throw and an unknown tool, and refused for arguments the schema refuses', async () => {
    const seen: { tool: string; outcome: ToolOutcome }[] = [];
    const server = toolbox([answering]).serve({ name: 'test', version: '1', instructions: '' }, undefined, ({ tool, outcome, seconds }) => {
      expect(seconds).toBeGreaterThanOrEqual(0);
      seen.push({ tool, outcome });
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'test', version: '1' });
    await client.connect(clientSide);
    for (const how of ['ran', 'refused', 'failed', 'threw']) await client.callTool({ name: 'answer', arguments: { how } }).catch(() => undefined);
    await client.callTool({ name: 'answer', arguments: { how: 'sideways' } });
    await expect(client.callTool({ name: 'made_up', arguments: {} })).rejects.toThrow(/Unknown tool/);
    await client.close();
    expect(seen).toEqual([
      { tool: 'answer', outcome: 'ran' },
      { tool: 'answer', outcome: 'refused' },
      { tool: 'answer', outcome: 'error' },
      { tool: 'answer', outcome: 'error' },
      { tool: 'answer', outcome: 'refused' },
      { tool: 'unknown', outcome: 'error' },
    ]);
  });
});
