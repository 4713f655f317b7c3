import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPg } from '../../src/pg/embedded.js';
import { freePort } from './free-port.js';

export interface ScramServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Stops the server, runs `whileDown`, and starts it again on the same port and data. */
  restart(whileDown: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A throwaway embedded PostgreSQL that demands SCRAM-SHA-256 of every login, for tests that need a
 * real password exchange (the machine's own server trusts everyone) or a server they may stop.
 */
export async function startScramServer(): Promise<ScramServer> {
  const dir = await mkdtemp(join(tmpdir(), 'pgward-scram-'));
  await chmod(dir, 0o755);
  const port = await freePort();
  let server: EmbeddedPg = await startEmbeddedPostgres({ dir, port });
  return {
    url: server.url,
    port,
    dir,
    async restart(whileDown) {
      await server.stop();
      try {
        await whileDown();
      } finally {
        server = await startEmbeddedPostgres({ dir, port });
      }
    },
    async stop() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
