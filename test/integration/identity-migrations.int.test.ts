import type { BetterAuthOptions } from 'better-auth';
import { username } from 'better-auth/plugins';
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createPool } from '../../src/pg/pool.js';
import { identityOptions, identitySchemaFingerprint, migrateIdentity } from '../../src/identity/server.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const options = (pool: pg.Pool) =>
  identityOptions({ pool, publicUrl: 'http://gateway.test:8080', secret: 'a'.repeat(44), ssoProviders: [], effects: { onUserCreated: async () => undefined, membershipsOf: async () => [] } });

let database: TestDatabase;
let pool: pg.Pool;
beforeEach(async () => {
  database = await freshDatabase('identity_migrations');
  pool = createPool(database.url, { max: 4 });
});
afterEach(async () => {
  await pool.end();
  await database.drop();
});

const storedFingerprint = async () => (await pool.query<{ comment: string | null }>(`select obj_description('identity'::regnamespace, 'pg_namespace') as comment`)).rows[0]!.comment;

/** How many connections `work` takes from the pool: Better Auth's introspection takes its own, the fingerprint check only the locked one. */
async function acquisitions<T>(work: () => Promise<T>): Promise<{ result: T; acquired: number }> {
  let acquired = 0;
  const count = () => acquired++;
  pool.on('acquire', count);
  try {
    return { result: await work(), acquired };
  } finally {
    pool.off('acquire', count);
  }
}

describe('identity schema migrations at start (docs/identity.md)', () => {
  test('a start on a current schema checks its fingerprint on the locked connection and runs no migration', async () => {
    const first = await migrateIdentity(pool, options(pool));
    expect(first).toBe('migrated');
    expect(await storedFingerprint()).toBe(identitySchemaFingerprint(options(pool)));
    const again = await acquisitions(() => migrateIdentity(pool, options(pool)));
    expect(again).toEqual({ result: 'current', acquired: 1 });
  });

  test('a changed plugin set migrates: the plugin’s columns are added and the new fingerprint stored', async () => {
    await migrateIdentity(pool, options(pool));
    const base = options(pool);
    const extended: BetterAuthOptions = { ...base, plugins: [...base.plugins, username()] };
    expect(identitySchemaFingerprint(extended)).not.toBe(identitySchemaFingerprint(base));
    expect(await migrateIdentity(pool, extended)).toBe('migrated');
    const columns = await pool.query<{ column_name: string }>(`select column_name from information_schema.columns where table_schema = 'identity' and table_name = 'user' and column_name in ('username', 'displayUsername') order by 1`);
    expect(columns.rows.map((r) => r.column_name)).toEqual(['displayUsername', 'username']);
    expect(await storedFingerprint()).toBe(identitySchemaFingerprint(extended));
    expect(await migrateIdentity(pool, extended)).toBe('current');
  });

  test('a plugin’s new version migrates even when its tables look the same', async () => {
    await migrateIdentity(pool, options(pool));
    const base = options(pool);
    const bumped: BetterAuthOptions = { ...base, plugins: base.plugins.map((plugin) => (plugin.id === 'jwt' ? { ...plugin, version: '99.0.0' } : plugin)) };
    const run = await acquisitions(() => migrateIdentity(pool, bumped));
    expect(run.result).toBe('migrated');
    expect(run.acquired).toBeGreaterThan(1);
    expect(await storedFingerprint()).toBe(identitySchemaFingerprint(bumped));
  });

  test('two processes starting together on an empty database: one migrates, the other waits on the lock and finds it current', async () => {
    const other = createPool(database.url, { max: 4 });
    try {
      const results = await Promise.all([migrateIdentity(pool, options(pool)), migrateIdentity(other, options(other))]);
      expect(results.sort()).toEqual(['current', 'migrated']);
    } finally {
      await other.end();
    }
  });
});
