/**
 * The upstream catalog snapshot (proxy/upstream/catalog-snapshot.ts) against a real PostgreSQL, on
 * a real upstream pool, with short timings: what it reads, that it follows the catalog on its
 * timer and after a change, that an unchanged catalog keeps its version, and that it fails closed
 * when the catalog cannot be read (after the last snapshot's maximum age).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { DatabaseRow } from '../../projections/databases.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { CatalogSnapshots, isUnavailable, type CatalogTiming } from '../../proxy/upstream/catalog-snapshot.js';
import { UpstreamPool } from '../../proxy/upstream/pool.js';
import type { UpstreamHandle } from '../../proxy/upstreams.js';
import { admin, freshDatabase, type TestDatabase } from '../support/pg.js';
import { waitFor } from '../support/wire.js';

const TIMING: CatalogTiming = { refreshMs: 150, maxAgeMs: 600, idleMs: 60_000, readTimeoutMs: 2_000 };
let upstream: TestDatabase;
const role = `catalog_reader_${randomBytes(3).toString('hex')}`;
const handles: UpstreamHandle[] = [];

/** The test server's own user, which created the fixture. */
const owner = (): string => decodeURIComponent(new URL(upstream.url).username);

function handleAs(user: string): UpstreamHandle {
  const url = new URL(upstream.url);
  const pool = new UpstreamPool(
    { host: url.hostname, port: Number(url.port || 5432), database: upstream.name, user, password: user === owner() ? decodeURIComponent(url.password) || 'unused' : 'unused', sslMode: 'disable', applicationName: 'catalog-test', connectTimeoutMs: 5_000, extraStartupParameters: {} },
    { mode: 'transaction', max_connections: 2, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 },
  );
  const handle: UpstreamHandle = {
    database: { database_id: `db-${user}`, revision: 1 } as DatabaseRow,
    pool,
    cancel: async () => undefined,
    onReplica: () => {
      throw new Error('the catalog is read from the primary');
    },
  };
  handles.push(handle);
  return handle;
}

beforeAll(async () => {
  await loadParser();
  upstream = await freshDatabase('catalog_snapshot');
  await admin(upstream.url, (client) =>
    client.query(`create table parent (id int, "Mixed Case" text, dropped int); alter table parent drop column dropped;
      create table child (extra int) inherits (parent); create table grandchild () inherits (child);
      create table events (id int, at date) partition by range (at);
      create table events_2020 partition of events for values from ('2020-01-01') to ('2021-01-01');
      create table accounts (id int primary key);
      create table entries (account int references accounts on delete cascade);
      create table audits (account int references accounts);
      create function entries_touched() returns trigger language plpgsql as 'begin return new; end';
      create trigger entries_touched after insert on entries for each row execute function entries_touched();
      create schema "odd.schema"; create table "odd.schema"."a.b" (x int);
      create view v as select id from parent;
      create materialized view mv as select id from v;
      create domain parent_row as parent;
      create table snaps (id int, one parent, many parent[], via parent_row);
      create function public.md5(integer) returns text language sql as 'select ''x''';
      create function public.lower(integer) returns text language sql as 'select ''y''';
      create operator public.=== (leftarg = int, rightarg = int, function = int4eq);
      create function parents() returns bigint language sql stable as 'select count(*) from parent';
      create function parent_named_at(text, int) returns bool language sql stable as 'select exists (select from parent where id = $2)';
      create function parent_named(text) returns bool language plpgsql stable as 'begin return exists (select from parent where "Mixed Case" = $1); end';
      create operator public.=~= (leftarg = text, rightarg = text, function = texteq);
      create operator public.=?= (leftarg = text, rightarg = int, function = parent_named_at);
      create view calls_sql as select parents() as n;
      create view calls_plpgsql as select id from parent where parent_named("Mixed Case");
      create view calls_random as select random() as r;
      create view calls_operator as select id from parent where "Mixed Case" =?= id;
      create view calls_builtins as select parent.id + 1 as n, now() as ts, "Mixed Case" =~= 'x' as same, count(*) over () as c, events.at > now() - interval '1 day' as recent from parent, events;
      create view over_calls as select n from calls_sql;
      create view whole_parent as select id, p from parent p;
      create view counts_parent as select count(*) from parent;
      create table secured (id int); alter table secured enable row level security; create policy everyone on secured using (true);
      create table unsecured (id int); alter table unsecured enable row level security;
      create role ${role} login password 'unused';`),
  );
});
afterAll(async () => {
  await Promise.all(handles.map((handle) => handle.pool.close()));
  await upstream?.drop();
  await admin(inject('pgUrl'), (client) => client.query(`drop role if exists ${role}`));
});

