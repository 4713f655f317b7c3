/**
 * Read-model indexes as `ensureReadModel` leaves them, on a new database and on one an earlier
 * version created: the audit entries' index by event became a partial index of the gap markers,
 * and their time and session indexes narrower ones.
 */
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { auditProjection } from '../../projections/audit.js';
import { tableDdl } from '../../projections/projection.js';
import { ensureReadModel } from '../../projections/runner.js';
import { createPool } from '../../src/pg/pool.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const projection = auditProjection({ keys: new Map() });
const entries = projection.tables.find((table) => table.name === 'audit_entries')!;
/** The table as versions before the partial index created it. */
const earliest = { ...entries, indexes: ['project_id, ts_at desc, seq desc', 'project_id, session_id, seq', 'project_id, credential_id, ts_at', 'project_id, event, ts_at, seq'], retiredIndexes: [] };
/** The table as versions before the narrower time and session indexes created it. */
const earlier = { ...entries, indexes: ['project_id, ts_at desc, seq desc', 'project_id, session_id, seq', ...entries.indexes!.slice(2)], retiredIndexes: ['audit_entries_i3'] };

const databases: TestDatabase[] = [];
const pools: pg.Pool[] = [];

async function database(label: string): Promise<pg.Pool> {
  const db = await freshDatabase(label);
  databases.push(db);
  const pool = createPool(db.url);
  pools.push(pool);
  return pool;
}

async function indexes(pool: pg.Pool): Promise<Record<string, string>> {
  const { rows } = await pool.query<{ indexname: string; indexdef: string }>(`select indexname, indexdef from pg_indexes where schemaname = 'rm' and tablename = 'audit_entries'`);
  return Object.fromEntries(rows.map((row) => [row.indexname, row.indexdef.replace(/^.* USING btree /, '')]));
}

const expected = {
  audit_entries_pkey: '(project_id, seq)',
  audit_entries_ts: '(project_id, ts_at)',
  audit_entries_session: '(session_id, seq)',
  audit_entries_i2: '(project_id, credential_id, ts_at)',
  audit_entries_gap_markers: "(project_id, ts_at, seq) WHERE (event = 'gap_marker'::text)",
};

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
  await Promise.all(databases.map((db) => db.drop()));
});

describe('the audit entries indexes', () => {
  it('are the time, session and credential indexes and the partial gap-marker index on a new database', async () => {
    const pool = await database('indexes_new');
    await ensureReadModel(pool, projection);
    expect(await indexes(pool)).toEqual(expected);
  });

  for (const [label, made, retired] of [
    ['the index by event', earliest, 'audit_entries_i3'],
    ['the wider time and session indexes', earlier, 'audit_entries_i1'],
  ] as const) {
    it(`replace ${label} of an earlier version, once and for good`, async () => {
      const pool = await database('indexes_upgraded');
      await pool.query(`create schema rm; ${tableDdl('rm', made)}`);
      expect(Object.keys(await indexes(pool))).toContain(retired);
      await ensureReadModel(pool, projection);
      expect(await indexes(pool)).toEqual(expected);
      await ensureReadModel(pool, projection);
      expect(await indexes(pool)).toEqual(expected);
    });
  }

  it('serve the session summary by the session index, which leaves the project to the filter', async () => {
    const pool = await database('indexes_session_plan');
    await ensureReadModel(pool, projection);
    const client = await pool.connect();
    try {
      await client.query('set enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `explain select event from rm.audit_entries where project_id = $1 and session_id = $2 order by seq limit 10001`,
        ['prj_indexes000000000000000000', 'prx_1.1700000000.7'],
      );
      const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
      expect(plan).toContain('Index Scan using audit_entries_session');
      expect(plan).toContain("Filter: (project_id = 'prj_indexes000000000000000000'::text)");
    } finally {
      client.release();
    }
  });

  it('serve the usage report gap-marker query', async () => {
    const pool = await database('indexes_plan');
    await ensureReadModel(pool, projection);
    const client = await pool.connect();
    try {
      await client.query('set enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `explain select reason, gap->'count' as count from rm.audit_entries
          where project_id = $1 and event = 'gap_marker' and ts_at >= $2 and ts_at < $3 order by ts_at, seq limit $4`,
        ['prj_indexes000000000000000000', '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z', 101],
      );
      expect(rows.map((row) => row['QUERY PLAN']).join('\n')).toContain('audit_entries_gap_markers');
    } finally {
      client.release();
    }
  });
});
