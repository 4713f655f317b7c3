import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Problem } from '../http/problem.js';

export const RESOURCE_METADATA = '/.well-known/oauth-protected-resource';

export function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/** RFC 9728 §5.1: a 401 points MCP clients at the protected-resource metadata. */
export function bearerChallenge(request: FastifyRequest): string {
  return `Bearer realm="pgward", resource_metadata="${baseUrl(request)}${RESOURCE_METADATA}"`;
}

/**
 * Answers one MCP POST with `server` over a stateless Streamable HTTP transport (a server and
 * transport per request, JSON responses). The reply is hijacked: headers fastify set so far
 * (X-Request-Id) are copied onto the raw response first.
 */
export async function serveMcp(request: FastifyRequest, reply: FastifyReply, server: Server): Promise<void> {
  if (request.body === undefined) throw new Problem('INVALID_INPUT', 'send a JSON-RPC 2.0 message as the body');
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
    request.log.error({ err: error }, 'MCP request failed');
    if (!reply.raw.headersSent) {
      reply.raw.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: `the server failed; quote request id ${request.id}` }, id: null }));
    }
  }
}
