import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IdentityPlane } from './plane.js';
import { apiResource, AUTH_BASE_PATH, CLIENT_IP_HEADER, SCOPES, type IdentityServer } from './server.js';

/**
 * The spec's endpoint names (§5.2) for Better Auth's OAuth 2.1 provider, whose own paths are
 * /oauth2/...: the same handlers answer both, and the metadata names the spec's.
 */
const SPEC_ALIASES = { 'mcp/authorize': 'oauth2/authorize', 'mcp/token': 'oauth2/token', 'mcp/register': 'oauth2/register' } as const;

/** The issuer (`{auth_url}/api/auth`) of the tokens this deployment's identity server signs. */
export function issuerOf(publicUrl: string): string {
  return `${new URL(publicUrl).origin}${AUTH_BASE_PATH}`;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * RFC 7591 registrations that name no `application_type` are `web` to Better Auth, which then
 * refuses http redirect URIs; MCP clients on a person's machine (loopback callbacks, RFC 8252) send
 * none. A registration whose every redirect URI is an http loopback one is registered as `native`.
 */
export function withLoopbackAsNative(body: Buffer): Buffer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (typeof parsed !== 'object' || parsed === null || 'application_type' in parsed) return body;
  const uris = (parsed as { redirect_uris?: unknown }).redirect_uris;
  const loopback = (uri: unknown) => {
    try {
      const url = new URL(String(uri));
      return url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
    } catch {
      return false;
    }
  };
  if (!Array.isArray(uris) || uris.length === 0 || !uris.every(loopback)) return body;
  return Buffer.from(JSON.stringify({ ...parsed, application_type: 'native' }));
}

/** Hands one request to Better Auth as a Fetch request (its path possibly renamed) and copies its answer back. */
async function forward(identity: IdentityServer, request: FastifyRequest, reply: FastifyReply, origin: string, path?: string, rewrite?: (body: Buffer) => Buffer): Promise<void> {
  const url = new URL(request.url, origin);
  if (path !== undefined) url.pathname = path;
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || name === CLIENT_IP_HEADER) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  // The client's address as fastify resolved it (trusted proxies included): rate limits, sessions and consents record it.
  headers.set(CLIENT_IP_HEADER, request.ip);
  const raw = Buffer.isBuffer(request.body) && request.body.length > 0 ? request.body : undefined;
  const body = raw ? new Uint8Array(rewrite ? rewrite(raw) : raw) : undefined;
  if (raw && rewrite) headers.delete('content-length');
  const response = await identity.handler(new Request(url, { method: request.method, headers, ...(body ? { body } : {}) }));
  void reply.code(response.status);
  for (const [name, value] of response.headers) if (name !== 'set-cookie') void reply.header(name, value);
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) void reply.header('set-cookie', cookies);
  await reply.send(Buffer.from(await response.arrayBuffer()));
}

/** RFC 8414 / OIDC discovery as Better Auth builds it, with the spec's endpoint names. */
async function metadata(identity: IdentityServer, publicUrl: string, document: 'oauth-authorization-server' | 'openid-configuration'): Promise<Record<string, unknown>> {
  const origin = new URL(publicUrl).origin;
  const response = await identity.handler(new Request(`${origin}${AUTH_BASE_PATH}/.well-known/${document}`));
  const built = (await response.json()) as Record<string, unknown>;
  const issuer = issuerOf(publicUrl);
  return {
    ...built,
    issuer,
    authorization_endpoint: `${issuer}/mcp/authorize`,
    token_endpoint: `${issuer}/mcp/token`,
    registration_endpoint: `${issuer}/mcp/register`,
    jwks_uri: `${issuer}/jwks`,
    scopes_supported: [...SCOPES],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
  };
}

/** The RFC 9728 document of the REST API and the management MCP, naming this identity server. */
export function protectedResourceMetadata(publicUrl: string): Record<string, unknown> {
  return { resource: apiResource(publicUrl), authorization_servers: [issuerOf(publicUrl)], bearer_methods_supported: ['header'], scopes_supported: [...SCOPES] };
}

/** The path the sign-in page reads what it offers from (passkeys, the single sign-on providers). */
const SIGN_IN_OPTIONS_PATH = '/v1/sign-in-options';

/** Mounts the identity server at /api/auth/* and its discovery documents at the root (spec §5.2). */
export async function identityRoutes(app: FastifyInstance, plane: IdentityPlane): Promise<void> {
  const { server: identity, publicUrl } = plane;
  const origin = new URL(publicUrl).origin;
  app.get(SIGN_IN_OPTIONS_PATH, { config: { public: true }, schema: { hide: true } }, async () => plane.signInOptions);
  await app.register(async (scope) => {
    // Better Auth reads form posts (the token endpoint) and JSON itself: bodies reach it as they came.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    const config = { public: true, rawBody: true };
    scope.route({ method: ['GET', 'POST'], url: `${AUTH_BASE_PATH}/*`, config, schema: { hide: true }, handler: (request, reply) => forward(identity, request, reply, origin) });
    for (const [alias, target] of Object.entries(SPEC_ALIASES)) {
      scope.route({ method: ['GET', 'POST'], url: `${AUTH_BASE_PATH}/${alias}`, config, schema: { hide: true }, handler: (request, reply) => forward(identity, request, reply, origin, `${AUTH_BASE_PATH}/${target}`, alias === 'mcp/register' ? withLoopbackAsNative : undefined) });
    }
  });
  // Each place a client may look (RFC 8414 §3.1 inserts the issuer's path after the well-known name; OIDC appends it), answering alike.
  for (const document of ['oauth-authorization-server', 'openid-configuration'] as const) {
    for (const url of [`/.well-known/${document}`, `/.well-known/${document}${AUTH_BASE_PATH}`, `${AUTH_BASE_PATH}/.well-known/${document}`]) {
      app.get(url, { config: { public: true }, schema: { hide: true } }, async () => metadata(identity, publicUrl, document));
    }
  }
}