describe('the catalog snapshot', () => {
  it('reads relations, columns in order, plain-inheritance children, and the schemas defining function and operator names', async () => {
    const snapshots = new CatalogSnapshots(TIMING);
    try {
      const lease = await snapshots.lease(handleAs(owner()));
      const catalog = lease.current();
      if (isUnavailable(catalog)) throw new Error(catalog.unavailable);
      expect(catalog.relation({ schema: 'public', name: 'parent' })).toEqual({ kind: 'table', columns: ['id', 'Mixed Case'], inheritors: [{ schema: 'public', name: 'child' }], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [], viewColumns: [], columnTypes: [23, 25] });
      expect(catalog.relation({ schema: 'public', name: 'child' })).toEqual({ kind: 'table', columns: ['id', 'Mixed Case', 'extra'], inheritors: [{ schema: 'public', name: 'grandchild' }], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [], viewColumns: [], columnTypes: [23, 25, 23] });
      // Partitions are not inheritors: they count as the partitioned table.
      // ... but a write to one reaches the other.
      expect(catalog.relation({ schema: 'public', name: 'events' })).toEqual({ kind: 'partitioned', columns: ['id', 'at'], inheritors: [], writesReach: [{ schema: 'public', name: 'events_2020' }], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [{ schema: 'public', name: 'events_2020' }], rowColumns: [], viewColumns: [], columnTypes: [23, 1082] });
      expect(catalog.relation({ schema: 'public', name: 'events_2020' })).toMatchObject({ writesReach: [{ schema: 'public', name: 'events' }], partitionTree: [{ schema: 'public', name: 'events' }] });
      // A foreign key that cascades from a table is reached by its writes; one with no action is not. A trigger runs code.
      expect(catalog.relation({ schema: 'public', name: 'accounts' })).toMatchObject({ writesReach: [{ schema: 'public', name: 'entries' }], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [], viewColumns: [] });
      expect(catalog.relation({ schema: 'public', name: 'entries' })).toMatchObject({ writesReach: [], writesRunCode: true, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [], viewColumns: [] });
      expect(catalog.relation({ schema: 'odd.schema', name: 'a.b' })).toEqual({ kind: 'table', columns: ['x'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [], viewColumns: [], columnTypes: [23] });
      const parent = { schema: 'public', name: 'parent' };
      expect(catalog.relation({ schema: 'public', name: 'v' })).toMatchObject({ kind: 'view', viewReads: [{ schema: 'public', name: 'parent' }] });
      expect(catalog.relation({ schema: 'public', name: 'mv' })).toMatchObject({ kind: 'matview', viewReads: [{ schema: 'public', name: 'v' }] });
      // The columns a view's definition names; `*` for a relation it reads whole or names no column of.
      expect(catalog.relation({ schema: 'public', name: 'calls_plpgsql' })?.viewColumns).toEqual([{ table: parent, column: 'Mixed Case' }, { table: parent, column: 'id' }]);
      expect(catalog.relation({ schema: 'public', name: 'whole_parent' })?.viewColumns).toEqual([{ table: parent, column: '*' }]);
      expect(catalog.relation({ schema: 'public', name: 'counts_parent' })?.viewColumns).toEqual([{ table: parent, column: '*' }]);
      expect(catalog.relation({ schema: 'public', name: 'snaps' })?.rowColumns).toEqual([{ column: 'one', of: parent }, { column: 'many', of: parent }, { column: 'via', of: parent }]);
      // A view calling a function of the database's (SQL or plpgsql, directly or as an operator's) or a volatile one runs code on a read; immutable and vetted stable built-ins do not.
      for (const view of ['calls_sql', 'calls_plpgsql', 'calls_random', 'calls_operator']) expect(catalog.relation({ schema: 'public', name: view })?.readsRunCode, view).toBe(true);
      for (const view of ['v', 'calls_builtins', 'over_calls']) expect(catalog.relation({ schema: 'public', name: view })?.readsRunCode, view).toBe(false);
      // Row security with a policy runs the policy's expressions on a read.
      expect(catalog.relation({ schema: 'public', name: 'secured' })?.readsRunCode).toBe(true);
      expect(catalog.relation({ schema: 'public', name: 'unsecured' })?.readsRunCode).toBe(false);
      expect(catalog.relation({ schema: 'pg_catalog', name: 'pg_class' })?.columns).toContain('relname');
      expect(catalog.relation({ schema: 'public', name: 'nothing' })).toBeUndefined();
      expect(catalog.functionSchemas('md5')).toEqual(['public']);
      expect(catalog.functionSchemas('lower')).toEqual(['public']);
      expect(catalog.functionSchemas('upper')).toEqual([]);
      expect(catalog.operatorSchemas('===')).toEqual(['public']);
      expect(catalog.operatorSchemas('=')).toEqual([]);
      // pg_proc.proleakproof through pg_operator.oprcode, by exact operand types: int4eq and texteq are, numeric_eq is not; an operator name defined outside pg_catalog never is.
      expect([catalog.leakproofOperator?.('=', 23, 23), catalog.leakproofOperator?.('=', 25, 25), catalog.leakproofOperator?.('=', 1700, 1700), catalog.leakproofOperator?.('=', 23, 1700)]).toEqual([true, true, false, false]);
      expect(catalog.leakproofOperator?.('===', 23, 23)).toBe(false);
      lease.release();
    } finally {
      snapshots.close();
    }
  });

  it('keeps its version (and object) while the catalog is unchanged, and follows a change on its timer and at once after changed()', async () => {
    const snapshots = new CatalogSnapshots({ ...TIMING, refreshMs: 60_000 });
    const timed = new CatalogSnapshots(TIMING);
    try {
      const lease = await snapshots.lease(handleAs(owner()));
      const timedLease = await timed.lease(handleAs(owner()));
      const first = lease.current();
      lease.changed();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(lease.current()).toBe(first);
      await admin(upstream.url, (client) => client.query('create table later () inherits (parent)'));
      const known = (current: ReturnType<typeof lease.current>): boolean => !isUnavailable(current) && current.relation({ schema: 'public', name: 'parent' })!.inheritors.length === 2;
      await waitFor(() => known(timedLease.current()), 3_000, 'the timer to read the new child');
      expect(known(lease.current())).toBe(false);
      lease.changed();
      await waitFor(() => known(lease.current()), 3_000, 'changed() to read the new child');
      expect((lease.current() as { version: string }).version).not.toBe((first as { version: string }).version);
      lease.release();
      timedLease.release();
    } finally {
      snapshots.close();
      timed.close();
      await admin(upstream.url, (client) => client.query('drop table later'));
    }
  });

  it('fails closed: without a readable catalog nothing is decided, and the last snapshot serves only up to its maximum age', async () => {
    await admin(upstream.url, (client) => client.query(`grant select on parent to ${role}; revoke select on pg_catalog.pg_inherits from public`));
    const snapshots = new CatalogSnapshots(TIMING);
    try {
      const lease = await snapshots.lease(handleAs(role));
      const refused = lease.current();
      expect(isUnavailable(refused) && refused.unavailable).toMatch(/^reading it failed: .*permission denied for table pg_inherits/);
      await admin(upstream.url, (client) => client.query('grant select on pg_catalog.pg_inherits to public'));
      await waitFor(() => !isUnavailable(lease.current()), 3_000, 'a readable catalog');
      await admin(upstream.url, (client) => client.query('revoke select on pg_catalog.pg_inherits from public'));
      // Reads fail from now on: the last snapshot serves until it is maxAgeMs old, then statements are refused.
      await waitFor(() => isUnavailable(lease.current()), 3_000, 'the snapshot to age out');
      expect((lease.current() as { unavailable: string }).unavailable).toMatch(/^the last successful read is older than 0.6 s \(reading it failed: .*permission denied/);
      lease.release();
    } finally {
      snapshots.close();
      await admin(upstream.url, (client) => client.query(`grant select on pg_catalog.pg_inherits to public; revoke all on parent from ${role}`));
    }
  });
});
