import type { FastifyInstance, FastifyRequest } from 'fastify';
import { OPERATOR_TOKEN } from '../../auth/operators.js';
import type { ApiKeyRole } from '../../events/organizations.js';
import { Problem } from '../problem.js';

export type Role = ApiKeyRole;

/** Who is calling: an organization API key, a JWT from an identity provider, or a person signed in to this deployment's identity server (its session cookie). */
export type Caller =
  | { readonly kind: 'api_key'; readonly keyId: string; readonly orgId: string; readonly role: Role }
  | { readonly kind: 'jwt'; readonly subject: string; readonly orgId: string; readonly role: Role; readonly issuer: string }
  | { readonly kind: 'session'; readonly subject: string; readonly orgId: string; readonly role: Role };

/** One of the deployment's operators (docs/support.md), named by PGWARD_OPERATOR_TOKENS; a member of no organization. */
export interface Operator {
  readonly name: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller?: Caller;
    operator?: Operator;
  }
  interface FastifyContextConfig {
    /** Routes that need no credential (discovery, health). */
    public?: boolean;
    /** Routes that take their body as raw bytes, whatever its type (the identity server's form posts). */
    rawBody?: boolean;
  }
}

export interface Authenticators {
  /** Resolves an organization API key (`pgw_org_...`), or undefined when unknown or revoked. */
  apiKey(token: string): Promise<Caller | undefined>;
  /** Verifies a JWT; undefined when JWT login is not configured. Throws when the token is bad. `named` as for session. */
  jwt?: (token: string, named?: string) => Promise<Caller>;
  /** The operator an operator token (`pgw_op_...`) names, or undefined when none does. */
  operator?: (token: string) => string | undefined;
  /**
   * The person a request's identity-server session cookie names, or undefined when it carries none
   * that is valid; `named` is the organization the request names for them to act in (namedOrg).
   */
  session?: (headers: Headers, named?: string) => Promise<Caller | undefined>;
  /** The origin a browser's cookie-authenticated mutation must come from (CSRF defence). */
  origin?: string;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function headersOf(request: FastifyRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) if (typeof value === 'string') headers.set(name, value);
  return headers;
}

/**
 * A cookie is sent by the browser whoever asks it to, so a mutation authenticated by one must come
 * from a page of this origin: its Origin header (browsers send it on every cross-origin request and
 * on same-origin non-GET ones) must name it. SameSite=Lax cookies already stay off cross-site posts.
 */
function checkOrigin(request: FastifyRequest, expected: string | undefined): void {
  if (SAFE_METHODS.has(request.method)) return;
  const origin = request.headers.origin;
  if (expected === undefined || origin !== expected) throw new Problem('FORBIDDEN', `a request authenticated by the session cookie that changes something must come from ${expected ?? 'this deployment'} (its Origin header); other clients send Authorization: Bearer`);
}

/** The header a person names the organization they act in with, on routes whose path names none (docs/identity.md#the-acting-organization). */
export const ORG_HEADER = 'x-pgward-org';

/**
 * The organization a request names for a person to act in: the path's `org_id`, else the query's,
 * else the X-Pgward-Org header. An organization's credential ignores it: it has only its own.
 */
export function namedOrg(request: FastifyRequest): string | undefined {
  for (const source of [request.params, request.query]) {
    const value = (source as Record<string, unknown> | undefined)?.org_id;
    if (typeof value === 'string') return value;
  }
  const header = request.headers[ORG_HEADER];
  return typeof header === 'string' && header !== '' ? header : undefined;
}

const ORG_KEY = /^pgw_org_[A-Za-z0-9_-]{43}$/;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export function unauthorized(detail: string): Problem {
  return new Problem('UNAUTHORIZED', detail, { headers: { 'www-authenticate': 'Bearer realm="pgward"' } });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller && request.operator) throw new Problem('FORBIDDEN', 'an operator token acts only on the operator routes (/v1/operator/...); use an organization API key or a JWT here');
  if (!request.caller) throw unauthorized('authentication required');
  return request.caller;
}

/** The person a caller is (their user id), when it is one signed in to, or holding a token of, the identity server whose issuer is `ownIssuer`. */
export function personOf(caller: Caller, ownIssuer: string): string | undefined {
  return caller.kind === 'session' || (caller.kind === 'jwt' && caller.issuer === ownIssuer) ? caller.subject : undefined;
}

/** The person calling, or 403 FORBIDDEN for a credential that names no person (an API key, an external JWT). */
export function requirePerson(request: FastifyRequest, ownIssuer: string): string {
  const userId = personOf(callerOf(request), ownIssuer);
  if (!userId) throw new Problem('FORBIDDEN', 'this operation is for a person: sign in, or use a token this deployment’s identity server issued');
  return userId;
}

/** Refuses with 403 FORBIDDEN unless an operator token authenticated the request. */
export function requireOperator(request: FastifyRequest): Operator {
  if (!request.operator) throw new Problem('FORBIDDEN', 'this operation is for the deployment’s operators: send an operator token (docs/support.md)');
  return request.operator;
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

/**
 * Authenticates the request's caller, setting request.caller or request.operator: the identity
 * server's session cookie when no Authorization header is sent, else `Authorization: Bearer`;
 * 401 when there is none or it is bad.
 */
export async function authenticateCaller(request: FastifyRequest, authenticators: Authenticators): Promise<void> {
  const header = request.headers.authorization;
  if (header === undefined && authenticators.session && request.headers.cookie) {
    const caller = await authenticators.session(headersOf(request), namedOrg(request));
    if (caller) {
      checkOrigin(request, authenticators.origin);
      request.caller = caller;
      return;
    }
  }
  const match = typeof header === 'string' ? /^Bearer +(\S+)$/i.exec(header) : null;
  if (!match) throw unauthorized('send Authorization: Bearer <organization API key or JWT>, or sign in');
  const token = match[1]!;
  if (OPERATOR_TOKEN.test(token)) {
    const name = authenticators.operator?.(token);
    if (name === undefined) throw unauthorized('the operator token is unknown');
    request.operator = { name };
    return;
  }
  if (ORG_KEY.test(token)) {
    const caller = await authenticators.apiKey(token);
    if (!caller) throw unauthorized('the API key is unknown or revoked');
    request.caller = caller;
    return;
  }
  if (JWT.test(token) && authenticators.jwt) {
    request.caller = await authenticators.jwt(token, namedOrg(request));
    return;
  }
  throw unauthorized('the bearer token is malformed: expected an organization API key (pgw_org_...), a JWT or an operator token (pgw_op_...)');
}

/** Whether the request answers a payment challenge (`Authorization: Payment ...`): the payments plugin authenticates it. */
export function carriesPayment(request: FastifyRequest): boolean {
  return /^Payment +/i.test(request.headers.authorization ?? '');
}

/**
 * Authentication on every /v1 route not marked public (spec §5.3), decided by the matched route,
 * not by how the target was spelled. A Payment credential is left to the payments plugin, which
 * authenticates it on priced requests; on any other, no caller is set and the route refuses.
 */
export function installAuth(app: FastifyInstance, authenticators: Authenticators): void {
  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.url;
    if (!route?.startsWith('/v1/') || request.routeOptions.config.public || carriesPayment(request)) return;
    await authenticateCaller(request, authenticators);
  });
}
