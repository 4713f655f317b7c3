/**
 * Read-model columns added after a table was first made: `ensureReadModel` adds them to a table an
 * earlier version created, with the default the rows already there stand for. So it does the
 * storage parameters of the rollups (ReadModelTable.fillfactor).
 */
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { anomalyWindowsProjection } from '../../projections/anomaly-windows.js';
import { auditProjection } from '../../projections/audit.js';
import { organizationsProjection } from '../../projections/organizations.js';
import { policiesProjection } from '../../projections/policies.js';
import { tableDdl } from '../../projections/projection.js';
import { ensureReadModel } from '../../projections/runner.js';
import { createPool } from '../../src/pg/pool.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const policies = policiesProjection.tables[0]!;
/** The columns later versions added, as the current table defines them. */
const ADDED = ['statement_timeout_ms integer not null, ', 'statement_allow jsonb, statement_deny jsonb not null,\n      denied_tables jsonb not null, migration_safety text not null, row_filters jsonb not null, max_affected_rows integer, write_mode text not null, '];
/** The policies table as versions before statement_timeout_ms made it. */
const earlier = { ...policies, columns: ADDED.reduce((columns, added) => columns.replace(added, ''), policies.columns), addedColumns: [] };

let database: TestDatabase | undefined;
let pool: pg.Pool | undefined;

afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

describe('the policies read model', () => {
  it('gains statement_timeout_ms and the statement kind, denied table, migration, row filter, write cap and write mode fields on a table an earlier version made, its rows at the defaults', async () => {
    for (const column of ['statement_timeout_ms', 'statement_allow', 'statement_deny', 'denied_tables', 'migration_safety', 'row_filters', 'max_affected_rows', 'write_mode']) expect(earlier.columns).not.toContain(column);
    database = await freshDatabase('read_model_columns');
    pool = createPool(database.url);
    await pool.query(`create schema rm; ${tableDdl('rm', earlier)}`);
    await pool.query(`insert into rm.policies (policy_id, project_id, name, read_only, allowed_tables, masked_columns, max_rows, queries_per_day, bytes_per_month, approval,
      honeytokens, audit_mode, allow_catalog, version, status, revision, created_at, updated_at)
      values ('pol_1', 'prj_1', 'p', true, '[]', '{}', null, 0, '0', '{}', '[]', 'best_effort', false, 1, 'active', 0, now(), now())`);
    await ensureReadModel(pool, policiesProjection);
    await ensureReadModel(pool, policiesProjection);
    expect((await pool.query('select statement_timeout_ms, statement_allow, statement_deny, denied_tables, migration_safety, row_filters, max_affected_rows, write_mode from rm.policies')).rows).toEqual([
      { statement_timeout_ms: 30_000, statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'warn', row_filters: {}, max_affected_rows: null, write_mode: 'commit' },
    ]);
  });
});

describe('the organizations read model', () => {
  it('gains billing_provider and subscription_status on a table an earlier version made, its rows at none: what a rebuild gives an organization no operator billed', async () => {
    const organizations = organizationsProjection.tables[0]!;
    const before = { ...organizations, columns: organizations.columns.replace(/billing_provider text not null default 'none',\s*subscription_status text not null default 'none', /, ''), addedColumns: [] };
    expect(before.columns).not.toContain('billing_provider');
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    await pool.query(`create schema if not exists rm_orgs; ${tableDdl('rm_orgs', before)}`);
    await pool.query(`insert into rm_orgs.organizations (org_id, name, plan, features, created_at, updated_at) values ('org_1', 'Acme', 'pro', '[]', now(), now())`);
    await pool.query(tableDdl('rm_orgs', organizations));
    expect((await pool.query('select billing_provider, subscription_status from rm_orgs.organizations')).rows).toEqual([{ billing_provider: 'none', subscription_status: 'none' }]);
  });
});

