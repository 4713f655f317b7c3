import type { FastifyInstance } from 'fastify';
import { callerOf, ORG_HEADER } from '../../http/plugins/auth.js';
import { protectedResourceMetadata } from '../../identity/routes.js';
import { bearerChallenge, RESOURCE_METADATA, serveMcp } from '../transport.js';
import { buildCatalog, type Catalog } from './catalog.js';
import type { ToolCallObserver } from '../tool.js';
import { createManagementServer } from './server.js';

/**
 * The management MCP at POST /v1/mcp (spec §4.6): Streamable HTTP, stateless (a server and
 * transport per request), behind the same bearer authentication as the REST routes. GET and DELETE
 * answer 405 like any other method a path lacks: there are no sessions to stream on or to end.
 */
export function managementMcpRoutes(app: FastifyInstance, publicUrl: string, observe?: ToolCallObserver): void {
  let catalog: Catalog | undefined;
  // app.swagger() exists only once the app is ready, and every route is registered by then.
  const catalogOf = (): Catalog => (catalog ??= buildCatalog(app.swagger()));

  app.get(RESOURCE_METADATA, { schema: { hide: true }, config: { public: true } }, async () => protectedResourceMetadata(publicUrl));

  app.post(
    '/v1/mcp',
    {
      schema: { hide: true },
      // The 401 of the shared auth hook points MCP clients at the resource metadata.
      onSend: async (request, reply, payload) => {
        if (reply.statusCode === 401) void reply.header('www-authenticate', bearerChallenge(request));
        return payload;
      },
    },
    async (request, reply) => {
      const authorization = request.headers.authorization ?? '';
      // A person's client names the organization it acts in once, on /v1/mcp; every operation it calls acts there too.
      const org = request.headers[ORG_HEADER];
      const acting = typeof org === 'string' ? { [ORG_HEADER]: org } : {};
      const server = createManagementServer({
        catalog: catalogOf(),
        pathDefaults: { org_id: callerOf(request).orgId },
        inject: (options) => app.inject({ ...options, remoteAddress: request.ip, headers: { ...options.headers, ...acting, authorization, 'x-request-id': request.id } }),
      }, observe);
      await serveMcp(request, reply, server);
    },
  );
}
