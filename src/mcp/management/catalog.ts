import { SearchIndex } from '../search.js';

export type JsonSchema = Record<string, unknown>;

export interface OperationParameter {
  name: string;
  in: string;
  required: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface OperationResponse {
  status: string;
  description?: string;
  schema?: JsonSchema;
}

/** One REST operation of the OpenAPI document, its schemas with component references inlined. */
export interface Operation {
  operationId: string;
  method: string;
  path: string;
  tag: string;
  summary: string;
  description: string;
  parameters: OperationParameter[];
  requestBody?: { required: boolean; schema: JsonSchema };
  responses: OperationResponse[];
}

/** The operations an OpenAPI document describes, findable by id and searchable by intent. */
export interface Catalog {
  readonly operations: readonly Operation[];
  find(operationId: string): Operation | undefined;
  search(query: string, limit: number): Operation[];
}

interface OpenApiOperation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: JsonSchema }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: JsonSchema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: JsonSchema }> }>;
}

export interface OpenApiDocument {
  paths?: object;
  components?: { schemas?: object };
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const COMPONENT = '#/components/schemas/';
/** What @fastify/swagger writes for a response the route did not describe. */
const PLACEHOLDER_DESCRIPTION = 'Default Response';

/** Inlines `#/components/schemas/*` references; a reference back into a schema being inlined stays a reference. */
function inline(value: unknown, components: Record<string, unknown>, inlining: readonly string[] = []): unknown {
  if (Array.isArray(value)) return value.map((item) => inline(item, components, inlining));
  if (!value || typeof value !== 'object') return value;
  const ref = (value as { $ref?: unknown }).$ref;
  if (typeof ref === 'string' && ref.startsWith(COMPONENT)) {
    const name = ref.slice(COMPONENT.length);
    if (inlining.includes(name) || components[name] === undefined) return value;
    return inline(components[name], components, [...inlining, name]);
  }
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, inline(item, components, inlining)]));
}

function jsonSchemaOf(content: Record<string, { schema?: JsonSchema }> | undefined, components: Record<string, unknown>): JsonSchema | undefined {
  const media = content?.['application/json'] ?? Object.values(content ?? {})[0];
  return media?.schema ? (inline(media.schema, components) as JsonSchema) : undefined;
}

function toOperation(path: string, method: string, op: OpenApiOperation, components: Record<string, unknown>): Operation {
  const requestSchema = jsonSchemaOf(op.requestBody?.content, components);
  return {
    operationId: op.operationId ?? `${method} ${path}`,
    method: method.toUpperCase(),
    path,
    tag: op.tags?.[0] ?? '',
    summary: op.summary ?? '',
    description: op.description ?? '',
    parameters: (op.parameters ?? []).map((p) => ({
      name: p.name,
      in: p.in,
      required: p.required ?? p.in === 'path',
      ...(p.description ? { description: p.description } : {}),
      schema: inline(p.schema ?? {}, components) as JsonSchema,
    })),
    ...(requestSchema ? { requestBody: { required: op.requestBody?.required ?? false, schema: requestSchema } } : {}),
    responses: Object.entries(op.responses ?? {}).map(([status, response]) => {
      const schema = jsonSchemaOf(response.content, components);
      const described = response.description && response.description !== PLACEHOLDER_DESCRIPTION;
      return { status, ...(described ? { description: response.description } : {}), ...(schema ? { schema } : {}) };
    }),
  };
}

/** The path's words without its parameters and version prefix: `/v1/projects/{project_id}/agents` → `projects agents`. */
function pathWords(path: string): string {
  return path
    .split('/')
    .filter((part) => part && !part.startsWith('{') && part !== 'v1')
    .join(' ');
}

export function buildCatalog(document: OpenApiDocument): Catalog {
  const components = (document.components?.schemas ?? {}) as Record<string, unknown>;
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Record<string, OpenApiOperation>>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (op) operations.push(toOperation(path, method, op, components));
    }
  }
  const byId = new Map(operations.map((op) => [op.operationId, op]));
  // The operation id and summary say what an operation does; the description mostly says how.
  const index = new SearchIndex(
    operations.map((op) => ({
      id: op.operationId,
      fields: [
        { text: op.operationId, weight: 3 },
        { text: op.summary, weight: 2 },
        { text: pathWords(op.path), weight: 1 },
        { text: op.tag, weight: 1 },
        { text: op.description, weight: 0.5 },
      ],
    })),
  );
  return {
    operations,
    find: (operationId) => byId.get(operationId),
    search: (query, limit) => index.search(query, limit).map((hit) => byId.get(hit.id)!),
  };
}