describe('the rollups every batch updates in place', () => {
  const reloptions = async (schema: string): Promise<Record<string, string[] | null>> =>
    Object.fromEntries(
      (await pool!.query<{ relname: string; reloptions: string[] | null }>(`select c.relname, c.reloptions from pg_class c where c.relnamespace = $1::regnamespace and c.relkind = 'r' order by 1`, [schema])).rows.map(
        (row) => [row.relname, row.reloptions],
      ),
    );
  const ROLLUPS = ['anomaly_baselines', 'anomaly_windows', 'audit_latency_octaves', 'audit_usage_hourly', 'cache_shape_latency_octaves', 'cache_shapes'];

  it('leave half of each page free (fillfactor 50), on a fresh read model and on tables an earlier version made; the other tables keep the default', async () => {
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    const projections = [auditProjection({ keys: new Map() }), anomalyWindowsProjection];
    await pool.query(`create schema rm_fresh; create schema rm_earlier; ${projections.flatMap((p) => p.tables).map((table) => tableDdl('rm_earlier', { ...table, fillfactor: undefined })).join('\n')}`);
    expect(Object.values(await reloptions('rm_earlier')).every((options) => options === null)).toBe(true);
    for (const schema of ['rm_fresh', 'rm_earlier']) {
      for (const projection of projections) await ensureReadModel(pool, projection, schema);
      const options = await reloptions(schema);
      expect(Object.keys(options).filter((table) => options[table] !== null)).toEqual(ROLLUPS);
      for (const table of ROLLUPS) expect(options[table]).toEqual(['fillfactor=50']);
    }
  });
});

