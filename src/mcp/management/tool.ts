import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { z } from 'zod';
import type { Catalog } from './catalog.js';

/** What a tool runs against: the live catalog, and the REST routes as the MCP caller. */
export interface ToolContext {
  catalog: Catalog;
  /** Runs a request through the app's routes with the caller's own Authorization, request id and address. */
  inject(options: InjectOptions): Promise<LightMyRequestResponse>;
}

export interface ManagementTool<Input extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  inputSchema: Input;
  outputSchema: z.ZodType;
  annotations: ToolAnnotations;
  handler(args: z.output<Input>, context: ToolContext): Promise<CallToolResult>;
}

export function structuredResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}

export function toolError(text: string, structured?: Record<string, unknown>): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }], ...(structured ? { structuredContent: structured } : {}) };
}

/** The tool error for an operation id the catalog lacks: the closest ids and every valid one. */
export function unknownOperation(catalog: Catalog, operationId: string): CallToolResult {
  const close = catalog.search(operationId, 3).map((op) => op.operationId);
  const hint = close.length > 0 ? ` Closest: ${close.join(', ')}.` : '';
  return toolError(`Unknown operation_id "${operationId}".${hint} Valid operation ids: ${catalog.operations.map((op) => op.operationId).join(', ')}. Use search_endpoints to find one by intent.`);
}
