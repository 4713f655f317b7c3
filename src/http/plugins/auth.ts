import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ApiKeyRole } from '../../events/organizations.js';
import { Problem } from '../problem.js';

export type Role = ApiKeyRole;

/** Who is calling: an organization API key or a JWT from the identity provider. */
export type Caller =
  | { readonly kind: 'api_key'; readonly keyId: string; readonly orgId: string; readonly role: Role }
  | { readonly kind: 'jwt'; readonly subject: string; readonly orgId: string; readonly role: Role };

declare module 'fastify' {
  interface FastifyRequest {
    caller?: Caller;
  }
  interface FastifyContextConfig {
    /** Routes that need no credential (discovery, health). */
    public?: boolean;
  }
}

export interface Authenticators {
  /** Resolves an organization API key (`pgw_org_...`), or undefined when unknown or revoked. */
  apiKey(token: string): Promise<Caller | undefined>;
  /** Verifies a JWT; undefined when JWT login is not configured. Throws when the token is bad. */
  jwt?: (token: string) => Promise<Caller>;
}

const ORG_KEY = /^pgw_org_[A-Za-z0-9_-]{43}$/;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

function unauthorized(detail: string): Problem {
  return new Problem('UNAUTHORIZED', detail, { headers: { 'www-authenticate': 'Bearer realm="pgward"' } });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw unauthorized('authentication required');
  return request.caller;
}

/**
 * The path a request addresses. An HTTP/1.1 request target may be in absolute form
 * (`GET http://host/v1/projects HTTP/1.1`): the router serves it like `/v1/projects`, so checks must too.
 */
export function requestPath(request: FastifyRequest): string {
  const target = request.url;
  if (target.startsWith('/')) return target;
  try {
    return new URL(target).pathname;
  } catch {
    return target;
  }
}

/** Bearer authentication on every /v1 route not marked public (spec §5.3), decided by the matched route, not by how the target was spelled. */
export function installAuth(app: FastifyInstance, authenticators: Authenticators): void {
  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.url;
    if (!route?.startsWith('/v1/') || request.routeOptions.config.public) return;
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer +(\S+)$/i.exec(header) : null;
    if (!match) throw unauthorized('send Authorization: Bearer <organization API key or JWT>');
    const token = match[1]!;
    if (ORG_KEY.test(token)) {
      const caller = await authenticators.apiKey(token);
      if (!caller) throw unauthorized('the API key is unknown or revoked');
      request.caller = caller;
      return;
    }
    if (JWT.test(token) && authenticators.jwt) {
      request.caller = await authenticators.jwt(token);
      return;
    }
    throw unauthorized('the bearer token is malformed: expected an organization API key (pgw_org_...) or a JWT');
  });
}
