/**
 * The PostgreSQL event store's schema on a database an earlier version created: its append function
 * is replaced, not kept beside the new one; its payload columns lose their statistics.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/store/postgres.js';
import { admin, freshDatabase, type TestDatabase } from '../support/pg.js';

let database: TestDatabase | undefined;

afterAll(async () => {
  await database?.drop();
});

describe('the event store schema', () => {
  it('drops the append function that took the payloads as bytea arrays', async () => {
    database = await freshDatabase('store_migration');
    await admin(database.url, (client) =>
      client.query(`create schema pgward;
        create function pgward.append_events(p_stream text, p_expected text, p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[])
          returns table (outcome text, actual integer, last_position bigint) language sql as $$ select 'ok'::text, 0, 0::bigint $$`),
    );
    const store = await createPostgresEventStore(database.url);
    try {
      const signatures = await admin(database.url, (client) =>
        client.query<{ args: string }>(`select pg_get_function_identity_arguments(oid) as args from pg_proc where proname = 'append_events' and pronamespace = 'pgward'::regnamespace`),
      );
      expect(signatures.rows.map((row) => row.args)).toEqual(['p_stream text, p_expected text, p_ids uuid[], p_types text[], p_payloads bytea, p_bounds integer[]']);
      const event = { id: '00000000-0000-4000-8000-000000000001', type: 'Tested.v1', data: Buffer.from('{"n":1}'), metadata: Buffer.from('{}') };
      await store.append('migrated-1', [event], 'no_stream');
      const [read] = await store.readStream('migrated-1');
      expect([read?.id, Buffer.from(read!.data).toString(), Buffer.from(read!.metadata).toString()]).toEqual([event.id, '{"n":1}', '{}']);
    } finally {
      await store.close();
    }
  });

  it('replaces the append function that did not report where the category stood (its result type changes)', async () => {
    const previous = database;
    database = await freshDatabase('store_migration_category');
    await previous?.drop();
    await admin(database.url, (client) =>
      client.query(`create schema pgward;
        create function pgward.append_events(p_stream text, p_expected text, p_ids uuid[], p_types text[], p_payloads bytea, p_bounds integer[])
          returns table (outcome text, actual integer, last_position bigint) language sql as $$ select 'ok'::text, 0, 0::bigint $$`),
    );
    const store = await createPostgresEventStore(database.url);
    try {
      const event = (n: number) => ({ id: `00000000-0000-4000-8000-00000000000${n}`, type: 'Tested.v1', data: Buffer.from(`{"n":${n}}`), metadata: Buffer.from('{}') });
      expect(await store.append('migrated-1', [event(1)], 'no_stream')).toEqual({ nextExpectedRevision: 0, position: 0n, duplicate: false, categoryBefore: -1n });
      expect(await store.append('migrated-2', [event(2)], 'no_stream')).toEqual({ nextExpectedRevision: 0, position: 1n, duplicate: false, categoryBefore: 0n });
    } finally {
      await store.close();
    }
  });

  it('has ANALYZE gather statistics on stream, revision, position and type only, on a table an earlier version made', async () => {
    const previous = database;
    database = await freshDatabase('store_migration_statistics');
    await previous?.drop();
    // The table as versions before made it, with rows.
    await admin(database.url, (client) =>
      client.query(`create schema pgward;
        create table pgward.events (position bigint primary key, stream text not null, revision integer not null, event_id uuid not null unique, type text not null,
          data bytea not null, metadata bytea not null, recorded_at timestamptz not null default now(), unique (stream, revision));
        insert into pgward.events (position, stream, revision, event_id, type, data, metadata)
          select n, 'audit-prj_' || (n % 3), n / 3, gen_random_uuid(), 'StatementDecided.v2', convert_to(repeat('x', 200) || n, 'UTF8'), '\\x7b7d'::bytea from generate_series(0, 2999) n`),
    );
    const store = await createPostgresEventStore(database.url);
    await store.close();
    const analyzed = await admin(database.url, async (client) => {
      await client.query('analyze pgward.events');
      return (await client.query<{ attname: string }>(`select attname from pg_stats where schemaname = 'pgward' and tablename = 'events' order by attname`)).rows.map((row) => row.attname);
    });
    expect(analyzed).toEqual(['position', 'revision', 'stream', 'type']);
  });
});
