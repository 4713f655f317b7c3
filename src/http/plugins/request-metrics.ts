import type { FastifyInstance } from 'fastify';

/** One answered request, as its route was declared (`/v1/projects/:project_id`), never the raw URL. */
export interface ObservedRequest {
  /** The route's template, or `unmatched` for a path no route serves. */
  readonly route: string;
  /** One of METHODS, or `OTHER`. */
  readonly method: string;
  readonly status: number;
  readonly seconds: number;
}

export type RequestObserver = (request: ObservedRequest) => void;

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Tells `observe` of every request once its response is written. Timed from the raw response, so
 * replies that routes hijack (the MCP endpoints write their own) are counted like any other.
 */
export function installRequestMetrics(app: FastifyInstance, observe: RequestObserver): void {
  app.addHook('onRequest', (request, reply, done) => {
    const started = performance.now();
    reply.raw.once('finish', () =>
      observe({
        route: request.routeOptions.url ?? 'unmatched',
        method: METHODS.has(request.method) ? request.method : 'OTHER',
        status: reply.raw.statusCode,
        seconds: (performance.now() - started) / 1000,
      }),
    );
    done();
  });
}
