import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Problem } from '../../http/problem.js';
import { buildCatalog, type Catalog } from './catalog.js';
import { createManagementServer } from './server.js';

const RESOURCE_METADATA = '/.well-known/oauth-protected-resource';

function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/**
 * The management MCP at POST /v1/mcp (spec §4.6): Streamable HTTP, stateless (a server and
 * transport per request), behind the same bearer authentication as the REST routes. GET and DELETE
 * answer 405 like any other method a path lacks: there are no sessions to stream on or to end.
 */
export function managementMcpRoutes(app: FastifyInstance): void {
  let catalog: Catalog | undefined;
  // app.swagger() exists only once the app is ready, and every route is registered by then.
  const catalogOf = (): Catalog => (catalog ??= buildCatalog(app.swagger()));

  app.get(RESOURCE_METADATA, { schema: { hide: true }, config: { public: true } }, async (request) => ({
    resource: baseUrl(request),
    authorization_servers: [],
    bearer_methods_supported: ['header'],
  }));

  app.post(
    '/v1/mcp',
    {
      schema: { hide: true },
      // RFC 9728 §5.1: the 401 of the shared auth hook points MCP clients at the resource metadata.
      onSend: async (request, reply, payload) => {
        if (reply.statusCode === 401) void reply.header('www-authenticate', `Bearer realm="pgward", resource_metadata="${baseUrl(request)}${RESOURCE_METADATA}"`);
        return payload;
      },
    },
    async (request, reply) => {
      if (request.body === undefined) throw new Problem('INVALID_INPUT', 'send a JSON-RPC 2.0 message as the body');
      const authorization = request.headers.authorization ?? '';
      const server = createManagementServer({
        catalog: catalogOf(),
        inject: (options) => app.inject({ ...options, remoteAddress: request.ip, headers: { ...options.headers, authorization, 'x-request-id': request.id } }),
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.hijack();
      for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(request.raw, reply.raw, request.body);
      } catch (error) {
        request.log.error({ err: error }, 'management MCP request failed');
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: `the server failed; quote request id ${request.id}` }, id: null }));
        }
      }
    },
  );
}
