import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { toolbox, type ToolCallObserver } from '../tool.js';
import type { ToolContext } from './tool.js';
import { callEndpoint } from './tools/call-endpoint.js';
import { describeEndpoint } from './tools/describe-endpoint.js';
import { searchEndpoints } from './tools/search-endpoints.js';

const tools = toolbox<ToolContext>([searchEndpoints, describeEndpoint, callEndpoint]);

const INSTRUCTIONS =
  'Administers a pgward account (projects, databases, policy profiles, API keys, agent credentials) through its REST API. Typical order: search_endpoints to find an operation by intent, describe_endpoint for its parameters and body, call_endpoint to invoke it with your own credential. getCurrentCaller tells your organization id and role; an org_id you leave out is your own organization.';

/** The management MCP server for one caller: the three tools over the live REST operations (spec §4.6). */
export function createManagementServer(context: ToolContext, observe?: ToolCallObserver): Server {
  return tools.serve({ name: 'pgward-management', version: '1.0.0', instructions: INSTRUCTIONS }, context, observe);
}
