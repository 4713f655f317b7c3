import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { z } from 'zod';
import { toolError, type McpTool } from '../tool.js';
import type { Catalog } from './catalog.js';

/** What a tool runs against: the live catalog, and the REST routes as the MCP caller. */
export interface ToolContext {
  catalog: Catalog;
  /** Runs a request through the app's routes with the caller's own Authorization, request id and address. */
  inject(options: InjectOptions): Promise<LightMyRequestResponse>;
  /** Path parameters the caller's credential settles when a call omits them: `org_id`, its one organization. */
  pathDefaults: Readonly<Record<string, string>>;
}

export type ManagementTool<Input extends z.ZodType> = McpTool<Input, ToolContext>;

/** The tool error for an operation id the catalog lacks: the closest ids and every valid one. */
export function unknownOperation(catalog: Catalog, operationId: string): CallToolResult {
  const close = catalog.search(operationId, 3).map((op) => op.operationId);
  const hint = close.length > 0 ? ` Closest: ${close.join(', ')}.` : '';
  return toolError(`Unknown operation_id "${operationId}".${hint} Valid operation ids: ${catalog.operations.map((op) => op.operationId).join(', ')}. Use search_endpoints to find one by intent.`);
}
