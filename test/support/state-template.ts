/**
 * The state database a test API starts on: a copy of one template per run, in which the identity
 * server's tables are already made, so the API's start finds them current (src/identity/server.ts)
 * instead of creating them in every test's database. The first worker that needs the template makes
 * it, under an advisory lock on the server; the global setup drops it at the end of the run.
 */
import { inject } from 'vitest';
import { identityOptions, migrateIdentity } from '../../src/identity/server.js';
import { createPool } from '../../src/pg/pool.js';
import { admin, freshDatabase, withDatabase, type TestDatabase } from './pg.js';

let made: Promise<void> | undefined;

async function makeTemplate(serverUrl: string, template: string): Promise<void> {
  await admin(serverUrl, async (client) => {
    // Released when this session ends, after the template's own connections are closed: CREATE DATABASE ... TEMPLATE refuses a template in use.
    await client.query('select pg_advisory_lock(hashtext($1))', [template]);
    if ((await client.query('select 1 from pg_database where datname = $1', [template])).rowCount) return;
    await client.query(`create database ${template}`);
    const pool = createPool(withDatabase(serverUrl, template), { max: 2 });
    try {
      await migrateIdentity(pool, identityOptions({ pool, publicUrl: 'http://template.test', secret: 'template', ssoProviders: [], effects: { onUserCreated: async () => undefined, membershipOf: async () => undefined } }));
    } finally {
      await pool.end();
    }
  });
}

export async function stateDatabase(label: string): Promise<TestDatabase> {
  const serverUrl = inject('pgUrl');
  const template = inject('stateTemplate');
  made ??= makeTemplate(serverUrl, template);
  await made;
  return freshDatabase(label, serverUrl, template);
}
