import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/pg/embedded.js';
import { freePort } from './free-port.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
    /** The database test APIs' state databases are copied from (stateDatabase in test/support/api.ts); made by the first that needs it, dropped at the end of the run. */
    stateTemplate: string;
  }
}

/** Uses PGWARD_TEST_PG_URL when set; otherwise starts an embedded PostgreSQL for the run, so `npm test` needs only Node. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stateTemplate = `pgward_template_${randomBytes(6).toString('hex')}`;
  project.provide('stateTemplate', stateTemplate);
  const dropTemplate = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`drop database if exists ${stateTemplate} with (force)`).finally(() => client.end());
  };
  const given = process.env.PGWARD_TEST_PG_URL;
  if (given) {
    project.provide('pgUrl', given);
    return async () => {
      await dropTemplate(given);
    };
  }
  const dir = await mkdtemp(join(tmpdir(), 'pgward-test-'));
  const embedded = await startEmbeddedPostgres({ dir, port: await freePort() });
  console.log(`[pgward tests] PGWARD_TEST_PG_URL is not set: started an embedded PostgreSQL on port ${embedded.port}`);
  project.provide('pgUrl', embedded.url);
  return async () => {
    await dropTemplate(embedded.url);
    await embedded.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
