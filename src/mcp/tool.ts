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

/** Tool errors that are the gateway's or the database's failure, not a refusal of what was asked. */
const failures = new WeakSet<CallToolResult>();

/** Marks a tool error as one the caller did not cause (an upstream that cannot be reached, a server error): counted as `error`, not `refused`. */
export function asFailure(result: CallToolResult): CallToolResult {
  failures.add(result);
  return result;
}

export function toolFailure(text: string, structured?: Record<string, unknown>): CallToolResult {
  return asFailure(toolError(text, structured));
}

/** How a tool call ended: a result, a tool error the caller caused, or a failure (thrown, or a toolFailure). */
export type ToolOutcome = 'ran' | 'refused' | 'error';

export function outcomeOf(result: CallToolResult): ToolOutcome {
  if (!result.isError) return 'ran';
  return failures.has(result) ? 'error' : 'refused';
}

/** Told of every tool call once it ended; `tool` is a registered tool's name, or `unknown`. */
export type ToolCallObserver = (call: { readonly tool: string; readonly outcome: ToolOutcome; readonly seconds: number }) => void;

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
  serve(info: { name: string; version: string; instructions: string }, context: Context, observe?: ToolCallObserver): Server;
}

export function toolbox<Context>(list: readonly McpTool<z.ZodType, Context>[]): Toolbox<Context> {
  const tools = new Map(list.map((tool) => [tool.name, register(tool)]));
  return {
    serve({ name, version, instructions }, context, observe) {
      const server = new Server({ name, version }, { capabilities: { tools: {} }, instructions });
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools.values()].map((tool) => tool.definition) }));
      server.setRequestHandler(CallToolRequestSchema, async (request) => {
        const started = performance.now();
        const tool = tools.get(request.params.name);
        // Only registered names become label values: a caller's made-up names would not be bounded.
        const ended = (outcome: ToolOutcome): void => observe?.({ tool: tool ? request.params.name : 'unknown', outcome, seconds: (performance.now() - started) / 1000 });
        try {
          if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool "${request.params.name}"; the tools are ${[...tools.keys()].join(', ')}`);
          const result = await tool.call(request.params.arguments, context);
          ended(outcomeOf(result));
          return result;
        } catch (error) {
          ended('error');
          throw error;
        }
      });
      return server;
    },
  };
}