describe('the latency histograms', () => {
  /** A row of 64 bucket counts as the database returns it, `counts` at their indexes, zeros elsewhere. */
  const octave = (counts: Record<number, number>): string[] => Array.from({ length: 64 }, (_, i) => String(counts[i] ?? 0));
  const literal = (counts: Record<number, number>): string => `'{${octave(counts).join(',')}}'`;
  const histograms = async (schema: string) => ({
    days: (await pool!.query(`select project_id, to_char(day, 'YYYY-MM-DD') as day, credential, octave, buckets from ${schema}.audit_latency_octaves order by 1, 2, 3, 4`)).rows,
    shapes: (await pool!.query(`select project_id, credential, query_hash, octave, buckets from ${schema}.cache_shape_latency_octaves order by 1, 2, 3, 4`)).rows,
  });
  const cacheShapeColumns = async (schema: string): Promise<string[]> =>
    (await pool!.query<{ attname: string }>(`select attname from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped order by attnum`, [`${schema}.cache_shapes`])).rows.map(
      (row) => row.attname,
    );
  const CACHE_SHAPE = `insert into %s.cache_shapes (project_id, credential, query_hash, normalized_sql, statement_kind, calls, timed, latency_us, bytes_out, runs, refreshes, same_results,
      first_seen, last_seen)`;

  it('of the first layout, a row a bucket, become rows of 64 buckets (one octave) of each day and credential and of each shape, their counts kept, no row for an octave without one; the old tables are dropped', async () => {
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    const audit = auditProjection({ keys: new Map() });
    const shapes = audit.tables.find((table) => table.name === 'cache_shapes')!;
    await pool.query(`create schema rm_hist; ${tableDdl('rm_hist', shapes)}
      create table rm_hist.audit_latency_daily (project_id text not null, day timestamptz not null, credential text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, day, credential, bucket));
      create table rm_hist.cache_shape_latency (project_id text not null, credential text not null, query_hash text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, credential, query_hash, bucket));
      insert into rm_hist.audit_latency_daily values ('prj_1', '2026-11-27', 'agt_1', 3, 2), ('prj_1', '2026-11-27', 'agt_1', 0, 1), ('prj_1', '2026-11-27', '', 5, 7),
        ('prj_1', '2026-11-28', 'agt_1', 1, 4), ('prj_1', '2026-11-27', 'agt_1', 70, 3), ('prj_1', '2026-11-27', 'agt_1', 200, 0);
      ${CACHE_SHAPE.replace('%s', 'rm_hist')}
        values ('prj_1', 'agt_1', 'aa', 'select $1', 'select', 3, 3, 9, 30, 3, 2, 1, now(), now()), ('prj_1', 'agt_1', 'bb', 'select 2', 'select', 1, 0, 0, 10, 1, 0, 0, now(), now());
      insert into rm_hist.cache_shape_latency values ('prj_1', 'agt_1', 'aa', 2, 1), ('prj_1', 'agt_1', 'aa', 4, 2), ('prj_1', 'agt_1', 'aa', 130, 5)`);
    await ensureReadModel(pool, audit, 'rm_hist');
    await ensureReadModel(pool, audit, 'rm_hist');
    expect(await histograms('rm_hist')).toEqual({
      days: [
        { project_id: 'prj_1', day: '2026-11-27', credential: '', octave: 0, buckets: octave({ 5: 7 }) },
        { project_id: 'prj_1', day: '2026-11-27', credential: 'agt_1', octave: 0, buckets: octave({ 0: 1, 3: 2 }) },
        { project_id: 'prj_1', day: '2026-11-27', credential: 'agt_1', octave: 1, buckets: octave({ 6: 3 }) },
        { project_id: 'prj_1', day: '2026-11-28', credential: 'agt_1', octave: 0, buckets: octave({ 1: 4 }) },
      ],
      shapes: [
        { project_id: 'prj_1', credential: 'agt_1', query_hash: 'aa', octave: 0, buckets: octave({ 2: 1, 4: 2 }) },
        { project_id: 'prj_1', credential: 'agt_1', query_hash: 'aa', octave: 2, buckets: octave({ 2: 5 }) },
      ],
    });
    expect((await pool.query('select query_hash, calls::int from rm_hist.cache_shapes order by 1')).rows).toEqual([{ query_hash: 'aa', calls: 3 }, { query_hash: 'bb', calls: 1 }]);
    expect((await pool.query(`select to_regclass('rm_hist.audit_latency_daily') as daily, to_regclass('rm_hist.cache_shape_latency') as shapes`)).rows).toEqual([{ daily: null, shapes: null }]);
  });

  it('of the second layout, an array of every bucket (a row of its own, a column of each shape), and of the first, at once, add to the rows the octave layout holds, summed bucket by bucket; the column is dropped', async () => {
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    const audit = auditProjection({ keys: new Map() });
    const current = audit.tables.filter((table) => ['cache_shapes', 'audit_latency_octaves', 'cache_shape_latency_octaves'].includes(table.name)).map((table) => ({ ...table, absorbs: undefined }));
    await pool.query(`create schema rm_hist2; ${current.map((table) => tableDdl('rm_hist2', table)).join('\n')}
      alter table rm_hist2.cache_shapes add column latency_buckets bigint[] not null default '{}';
      create table rm_hist2.audit_latency_histograms (project_id text not null, day timestamptz not null, credential text not null, buckets bigint[] not null,
        primary key (project_id, day, credential));
      create table rm_hist2.audit_latency_daily (project_id text not null, day timestamptz not null, credential text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, day, credential, bucket));
      create table rm_hist2.cache_shape_latency (project_id text not null, credential text not null, query_hash text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, credential, query_hash, bucket));
      insert into rm_hist2.audit_latency_octaves values ('prj_1', '2026-11-27', 'agt_1', 0, ${literal({ 0: 10 })});
      insert into rm_hist2.audit_latency_histograms values ('prj_1', '2026-11-27', 'agt_1', array[5, 0, 1] || array_fill(0::bigint, array[62]) || array[8]::bigint[]);
      insert into rm_hist2.audit_latency_daily values ('prj_1', '2026-11-27', 'agt_1', 0, 1), ('prj_1', '2026-11-27', 'agt_1', 3, 2);
      ${CACHE_SHAPE.replace('%s', 'rm_hist2').replace('last_seen)', 'last_seen, latency_buckets)')}
        values ('prj_1', 'agt_1', 'aa', 'select $1', 'select', 3, 3, 9, 30, 3, 2, 1, now(), now(), '{0,0,0,0,0,4}');
      insert into rm_hist2.cache_shape_latency values ('prj_1', 'agt_1', 'aa', 1, 1), ('prj_1', 'agt_1', 'aa', 5, 2)`);
    await ensureReadModel(pool, audit, 'rm_hist2');
    expect(await histograms('rm_hist2')).toEqual({
      days: [
        { project_id: 'prj_1', day: '2026-11-27', credential: 'agt_1', octave: 0, buckets: octave({ 0: 16, 2: 1, 3: 2 }) },
        { project_id: 'prj_1', day: '2026-11-27', credential: 'agt_1', octave: 1, buckets: octave({ 1: 8 }) },
      ],
      shapes: [{ project_id: 'prj_1', credential: 'agt_1', query_hash: 'aa', octave: 0, buckets: octave({ 1: 1, 5: 6 }) }],
    });
    expect(await cacheShapeColumns('rm_hist2')).not.toContain('latency_buckets');
    expect(await cacheShapeColumns('rm_hist2')).toEqual(await cacheShapeColumns('rm_hist'));
    expect((await pool.query(`select to_regclass('rm_hist2.audit_latency_histograms') as histograms`)).rows).toEqual([{ histograms: null }]);
  });
});

