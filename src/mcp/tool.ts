import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/** One MCP tool: its schemas, name, description and annotations next to its handler. */
export interface McpTool<Input extends z.ZodType, Context> {
  name: string;
  title: string;
  description: string;
  inputSchema: Input;
  outputSchema: z.ZodType;
  annotations: ToolAnnotations;
  handler(args: z.output<Input>, context: Context): Promise<CallToolResult>;
}

export function structuredResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}

export function toolError(text: string, structured?: Record<string, unknown>): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }], ...(structured ? { structuredContent: structured } : {}) };
}

interface Registered<Context> {
  definition: Tool;
  call(args: unknown, context: Context): Promise<CallToolResult>;
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  return z.toJSONSchema(schema, { target: 'draft-7', io }) as Tool['inputSchema'];
}

/** Arguments that fail the input schema are a tool error naming each field, so the model can correct itself. */
function register<Input extends z.ZodType, Context>(tool: McpTool<Input, Context>): Registered<Context> {
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

/** A set of tools, registered once, that serves any number of MCP servers. */
export interface Toolbox<Context> {
  serve(info: { name: string; version: string; instructions: string }, context: Context): Server;
}

export function toolbox<Context>(list: readonly McpTool<z.ZodType, Context>[]): Toolbox<Context> {
  const tools = new Map(list.map((tool) => [tool.name, register(tool)]));
  return {
    serve({ name, version, instructions }, context) {
      const server = new Server({ name, version }, { capabilities: { tools: {} }, instructions });
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools.values()].map((tool) => tool.definition) }));
      server.setRequestHandler(CallToolRequestSchema, async (request) => {
        const tool = tools.get(request.params.name);
        if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool "${request.params.name}"; the tools are ${[...tools.keys()].join(', ')}`);
        return tool.call(request.params.arguments, context);
      });
      return server;
    },
  };
}
