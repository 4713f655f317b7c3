import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

export type PartState = { ok: true; detail?: string } | { ok: false; detail: string };

export interface AppOptions {
  logger: FastifyBaseLogger;
  metrics: Registry;
  /** State of each part (event store, read models, bus, projector), checked on every /healthz. */
  health: () => Promise<Record<string, PartState>>;
}

/** The HTTP surface. Routes are registered here; the composition root decides what backs them. */
export function buildApp(options: AppOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger,
    // Probes and scrapes would drown the request log.
    logController: new LogController({ disableRequestLogging: (request) => request.url === '/healthz' || request.url === '/metrics' }),
    bodyLimit: 2 * 1024 * 1024,
  });

  app.get('/healthz', async (_request, reply) => {
    const parts = await options.health();
    const ok = Object.values(parts).every((part) => part.ok);
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'degraded', parts });
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type(options.metrics.contentType).send(await options.metrics.metrics());
  });

  return app;
}