describe('the audit entries', () => {
  it('have ANALYZE gather statistics on the columns the audit queries filter, group or order by only, on a fresh read model and on a table an earlier version made', async () => {
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    const entries = auditProjection({ keys: new Map() }).tables.find((table) => table.name === 'audit_entries')!;
    await pool.query(`create schema rm_stats_earlier; create schema rm_stats_fresh; ${tableDdl('rm_stats_earlier', { ...entries, unanalyzedColumns: undefined })}`);
    const rows = (schema: string) =>
      pool!.query(`insert into ${schema}.audit_entries (id, project_id, seq, event, ts, ts_at, credential_id, session_id, source, region, client_ip, sql, normalized_sql,
          query_hash, statement_kind, decision_rule, reason, cache_status, rows_returned, bytes_out, latency_ms, latency_us, tables_read, tables_written, tables_blocked,
          parsed, proxy_id, boot_epoch, proxy_seq, prev_hash, entry_hash, position)
        select 'ent_' || n, 'prj_1', n, 'query', 'ts' || n, '2026-11-27T00:00:00Z'::timestamptz + n * interval '1 second', 'agt_' || (n % 5), 'ses_' || (n % 7), 'wire',
               'local', '127.0.0.1', 'select ' || n, 'select $1', 'h' || n, 'select', '', '', 'bypass', 1, 90, 0.1, 100 + n, '[]', '[]', '[]', true, 'prx_1', 1, n,
               md5(n::text), md5((n + 1)::text), n
          from generate_series(1, 500) n`);
    const analyzed = async (schema: string): Promise<string[]> => {
      await pool!.query(`analyze ${schema}.audit_entries`);
      return (await pool!.query<{ attname: string }>(`select attname from pg_stats where schemaname = $1 and tablename = 'audit_entries' order by attname`, [schema])).rows.map((row) => row.attname);
    };
    const unanalyzed = async (schema: string): Promise<string[]> =>
      (await pool!.query<{ attname: string }>(`select attname from pg_attribute where attrelid = $1::regclass and attnum > 0 and attstattarget = 0 order by attname`, [`${schema}.audit_entries`])).rows.map((row) => row.attname);
    expect(await unanalyzed('rm_stats_earlier')).toEqual([]);
    await pool.query(tableDdl('rm_stats_earlier', entries));
    await pool.query(tableDdl('rm_stats_fresh', entries));
    await rows('rm_stats_fresh');
    expect(await analyzed('rm_stats_fresh')).toEqual(['cache_status', 'credential_id', 'event', 'latency_us', 'project_id', 'seq', 'session_id', 'source', 'ts_at']);
    // The earlier table keeps the statistics it had; ANALYZE no longer renews those of the same columns.
    expect(await unanalyzed('rm_stats_earlier')).toEqual(await unanalyzed('rm_stats_fresh'));
    expect((await unanalyzed('rm_stats_fresh')).length).toBe(30);
  });
});
