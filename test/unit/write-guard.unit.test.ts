import { beforeAll, describe, expect, it } from 'vitest';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { capExceeded, taggedRows, writeGuardOf, writeRefusal, writeShape, type WriteShape } from '../../proxy/policy/write-guard.js';

beforeAll(loadParser);

function shapeOf(sql: string): WriteShape {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(`does not parse: ${sql}`);
  return writeShape(parsed.statements);
}

const writer = { read_only: false, max_affected_rows: null, write_mode: 'commit', max_rows: null } as const;

describe('what a message writes', () => {
  it('counts a lone INSERT, UPDATE or DELETE by its tag, CTEs that only read included', () => {
    for (const sql of ['delete from orders', 'update orders set total = 0 where id = 1 returning id', 'insert into t select * from s', 'with x as (select 1) delete from t using x']) {
      expect(shapeOf(sql).rows, sql).toBe('counted');
    }
    expect(shapeOf('delete from t returning id')).toEqual({ rows: 'counted', ddl: false, returning: true });
    expect(shapeOf('select 1; select 2')).toEqual({ rows: 'none', ddl: false });
    expect(shapeOf('create table t (id int)')).toEqual({ rows: 'none', ddl: true });
  });

  it('names what no tag counts', () => {
    expect(shapeOf('truncate t')).toMatchObject({ rows: 'uncounted', what: 'TRUNCATE' });
    expect(shapeOf('copy t from stdin')).toMatchObject({ rows: 'uncounted', what: 'COPY FROM' });
    expect(shapeOf('copy t to stdout')).toMatchObject({ rows: 'none' });
    expect(shapeOf('merge into t using s on t.id = s.id when matched then delete')).toMatchObject({ rows: 'uncounted', what: 'MERGE' });
    expect(shapeOf('explain analyze delete from t')).toMatchObject({ rows: 'uncounted', what: 'EXPLAIN ANALYZE of a write' });
    expect(shapeOf('explain delete from t')).toEqual({ rows: 'none', ddl: false });
    expect(shapeOf('copy (delete from t returning id) to stdout')).toMatchObject({ rows: 'uncounted', what: 'COPY of a data-modifying statement' });
    for (const sql of ['with d as (delete from t returning *) select * from d', 'with d as (delete from t returning *) insert into u select * from d', 'select * from t where exists (with d as (update t set a = 1 returning 1) select 1 from d)']) {
      expect(shapeOf(sql), sql).toMatchObject({ rows: 'uncounted', what: expect.stringContaining('a data-modifying WITH query') });
    }
    expect(shapeOf('select 1; delete from t')).toMatchObject({ rows: 'uncounted', what: 'a write in a query string of several statements' });
  });
});

describe('what a policy makes of it', () => {
  it('guards counted writes under a cap or rollback only, never under read_only', () => {
    const counted = shapeOf('delete from t');
    expect(writeGuardOf(writer, counted)).toBeUndefined();
    expect(writeGuardOf({ ...writer, max_affected_rows: 10 }, counted)).toEqual({ cap: 10, rollback: false });
    expect(writeGuardOf({ ...writer, write_mode: 'rollback' }, counted)).toEqual({ cap: undefined, rollback: true });
    expect(writeGuardOf({ ...writer, read_only: true, max_affected_rows: 10 }, counted)).toBeUndefined();
    expect(writeGuardOf({ ...writer, max_affected_rows: 10 }, shapeOf('select 1'))).toBeUndefined();
  });

  it('refuses sandbox writes, uncounted writes under a cap, what cannot be rehearsed, and RETURNING under max_rows', () => {
    expect(writeRefusal({ ...writer, write_mode: 'sandbox' }, shapeOf('insert into t values (1)'))?.rule).toBe('write_mode.sandbox_unavailable');
    expect(writeRefusal({ ...writer, write_mode: 'sandbox' }, shapeOf('create index on t (a)'))?.rule).toBe('write_mode.sandbox_unavailable');
    expect(writeRefusal({ ...writer, write_mode: 'sandbox' }, shapeOf('select * from t'))).toBeUndefined();
    // On a sandbox branch the writes run there; sandboxed changes nothing for the other modes.
    for (const sql of ['insert into t values (1)', 'create index on t (a)', 'truncate t', 'update t set a = 1']) {
      expect(writeRefusal({ ...writer, write_mode: 'sandbox' }, shapeOf(sql), true), sql).toBeUndefined();
    }
    expect(writeRefusal({ ...writer, write_mode: 'rollback' }, shapeOf('truncate t'), true)?.rule).toBe('write_mode.rollback_unsupported');
    expect(writeRefusal({ ...writer, max_affected_rows: 10 }, shapeOf('truncate t'), true)?.rule).toBe('write_cap.unbounded');
    expect(writeRefusal({ ...writer, max_affected_rows: 10 }, shapeOf('truncate t'))).toEqual({
      rule: 'write_cap.unbounded',
      sqlstate: '0A000',
      reason: 'this credential’s policy caps every write at 10 rows (max_affected_rows), and the gateway cannot count the rows TRUNCATE affects, so it refuses it (rule write_cap.unbounded); send one INSERT, UPDATE or DELETE per query, with a WHERE clause that touches at most 10 rows',
    });
    expect(writeRefusal(writer, shapeOf('truncate t'))).toBeUndefined();
    expect(writeRefusal({ ...writer, max_affected_rows: 10 }, shapeOf('create table t (id int)'))).toBeUndefined();
    expect(writeRefusal({ ...writer, write_mode: 'rollback' }, shapeOf('create table t (id int)'))?.rule).toBe('write_mode.rollback_unsupported');
    expect(writeRefusal({ ...writer, write_mode: 'rollback' }, shapeOf('delete from t'))).toBeUndefined();
    expect(writeRefusal({ ...writer, max_affected_rows: 10, max_rows: 5 }, shapeOf('delete from t returning id'))?.rule).toBe('max_rows.returning');
    expect(writeRefusal({ ...writer, max_rows: 5 }, shapeOf('delete from t returning id'))).toBeUndefined();
    expect(writeRefusal({ ...writer, read_only: true, write_mode: 'sandbox' }, shapeOf('delete from t'))).toBeUndefined();
  });

  it('reads rows from command tags, and says the cap and the count', () => {
    expect(['INSERT 0 5', 'UPDATE 3', 'DELETE 0', 'MERGE 7', 'SELECT 2', 'COPY 4'].map(taggedRows)).toEqual([5, 3, 0, 7, undefined, undefined]);
    expect(capExceeded(10, 1000).reason).toMatch(/^the write affected 1000 rows, and this credential’s policy allows at most 10 in one statement \(max_affected_rows 10\), so it was rolled back and nothing changed \(rule write_cap\.exceeded\)/);
    expect(capExceeded(10, undefined).reason).toMatch(/^the write’s rows could not be counted/);
  });
});
