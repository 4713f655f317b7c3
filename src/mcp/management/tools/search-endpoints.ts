import { z } from 'zod';
import { structuredResult } from '../../tool.js';
import type { ManagementTool } from '../tool.js';

export const SearchEndpointsInput = z.strictObject({
  query: z.string().min(1).max(500).describe('What you want to do, in words: "rotate an agent\'s password", "list databases"'),
  limit: z.int().min(1).max(50).default(5).describe('Most endpoints to return, best first'),
});

const Endpoint = z.object({ operation_id: z.string(), method: z.string(), path: z.string(), tag: z.string(), summary: z.string() });

export const searchEndpoints: ManagementTool<typeof SearchEndpointsInput> = {
  name: 'search_endpoints',
  title: 'Search the management API',
  description:
    'Finds REST operations of the pgward management API (projects, databases, policy profiles, API keys, agent credentials, the CRM) by intent, ranked by relevance (BM25 over operation id, summary, description, path and tag). Start here, then describe_endpoint, then call_endpoint.',
  inputSchema: SearchEndpointsInput,
  outputSchema: z.object({ endpoints: z.array(Endpoint) }),
  annotations: { title: 'Search the management API', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ query, limit }, { catalog }) {
    const endpoints = catalog.search(query, limit).map((op) => ({ operation_id: op.operationId, method: op.method, path: op.path, tag: op.tag, summary: op.summary }));
    return structuredResult({ endpoints });
  },
};
