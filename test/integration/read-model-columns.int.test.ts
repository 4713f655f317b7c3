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
  const ROLLUPS = ['anomaly_baselines', 'anomaly_windows', 'audit_latency_histograms', 'audit_usage_hourly', 'cache_shapes'];

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
  it('of an earlier version, a row a bucket, become a row a day and credential and a column of each shape, their counts kept; the old tables are dropped', async () => {
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    const audit = auditProjection({ keys: new Map() });
    const shapes = audit.tables.find((table) => table.name === 'cache_shapes')!;
    const earlierShapes = { ...shapes, columns: shapes.columns.replace(`, latency_buckets bigint[] not null default '{}'`, ''), addedColumns: [], absorbs: undefined };
    expect(earlierShapes.columns).not.toContain('latency_buckets');
    await pool.query(`create schema rm_hist; ${tableDdl('rm_hist', earlierShapes)}
      create table rm_hist.audit_latency_daily (project_id text not null, day timestamptz not null, credential text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, day, credential, bucket));
      create table rm_hist.cache_shape_latency (project_id text not null, credential text not null, query_hash text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, credential, query_hash, bucket));
      insert into rm_hist.audit_latency_daily values ('prj_1', '2026-11-27', 'agt_1', 3, 2), ('prj_1', '2026-11-27', 'agt_1', 0, 1), ('prj_1', '2026-11-27', '', 5, 7),
        ('prj_1', '2026-11-28', 'agt_1', 1, 4);
      insert into rm_hist.cache_shapes (project_id, credential, query_hash, normalized_sql, statement_kind, calls, timed, latency_us, bytes_out, runs, refreshes, same_results,
          first_seen, last_seen)
        values ('prj_1', 'agt_1', 'aa', 'select $1', 'select', 3, 3, 9, 30, 3, 2, 1, now(), now()), ('prj_1', 'agt_1', 'bb', 'select 2', 'select', 1, 0, 0, 10, 1, 0, 0, now(), now());
      insert into rm_hist.cache_shape_latency values ('prj_1', 'agt_1', 'aa', 2, 1), ('prj_1', 'agt_1', 'aa', 4, 2)`);
    await ensureReadModel(pool, audit, 'rm_hist');
    await ensureReadModel(pool, audit, 'rm_hist');
    expect((await pool.query(`select project_id, to_char(day, 'YYYY-MM-DD') as day, credential, buckets from rm_hist.audit_latency_histograms order by 1, 2, 3`)).rows).toEqual([
      { project_id: 'prj_1', day: '2026-11-27', credential: '', buckets: ['0', '0', '0', '0', '0', '7'] },
      { project_id: 'prj_1', day: '2026-11-27', credential: 'agt_1', buckets: ['1', '0', '0', '2'] },
      { project_id: 'prj_1', day: '2026-11-28', credential: 'agt_1', buckets: ['0', '4'] },
    ]);
    expect((await pool.query('select query_hash, latency_buckets from rm_hist.cache_shapes order by 1')).rows).toEqual([
      { query_hash: 'aa', latency_buckets: ['0', '0', '1', '0', '2'] },
      { query_hash: 'bb', latency_buckets: [] },
    ]);
    expect((await pool.query(`select to_regclass('rm_hist.audit_latency_daily') as daily, to_regclass('rm_hist.cache_shape_latency') as shapes`)).rows).toEqual([{ daily: null, shapes: null }]);
  });

  it('add the old rows to counts the new layout holds already (an earlier version wrote beside this one), summed bucket by bucket', async () => {
    database ??= await freshDatabase('read_model_columns');
    pool ??= createPool(database.url);
    const audit = auditProjection({ keys: new Map() });
    const current = audit.tables.filter((table) => table.name === 'cache_shapes' || table.name === 'audit_latency_histograms').map((table) => ({ ...table, absorbs: undefined }));
    await pool.query(`create schema rm_hist2; ${current.map((table) => tableDdl('rm_hist2', table)).join('\n')}
      create table rm_hist2.audit_latency_daily (project_id text not null, day timestamptz not null, credential text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, day, credential, bucket));
      create table rm_hist2.cache_shape_latency (project_id text not null, credential text not null, query_hash text not null, bucket integer not null, entries bigint not null,
        primary key (project_id, credential, query_hash, bucket));
      insert into rm_hist2.audit_latency_histograms values ('prj_1', '2026-11-27', 'agt_1', '{5,0,1}');
      insert into rm_hist2.audit_latency_daily values ('prj_1', '2026-11-27', 'agt_1', 0, 1), ('prj_1', '2026-11-27', 'agt_1', 3, 2);
      insert into rm_hist2.cache_shapes (project_id, credential, query_hash, normalized_sql, statement_kind, calls, timed, latency_us, bytes_out, runs, refreshes, same_results,
          first_seen, last_seen, latency_buckets)
        values ('prj_1', 'agt_1', 'aa', 'select $1', 'select', 3, 3, 9, 30, 3, 2, 1, now(), now(), '{0,0,0,0,0,4}');
      insert into rm_hist2.cache_shape_latency values ('prj_1', 'agt_1', 'aa', 1, 1), ('prj_1', 'agt_1', 'aa', 5, 2)`);
    await ensureReadModel(pool, audit, 'rm_hist2');
    expect((await pool.query('select buckets from rm_hist2.audit_latency_histograms')).rows).toEqual([{ buckets: ['6', '0', '1', '2'] }]);
    expect((await pool.query('select latency_buckets from rm_hist2.cache_shapes')).rows).toEqual([{ latency_buckets: ['0', '1', '0', '0', '0', '6'] }]);
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
