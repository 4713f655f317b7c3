import { z } from 'zod';
import { problemCatalog } from '../../../http/problem.js';
import type { Operation, OperationResponse } from '../catalog.js';
import { structuredResult } from '../../tool.js';
import { unknownOperation, type ManagementTool } from '../tool.js';

export const DescribeEndpointInput = z.strictObject({
  operation_id: z.string().min(1).max(200).describe('An operation id from search_endpoints, e.g. registerAgentCredential'),
});

const Schema = z.record(z.string(), z.unknown());

const Description = z.object({
  operation_id: z.string(),
  method: z.string(),
  path: z.string(),
  tag: z.string(),
  summary: z.string(),
  description: z.string(),
  parameters: z.array(z.object({ name: z.string(), in: z.string(), required: z.boolean(), description: z.string().optional(), schema: Schema })),
  request_body: z.object({ required: z.boolean(), content_type: z.string(), schema: Schema }).nullable(),
  responses: z.array(
    z.object({ status: z.string(), description: z.string().optional(), content_type: z.string().optional(), schema: Schema.optional(), error_codes: z.array(z.string()).optional() }),
  ),
});

const codesByStatus = new Map<number, string[]>();
for (const [code, { status }] of Object.entries(problemCatalog)) codesByStatus.set(status, [...(codesByStatus.get(status) ?? []), code]);

/** A success keeps its schema; an error is always a problem detail, so it lists the codes it can carry instead. */
function response({ status, description, schema }: OperationResponse) {
  const numeric = Number(status);
  if (numeric >= 400) return { status, content_type: 'application/problem+json', error_codes: codesByStatus.get(numeric) ?? [] };
  return { status, ...(description ? { description } : {}), ...(schema ? { content_type: 'application/json', schema } : {}) };
}

function describe(op: Operation): z.infer<typeof Description> {
  return {
    operation_id: op.operationId,
    method: op.method,
    path: op.path,
    tag: op.tag,
    summary: op.summary,
    description: op.description,
    parameters: op.parameters,
    request_body: op.requestBody ? { required: op.requestBody.required, content_type: 'application/json', schema: op.requestBody.schema } : null,
    responses: op.responses.map(response),
  };
}

export const describeEndpoint: ManagementTool<typeof DescribeEndpointInput> = {
  name: 'describe_endpoint',
  title: 'Describe a management API operation',
  description:
    'Full schema of one operation: its path and query parameters, its request-body JSON Schema, its success responses with their schemas, and for each error status the problem codes it can carry (errors are RFC 9457 problem details with code, detail and request_id).',
  inputSchema: DescribeEndpointInput,
  outputSchema: Description,
  annotations: { title: 'Describe a management API operation', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ operation_id }, { catalog }) {
    const op = catalog.find(operation_id);
    return op ? structuredResult(describe(op)) : unknownOperation(catalog, operation_id);
  },
};
