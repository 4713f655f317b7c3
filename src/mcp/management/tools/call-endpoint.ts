import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { z } from 'zod';
import type { ProblemBody } from '../../../http/problem.js';
import type { Operation } from '../catalog.js';
import { structuredResult, toolError, toolFailure } from '../../tool.js';
import { unknownOperation, type ManagementTool } from '../tool.js';

export const CallEndpointInput = z.strictObject({
  operation_id: z.string().min(1).max(200).describe('An operation id from search_endpoints, e.g. rotateAgentCredential'),
  path_params: z.record(z.string(), z.string().min(1)).default({}).describe('Values of the {placeholders} in the operation path, e.g. {"project_id": "prj_..."}; org_id defaults to your own organization'),
  query_params: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).default({}).describe('Query parameters, e.g. {"page_size": 50}'),
  body: z.record(z.string(), z.unknown()).optional().describe('The JSON request body, shaped as describe_endpoint shows; omit when the operation takes none'),
  idempotency_key: z
    .string()
    .optional()
    .describe('Sent as the Idempotency-Key header (1-255 visible ASCII characters). Creates and rotate honour it: a retry with the same key and body returns the first response and changes nothing more. Reuse it when retrying; use a new one for a new request.'),
});

const PLACEHOLDER = /\{([^}]+)\}/g;

/** The path with its placeholders filled (from `defaults` where the call gives none), or a tool error naming what is missing or unknown and what the operation takes. */
function fillPath(op: Operation, given: Record<string, string>, defaults: Readonly<Record<string, string>>): string | CallToolResult {
  const names = [...op.path.matchAll(PLACEHOLDER)].map((match) => match[1]!);
  const value = (name: string): string | undefined => given[name] ?? defaults[name];
  const missing = names.filter((name) => value(name) === undefined);
  const unknown = Object.keys(given).filter((name) => !names.includes(name));
  if (missing.length > 0 || unknown.length > 0) {
    const takes = names.length > 0 ? `takes path_params ${names.join(', ')}` : 'takes no path_params';
    const problems = [missing.length > 0 ? `missing ${missing.join(', ')}` : '', unknown.length > 0 ? `not path parameters of it: ${unknown.join(', ')}` : ''].filter(Boolean);
    return toolError(`${op.operationId} (${op.method} ${op.path}) ${takes}; ${problems.join('; ')}.`);
  }
  return op.path.replace(PLACEHOLDER, (_whole, name: string) => encodeURIComponent(value(name)!));
}

function bodyOf(response: LightMyRequestResponse): unknown {
  if (response.body === '') return null;
  return /[/+]json\b/.test(String(response.headers['content-type'] ?? '')) ? response.json() : response.body;
}

function failure(status: number, body: unknown): CallToolResult {
  const problem = body as Partial<ProblemBody> | null;
  // A 5xx is the server's failure; anything else refuses what was asked.
  const answer = status >= 500 ? toolFailure : toolError;
  if (!problem?.code) return answer(`HTTP ${status}: ${typeof body === 'string' ? body : JSON.stringify(body)}`, { status, body });
  const fields = problem.errors?.map((e) => `${e.field}: ${e.message}`).join('; ');
  return answer(`${problem.code} (HTTP ${status}): ${problem.detail} [request_id ${problem.request_id}]${fields ? `\nerrors: ${fields}` : ''}`, { status, body });
}

export const callEndpoint: ManagementTool<typeof CallEndpointInput> = {
  name: 'call_endpoint',
  title: 'Call a management API operation',
  description:
    'Invokes one REST operation with your own credential, exactly as the REST API would answer it: same authentication, roles, validation, idempotency and errors. Returns {status, body}. An error comes back as a tool error whose text carries the problem code, detail and request_id (branch on the code), with the problem detail as {status, body}.',
  inputSchema: CallEndpointInput,
  outputSchema: z.object({ status: z.int().min(100).max(599).describe('HTTP status of the REST answer'), body: z.unknown().describe('Its JSON body; null when it has none') }),
  // It can delete and revoke, and a create without idempotency_key creates again; it acts only on the caller's own pgward account.
  annotations: { title: 'Call a management API operation', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async handler({ operation_id, path_params, query_params, body, idempotency_key }, { catalog, inject, pathDefaults }) {
    const op = catalog.find(operation_id);
    if (!op) return unknownOperation(catalog, operation_id);
    const path = fillPath(op, path_params, pathDefaults);
    if (typeof path !== 'string') return path;
    const query = new URLSearchParams(Object.entries(query_params).map(([name, value]): [string, string] => [name, String(value)])).toString();
    const response = await inject({
      method: op.method as InjectOptions['method'],
      url: query ? `${path}?${query}` : path,
      headers: { ...(idempotency_key !== undefined ? { 'idempotency-key': idempotency_key } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    const result = bodyOf(response);
    return response.statusCode < 400 ? structuredResult({ status: response.statusCode, body: result }) : failure(response.statusCode, result);
  },
};
