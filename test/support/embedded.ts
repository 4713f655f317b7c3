import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPg } from '../../src/pg/embedded.js';
import { freePort } from './free-port.js';

/**
 * A throwaway embedded PostgreSQL that demands SCRAM-SHA-256 of every login, for tests that need a
 * real password exchange (the machine's own server trusts everyone). Its data lives in a temp dir.
 */
export async function startScramServer(): Promise<EmbeddedPg & { dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'pgward-scram-'));
  await chmod(dir, 0o755);
  const server = await startEmbeddedPostgres({ dir, port: await freePort() });
  return {
    ...server,
    dir,
    async stop() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
