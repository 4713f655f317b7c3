/**
 * The estimate of a held write (proxy/approval-estimate.ts) on a real PostgreSQL: a trial run's exact
 * count, rolled back; the planner's rows when the trial runs out of time; none when the trial fails.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateRows, planRows, type RunStatement } from '../../proxy/approval-estimate.js';
import { connectUpstream, type UpstreamConnection } from '../../proxy/upstream/connection.js';
import { runStatement } from '../../src/mcp/agent/statement.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let database: TestDatabase;
let connection: UpstreamConnection;
let client: pg.Client;
let run: RunStatement;

beforeAll(async () => {
  database = await freshDatabase('approval_estimate');
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query('create table t (id int primary key, v int not null); insert into t select g, g from generate_series(1, 100) g; analyze t');
  const url = new URL(database.url);
  connection = await connectUpstream({
    host: url.hostname,
    port: Number(url.port || 5432),
    database: decodeURIComponent(url.pathname.slice(1)),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    sslMode: 'disable',
    connectTimeoutMs: 5_000,
  });
  run = (statement) => runStatement(connection, statement);
});
afterAll(async () => {
  connection?.close();
  await client?.end();
  await database?.drop();
});

const total = async (): Promise<number> => (await client.query<{ s: number }>('select sum(v)::int as s from t')).rows[0]!.s;

describe('estimating a held write', () => {
  it('counts the rows of a trial run and rolls it back: the table is unchanged', async () => {
    const before = await total();
    expect(await estimateRows(run, 'update t set v = 0 where id <= 10', [])).toEqual({ rows: 10, method: 'trial' });
    expect(await estimateRows(run, 'delete from t where id > $1', ['95'])).toEqual({ rows: 5, method: 'trial' });
    expect(await estimateRows(run, 'insert into t select g, g from generate_series(101, 103) g', [])).toEqual({ rows: 3, method: 'trial' });
    expect(await total()).toBe(before);
    expect((await client.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n).toBe(100);
  });

  it('asks the planner when the trial runs out of time: the rows fed to the ModifyTable node, not its own 0', async () => {
    const sql = 'update t set v = 0 where id <= 40 and pg_sleep(0.05) is not null';
    const estimate = await estimateRows(run, sql, [], 200);
    const explained = (await client.query<{ 'QUERY PLAN': unknown }>(`explain (format json) ${sql}`)).rows[0]!['QUERY PLAN'] as [{ Plan: { 'Node Type': string; 'Plan Rows': number; Plans: [{ 'Plan Rows': number }] } }];
    expect(explained[0].Plan['Node Type']).toBe('ModifyTable');
    expect(explained[0].Plan['Plan Rows']).toBe(0);
    expect(estimate).toEqual({ rows: explained[0].Plan.Plans[0]['Plan Rows'], method: 'plan' });
    expect(estimate!.rows).toBeGreaterThan(0);
    expect(await total()).toBe(5050);
  });

  it('makes none when the trial fails (the write would fail too), and the connection stays usable', async () => {
    expect(await estimateRows(run, 'update t set v = v / 0 where id = 1', [])).toBeNull();
    expect(await estimateRows(run, 'insert into t values (1, 1)', [])).toBeNull();
    expect(await estimateRows(run, 'update t set v = 0 where id = 1', [])).toEqual({ rows: 1, method: 'trial' });
  });

  it('reads plan rows from EXPLAIN (FORMAT JSON) text or JSON, and nothing from anything else', () => {
    const modify = [{ Plan: { 'Node Type': 'ModifyTable', 'Plan Rows': 0, Plans: [{ 'Node Type': 'Seq Scan', 'Plan Rows': 12.4 }] } }];
    expect(planRows(modify)).toBe(12);
    expect(planRows(JSON.stringify(modify))).toBe(12);
    expect(planRows([{ Plan: { 'Node Type': 'Result', 'Plan Rows': 1 } }])).toBe(1);
    expect(planRows([{ Plan: { 'Node Type': 'Seq Scan', 'Plan Rows': -1 } }])).toBeUndefined();
    expect(planRows({})).toBeUndefined();
    expect(planRows([])).toBeUndefined();
  });
});
