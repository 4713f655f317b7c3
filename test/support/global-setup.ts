import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/pg/embedded.js';
import { freePort } from './free-port.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
  }
}

/** Uses PGWARD_TEST_PG_URL when set; otherwise starts an embedded PostgreSQL for the run, so `npm test` needs only Node. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const given = process.env.PGWARD_TEST_PG_URL;
  if (given) {
    project.provide('pgUrl', given);
    return async () => undefined;
  }
  const dir = await mkdtemp(join(tmpdir(), 'pgward-test-'));
  const pg = await startEmbeddedPostgres({ dir, port: await freePort() });
  console.log(`[pgward tests] PGWARD_TEST_PG_URL is not set: started an embedded PostgreSQL on port ${pg.port}`);
  project.provide('pgUrl', pg.url);
  return async () => {
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
