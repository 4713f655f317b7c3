import { randomBytes } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { DomainError } from '../../commands/domain-error.js';
import { StoreError } from '../store/port.js';
import { Problem, problemBody, problemCatalog, type FieldError, type ProblemCode } from './problem.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Keeps a client's well-formed X-Request-Id, else makes one. Passed to fastify as `genReqId`. */
export function requestId(request: { headers: Record<string, string | string[] | undefined> }): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : `req_${randomBytes(12).toString('hex')}`;
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  for (const [name, value] of Object.entries(problem.options.headers ?? {})) void reply.header(name, value);
  return reply.code(problem.status).type('application/problem+json').send(problemBody(problem, reply.request.id));
}

function fieldPath(path: readonly PropertyKey[], where: string): string {
  const dotted = path.map(String).join('.');
  return where === 'body' ? dotted || '(body)' : dotted || where;
}

const fastifyCodes: Record<string, ProblemCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'INVALID_INPUT',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_INPUT',
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_INPUT',
};

/** Turns anything thrown by a route into a problem; unknown failures become a 500 without internals. */
export function toProblem(error: unknown, request: FastifyRequest): Problem {
  if (error instanceof Problem) return error;
  if (error instanceof DomainError) return new Problem(error.code, error.message);
  if (hasZodFastifySchemaValidationErrors(error)) {
    const errors: FieldError[] = error.validation.map((issue) => ({
      field: fieldPath(issue.instancePath.split('/').filter(Boolean), error.validationContext ?? 'body'),
      message: issue.message ?? 'is invalid',
    }));
    return new Problem('INVALID_INPUT', `invalid ${error.validationContext ?? 'request'}: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, { errors });
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new Problem('UNSUPPORTED_MEDIA_TYPE', 'send the body as JSON with Content-Type: application/json');
  }
  const mapped = fastifyError.code ? fastifyCodes[fastifyError.code] : undefined;
  if (mapped) return new Problem(mapped, fastifyError.message);
  if (fastifyError.statusCode === 400 && !isResponseSerializationError(error)) return new Problem('INVALID_INPUT', fastifyError.message);
  if (error instanceof StoreError && error.code === 'STORE_UNAVAILABLE') {
    return new Problem('SERVICE_UNAVAILABLE', 'the event store is unavailable; retry shortly', { headers: { 'retry-after': '5' } });
  }
  request.log.error({ err: error }, 'request failed');
  return new Problem('INTERNAL_ERROR', `the server failed; quote request id ${request.id} when reporting it`);
}

function patternToRegex(url: string): RegExp {
  const escaped = url
    .split('/')
    .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${escaped}/?$`);
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body as received, before parsing; undefined without one. */
    rawBody?: string;
  }
}

/**
 * The conventions every endpoint inherits (spec §7, ARCHITECTURE.md §8): X-Request-Id on every
 * response, problem+json for every error, 405 with Allow for a known path, 415 for a body that is
 * not JSON, and the catalog of problem codes at the `type` URIs.
 */
export function installConventions(app: FastifyInstance): void {
  const routes: { pattern: RegExp; method: string }[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) routes.push({ pattern: patternToRegex(route.url), method: method.toUpperCase() });
  });

  app.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
    const length = Number(request.headers['content-length'] ?? 0);
    const hasBody = length > 0 || request.headers['transfer-encoding'] !== undefined;
    if (hasBody && BODY_METHODS.has(request.method) && !request.routeOptions.config.rawBody) {
      const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/json' && !type?.endsWith('+json')) {
        return sendProblem(reply, new Problem('UNSUPPORTED_MEDIA_TYPE', 'send the body as JSON with Content-Type: application/json'));
      }
    }
  });

  app.setErrorHandler((error, request, reply) => sendProblem(reply, toProblem(error, request)));

  // Clients often send Content-Type: application/json on a DELETE or POST without a body; that is no body, not bad JSON.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    // The payments plugin binds a challenge to the body's digest (RFC 9530), which is of the bytes sent.
    request.rawBody = String(body);
    return parseJson(request, String(body), done);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))].filter((m) => m !== 'HEAD').sort();
    if (allowed.length > 0) {
      return sendProblem(reply, new Problem('METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`, { headers: { allow: allowed.join(', ') } }));
    }
    return sendProblem(reply, new Problem('NOT_FOUND', `no resource at ${path}`));
  });

  app.get('/v1/problems/:code', { schema: { hide: true } }, async (request, reply) => {
    const code = (request.params as { code: string }).code as ProblemCode;
    const entry = problemCatalog[code];
    if (!entry) return sendProblem(reply, new Problem('NOT_FOUND', `no problem code ${code}`));
    return { code, status: entry.status, title: entry.title };
  });
}
