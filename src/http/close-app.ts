import type { FastifyInstance } from 'fastify';

/**
 * Closes an HTTP server: requests under way get `drainMs` to finish, then every connection left is
 * cut. Node's close waits for each connection that has not sent its request yet as for one under
 * way, so without the cut a client that connected and sent nothing, or a reconnect that raced the
 * close, would hold the shutdown until it went away.
 */
export async function closeApp(app: FastifyInstance, drainMs: number): Promise<void> {
  const cut = setTimeout(() => app.server.closeAllConnections(), drainMs);
  try {
    await app.close();
  } finally {
    clearTimeout(cut);
  }
}
