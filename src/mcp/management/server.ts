import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { toolError, type ManagementTool, type ToolContext } from './tool.js';
import { callEndpoint } from './tools/call-endpoint.js';
import { describeEndpoint } from './tools/describe-endpoint.js';
import { searchEndpoints } from './tools/search-endpoints.js';

interface Registered {
  definition: Tool;
  call(args: unknown, context: ToolContext): Promise<CallToolResult>;
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  return z.toJSONSchema(schema, { target: 'draft-7', io }) as Tool['inputSchema'];
}

/** Arguments that fail the input schema are a tool error naming each field, so the model can correct itself. */
function register<Input extends z.ZodType>(tool: ManagementTool<Input>): Registered {
  return {
    definition: {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: jsonSchema(tool.inputSchema, 'input'),
      outputSchema: jsonSchema(tool.outputSchema, 'output'),
      annotations: tool.annotations,
    },
    async call(args, context) {
      const parsed = tool.inputSchema.safeParse(args ?? {});
      if (!parsed.success) {
        const issues = parsed.error.issues.map((issue) => `${issue.path.map(String).join('.') || '(arguments)'}: ${issue.message}`);
        return toolError(`Invalid arguments for ${tool.name}: ${issues.join('; ')}`);
      }
      return tool.handler(parsed.data, context);
    },
  };
}

const tools = new Map([register(searchEndpoints), register(describeEndpoint), register(callEndpoint)].map((tool) => [tool.definition.name, tool]));

const INSTRUCTIONS =
  'Administers a pgward account (projects, databases, policy profiles, API keys, agent credentials) through its REST API. Typical order: search_endpoints to find an operation by intent, describe_endpoint for its parameters and body, call_endpoint to invoke it with your own credential.';

/** The management MCP server for one caller: the three tools over the live REST operations (spec §4.6). */
export function createManagementServer(context: ToolContext): Server {
  const server = new Server({ name: 'pgward-management', version: '1.0.0' }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools.values()].map((tool) => tool.definition) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = tools.get(request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool "${request.params.name}"; the tools are ${[...tools.keys()].join(', ')}`);
    return tool.call(request.params.arguments, context);
  });
  return server;
}
