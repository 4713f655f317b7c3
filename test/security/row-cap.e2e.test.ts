/**
 * A policy's max_rows holds per statement result, through the real proxy: across every Execute of a
 * portal (whatever its row limits, pipelined or not), across FETCHes of a cursor (psycopg2's named
 * cursors), and for a simple query of several statements, without refusing what can be capped.
 * The red team's fixture: a read-only policy allowing public.orders (1000 rows, ids 1..1000) and
 * public.customers, email masked, max_rows 50.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPolicy, registerOn } from '../support/proxy-agents.js';
import { missingTool } from '../support/tools.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { RawWire, serialize, type Reply } from '../support/raw-wire.js';

const CAP = 50;
const NOTICE = `N pgward: the result was cut at ${CAP} rows by this credential’s policy (max_rows); aggregate or filter to see what lies beyond`;
const ids = (from: number, to: number): string[] => Array.from({ length: to - from + 1 }, (_, i) => String(from + i));

let gateway: TestGateway;
let agent: AgentSecrets;
let wire: RawWire;

beforeAll(async () => {
  gateway = await startGateway('row_cap');
  const policyId = await createPolicy(gateway, {
    name: 'red team reader',
    read_only: true,
    allowed_tables: ['public.orders', 'public.customers'],
    masked_columns: { 'public.customers.email': 'redact' },
    max_rows: CAP,
  });
  agent = await registerOn(gateway, policyId, 'red team reader');
});
afterAll(async () => {
  await gateway?.stop();
});

async function withWire<T>(body: (wire: RawWire) => Promise<T>): Promise<T> {
  wire = await RawWire.open(agent.connection_string);
  try {
    return await body(wire);
  } finally {
    wire.close();
  }
}

/** The audit records of the agent's statements from the `skip`-th on, as [event, rule, rows]. */
async function audited(skip: number, count: number): Promise<[unknown, unknown, unknown][]> {
  const records = await gateway.decisionsOf(agent.credential.id, skip + count);
  return records.slice(skip, skip + count).map((d) => [d.event, d.decision_rule, d.rows_returned]);
}

async function recordCount(): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 200));
  return gateway.decisions.filter((d) => (d.decision as { credential_id?: string } | undefined)?.credential_id === agent.credential.id).length;
}

const parse = (text: string, name = ''): Buffer => serialize.parse({ name, text });
const bind = (portal = '', statement = ''): Buffer => serialize.bind({ portal, statement });
const execute = (rows: number, portal = ''): Buffer => serialize.execute({ portal, rows });
const sync = (): Buffer => serialize.sync();
const ORDERS = 'SELECT id FROM orders ORDER BY id';

describe('the row cap holds across Executes of one portal', () => {
  it('Execute(0) twice: 50 rows, the NOTICE, SELECT 50, then an exhausted portal (red team reproducer)', async () => {
    const before = await recordCount();
    const replies = await withWire((w) => w.turn([parse(ORDERS), bind(), execute(0), execute(0), sync()]));
    expect(replies).toEqual(['1', '2', 'D 50', NOTICE, 'C SELECT 50', 'C SELECT 0', 'Z I']);
    expect(wire.values).toEqual(ids(1, 50));
    expect(await audited(before, 1)).toEqual([['truncated', 'max_rows.truncated', '50']]);
  });

  it('Execute(49) five times: 49 rows, then 1 and the NOTICE, then nothing (red team reproducer)', async () => {
    const before = await recordCount();
    const replies = await withWire((w) => w.turn([parse(ORDERS), bind(), ...Array.from({ length: 5 }, () => execute(49)), sync()]));
    expect(replies).toEqual(['1', '2', 'D 49', 's', 'D 1', NOTICE, 'C SELECT 1', 'C SELECT 0', 'C SELECT 0', 'C SELECT 0', 'Z I']);
    expect(wire.values).toEqual(ids(1, 50));
    expect(await audited(before, 2)).toEqual([
      ['query', '', '49'],
      ['truncated', 'max_rows.truncated', '1'],
    ]);
  });

  it('row limits that do not divide the cap, each Execute in its own Sync inside a transaction', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY'))];
      all.push(...(await w.turn([parse(ORDERS), bind('p'), execute(20, 'p'), sync()])));
      for (let i = 0; i < 3; i++) all.push(...(await w.turn([execute(20, 'p'), sync()])));
      all.push(...(await w.query('COMMIT')));
      return all;
    });
    expect(replies).toEqual(['C BEGIN', 'Z T', '1', '2', 'D 20', 's', 'Z T', 'D 20', 's', 'Z T', 'D 10', NOTICE, 'C SELECT 10', 'Z T', 'C SELECT 0', 'Z T', 'C COMMIT', 'Z I']);
  });

  it('two named portals interleaved each get their own 50 rows, never more', async () => {
    const replies = await withWire((w) =>
      w.turn([parse(ORDERS, 'q'), bind('a', 'q'), bind('b', 'q'), execute(30, 'a'), execute(30, 'b'), execute(30, 'a'), execute(30, 'b'), execute(0, 'a'), execute(0, 'b'), sync()]),
    );
    expect(replies).toEqual(['1', '2', '2', 'D 30', 's', 'D 30', 's', 'D 20', NOTICE, 'C SELECT 20', 'D 20', NOTICE, 'C SELECT 20', 'C SELECT 0', 'C SELECT 0', 'Z I']);
    expect(wire.values).toEqual([...ids(1, 30), ...ids(1, 30), ...ids(31, 50), ...ids(31, 50)]);
  });

  it('the unnamed portal bound again starts a new result; pipelined batches without Sync between', async () => {
    const replies = await withWire((w) => w.turn([parse(ORDERS), bind(), execute(0), execute(0), bind(), execute(40), execute(40), execute(40), sync()]));
    expect(replies).toEqual(['1', '2', 'D 50', NOTICE, 'C SELECT 50', 'C SELECT 0', '2', 'D 40', 's', 'D 10', NOTICE, 'C SELECT 10', 'C SELECT 0', 'Z I']);
    expect(wire.values).toEqual([...ids(1, 50), ...ids(1, 50)]);
  });

  it('a named portal bound again under its own name (which PostgreSQL refuses) keeps its count', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY'))];
      all.push(...(await w.turn([parse(ORDERS, 'q'), bind('p', 'q'), execute(0, 'p'), sync()])));
      all.push(...(await w.query('SAVEPOINT s')));
      all.push(...(await w.turn([bind('p', 'q'), execute(0, 'p'), sync()])));
      all.push(...(await w.query('ROLLBACK TO SAVEPOINT s')));
      all.push(...(await w.turn([execute(0, 'p'), sync()])));
      all.push(...(await w.query('COMMIT')));
      return all;
    });
    expect(replies).toEqual([
      'C BEGIN', 'Z T',
      '1', '2', 'D 50', NOTICE, 'C SELECT 50', 'Z T',
      'C SAVEPOINT', 'Z T',
      'E 42P03 cursor "p" already exists', 'Z E',
      'C ROLLBACK', 'Z T',
      'C SELECT 0', 'Z T',
      'C COMMIT', 'Z I',
    ]);
  });

  it('Execute after the cap in a later Sync gets nothing; a portal closed and bound again starts anew', async () => {
    const replies = await withWire(async (w) => {
      const all = [...(await w.turn([parse(ORDERS, 'q'), bind('p', 'q'), execute(0, 'p'), sync()]))];
      // Outside a transaction PostgreSQL has dropped the portal; the gateway still gives no rows.
      all.push(...(await w.turn([execute(0, 'p'), sync()])));
      all.push(...(await w.turn([serialize.close({ type: 'P', name: 'p' }), bind('p', 'q'), execute(30, 'p'), execute(30, 'p'), sync()])));
      return all;
    });
    expect(replies).toEqual(['1', '2', 'D 50', NOTICE, 'C SELECT 50', 'Z I', 'C SELECT 0', 'Z I', '3', '2', 'D 30', 's', 'D 20', NOTICE, 'C SELECT 20', 'Z I']);
    expect(wire.values).toEqual([...ids(1, 50), ...ids(1, 50)]);
  });

  it('a prepared statement reused: each Bind is a new result of at most 50 rows', async () => {
    const replies = await withWire(async (w) => {
      const all = [...(await w.turn([parse(ORDERS, 'q'), bind('', 'q'), execute(0), execute(0), sync()]))];
      all.push(...(await w.turn([bind('', 'q'), execute(25), execute(0), execute(0), sync()])));
      return all;
    });
    expect(replies).toEqual(['1', '2', 'D 50', NOTICE, 'C SELECT 50', 'C SELECT 0', 'Z I', '2', 'D 25', 's', 'D 25', NOTICE, 'C SELECT 25', 'C SELECT 0', 'Z I']);
  });

  it('a capped simple query leaves no suspended unnamed portal behind to Execute', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY'))];
      all.push(...(await w.query(ORDERS)));
      all.push(...(await w.turn([execute(0), sync()])));
      all.push(...(await w.query('ROLLBACK')));
      return all;
    });
    expect(replies).toEqual(['C BEGIN', 'Z T', 'T', 'D 50', NOTICE, 'C SELECT 50', 'Z T', 'E 34000 portal "" does not exist', 'Z E', 'C ROLLBACK', 'Z I']);
  });

  it('a declared cursor read by FETCH and by Execute of its portal shares one count', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY'))];
      all.push(...(await w.query('DECLARE c CURSOR FOR SELECT id FROM orders ORDER BY id')));
      all.push(...(await w.query('FETCH 30 FROM c')));
      all.push(...(await w.turn([execute(0, 'c'), sync()])));
      all.push(...(await w.query('FETCH ALL FROM c')));
      all.push(...(await w.query('COMMIT')));
      return all;
    });
    expect(replies).toEqual([
      'C BEGIN', 'Z T',
      'C DECLARE CURSOR', 'Z T',
      'T', 'D 30', 'C FETCH 30', 'Z T',
      'D 20', NOTICE, 'C SELECT 20', 'Z T',
      'T', NOTICE, 'C FETCH 0', 'Z T',
      'C COMMIT', 'Z I',
    ]);
    expect(wire.values).toEqual(ids(1, 50));
  });

  it('postgres.js cursors read at most 50 rows, whatever their batch size', async () => {
    const sql = postgres(agent.connection_string, { max: 1, onnotice: () => undefined });
    try {
      for (const size of [7, 50, 120]) {
        const seen: number[] = [];
        await sql`SELECT id FROM orders ORDER BY id`.cursor(size, (rows) => void seen.push(...rows.map((row) => row.id as number)));
        expect(seen, `batch ${size}`).toEqual(ids(1, 50).map(Number));
      }
    } finally {
      await sql.end();
    }
  });
});

describe('a simple query of several statements runs under the cap instead of being refused', () => {
  it('BEGIN READ ONLY; SELECT count(*) FROM orders; COMMIT answers exactly as PostgreSQL does (red team reproducer)', async () => {
    const before = await recordCount();
    const replies = await withWire((w) => w.query('BEGIN READ ONLY; SELECT count(*) FROM orders; COMMIT'));
    expect(replies).toEqual(['C BEGIN', 'T', 'D 1', 'C SELECT 1', 'C COMMIT', 'Z I']);
    expect(wire.values).toEqual(['1000']);
    expect(await audited(before, 1)).toEqual([['query', '', '1']]);
  });

  it('each row-returning statement is cut at 50 rows, masks still apply, and the record counts what was sent', async () => {
    const before = await recordCount();
    const replies = await withWire((w) => w.query('SELECT id FROM orders ORDER BY id; SELECT email FROM customers ORDER BY id; SHOW timezone'));
    expect(replies).toEqual(['T', 'D 50', NOTICE, 'C SELECT 50', 'T', 'D 10', 'C SELECT 10', 'T', 'D 1', 'C SHOW', 'Z I']);
    expect(wire.values.slice(50, 60)).toEqual(Array.from({ length: 10 }, () => '[redacted]'));
    expect(await audited(before, 1)).toEqual([['truncated', 'max_rows.truncated', '61']]);
  });

  it('stops at the first error, in one implicit transaction, as a simple query does', async () => {
    const replies = await withWire(async (w) => [
      ...(await w.query('SELECT id FROM orders WHERE id = 1; SELECT 1 / 0; SELECT id FROM orders')),
      ...(await w.query('SELECT now()::text; SELECT count(*) FROM orders; SELECT now()::text')),
    ]);
    expect(replies).toEqual(['T', 'D 1', 'C SELECT 1', 'E 22012 division by zero', 'Z I', 'T', 'D 1', 'C SELECT 1', 'T', 'D 1', 'C SELECT 1', 'T', 'D 1', 'C SELECT 1', 'Z I']);
    // One transaction: now() is its start time in every statement.
    expect(wire.values[1]).toBe(wire.values[3]);
    expect(wire.values[2]).toBe('1000');
  });

  it('node-postgres gets one result per statement', async () => {
    const results = await withWire(async () => {
      const pg = await import('pg');
      const client = new pg.default.Client({ connectionString: agent.connection_string });
      await client.connect();
      try {
        return (await client.query('BEGIN READ ONLY; SELECT id FROM orders ORDER BY id; SELECT count(*)::int AS n FROM orders; COMMIT')) as unknown as { command: string; rowCount: number; rows: unknown[] }[];
      } finally {
        await client.end();
      }
    });
    expect(results.map((r) => [r.command, r.rowCount, r.rows.length])).toEqual([
      ['BEGIN', null, 0],
      ['SELECT', 50, 50],
      ['SELECT', 1, 1],
      ['COMMIT', null, 0],
    ]);
  });

  it('refuses what the cap cannot bound, naming the rule and what to send instead', async () => {
    const before = await recordCount();
    const replies = await withWire(async (w) => [
      ...(await w.query('SELECT 1; COPY (SELECT id FROM orders) TO STDOUT')),
      ...(await w.query('COPY (SELECT id FROM orders) TO STDOUT')),
      ...(await w.query('BEGIN; DECLARE c CURSOR FOR SELECT id FROM orders; FETCH 10 FROM c')),
    ]);
    expect(replies).toEqual([
      `E 0A000 this credential’s policy caps every result at ${CAP} rows, and COPY cannot run together with other statements in one query string under the cap (rule max_rows.multi_statement); send COPY as a query of its own`,
      'Z I',
      `E 0A000 this credential’s policy caps every result at ${CAP} rows, and the gateway cannot cut COPY ... TO STDOUT (rule max_rows.uncapped); read the rows with a SELECT (its result is cut at the cap) or aggregate them in SQL`,
      'Z I',
      `E 0A000 this credential’s policy caps every result at ${CAP} rows, and FETCH must be counted against the cursor's rows on its own (rule max_rows.multi_statement); send each FETCH as a query of its own`,
      'Z I',
    ]);
    expect(await audited(before, 3)).toEqual([
      ['blocked', 'max_rows.multi_statement', '0'],
      ['blocked', 'max_rows.uncapped', '0'],
      ['blocked', 'max_rows.multi_statement', '0'],
    ]);
  });
});

describe('cursors read with FETCH on the simple protocol stop at the cap', () => {
  const DECLARE = 'DECLARE c CURSOR WITHOUT HOLD FOR SELECT id FROM orders ORDER BY id';

  it('FETCH FORWARD n repeatedly: 20, 20, 10 and the NOTICE, then no rows with the NOTICE', async () => {
    const before = await recordCount();
    const replies = await withWire(async (w) => {
      // NO SCROLL, as psql declares its FETCH_COUNT cursor: nothing may need to move back.
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY')), ...(await w.query(DECLARE.replace('CURSOR', 'NO SCROLL CURSOR')))];
      for (let i = 0; i < 4; i++) all.push(...(await w.query('FETCH FORWARD 20 FROM c')));
      all.push(...(await w.query('CLOSE c')), ...(await w.query('COMMIT')));
      return all;
    });
    expect(replies).toEqual([
      'C BEGIN', 'Z T', 'C DECLARE CURSOR', 'Z T',
      'T', 'D 20', 'C FETCH 20', 'Z T',
      'T', 'D 20', 'C FETCH 20', 'Z T',
      'T', 'D 10', NOTICE, 'C FETCH 10', 'Z T',
      'T', NOTICE, 'C FETCH 0', 'Z T',
      'C CLOSE CURSOR', 'Z T', 'C COMMIT', 'Z I',
    ]);
    expect(wire.values).toEqual(ids(1, 50));
    expect((await audited(before, 8)).slice(2, 6)).toEqual([
      ['query', '', '20'],
      ['query', '', '20'],
      ['truncated', 'max_rows.truncated', '10'],
      ['truncated', 'max_rows.truncated', '0'],
    ]);
  });

  it('FETCH ALL, NEXT and MOVE count against the same 50 rows; a cursor declared again starts anew', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY')), ...(await w.query(DECLARE))];
      all.push(...(await w.query('MOVE FORWARD 45 IN c')), ...(await w.query('FETCH NEXT FROM c')), ...(await w.query('FETCH ALL FROM c')), ...(await w.query('MOVE 10 c')));
      all.push(...(await w.query('CLOSE c')), ...(await w.query(DECLARE)), ...(await w.query('FETCH ALL FROM c')), ...(await w.query('ROLLBACK')));
      return all;
    });
    expect(replies).toEqual([
      'C BEGIN', 'Z T', 'C DECLARE CURSOR', 'Z T',
      'C MOVE 45', 'Z T',
      'T', 'D 1', 'C FETCH 1', 'Z T',
      'T', 'D 4', NOTICE, 'C FETCH 4', 'Z T',
      NOTICE, 'C MOVE 0', 'Z T',
      'C CLOSE CURSOR', 'Z T', 'C DECLARE CURSOR', 'Z T',
      'T', 'D 50', NOTICE, 'C FETCH 50', 'Z T',
      'C ROLLBACK', 'Z I',
    ]);
    expect(wire.values).toEqual([...ids(46, 50), ...ids(1, 50)]);
  });

  it('a cursor declared on the extended protocol (with a parameter) and read by FETCH starts anew in each transaction', async () => {
    const declare = [serialize.parse({ text: 'DECLARE c CURSOR FOR SELECT id FROM orders WHERE id > $1 ORDER BY id' }), serialize.bind({ values: ['100'] }), execute(0), sync()];
    const replies = await withWire(async (w) => {
      const all: Reply[] = [];
      for (const fetch of ['FETCH ALL FROM c', 'FETCH 10 FROM c']) {
        all.push(...(await w.query('BEGIN READ ONLY')), ...(await w.turn(declare)), ...(await w.query(fetch)), ...(await w.query('COMMIT')));
      }
      return all;
    });
    expect(replies).toEqual([
      'C BEGIN', 'Z T', '1', '2', 'C DECLARE CURSOR', 'Z T', 'T', 'D 50', NOTICE, 'C FETCH 50', 'Z T', 'C COMMIT', 'Z I',
      'C BEGIN', 'Z T', '1', '2', 'C DECLARE CURSOR', 'Z T', 'T', 'D 10', 'C FETCH 10', 'Z T', 'C COMMIT', 'Z I',
    ]);
    expect(wire.values).toEqual([...ids(101, 150), ...ids(101, 110)]);
  });

  it('a DECLARE of a name still open (which PostgreSQL refuses) does not reset its count, even after ROLLBACK TO SAVEPOINT', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY')), ...(await w.query(DECLARE)), ...(await w.query('FETCH 50 FROM c'))];
      // One write: the requests are all handled before any reply comes back.
      all.push(...(await w.turn([serialize.query('SAVEPOINT s'), serialize.query(DECLARE), serialize.query('ROLLBACK TO SAVEPOINT s'), serialize.query('FETCH 50 FROM c')], 4)));
      all.push(...(await w.query('ROLLBACK')));
      return all;
    });
    expect(replies.slice(8)).toEqual(['C SAVEPOINT', 'Z T', 'E 42P03 cursor "c" already exists', 'Z E', 'C ROLLBACK', 'Z T', 'T', NOTICE, 'C FETCH 0', 'Z T', 'C ROLLBACK', 'Z I']);
    expect(wire.values).toEqual(ids(1, 50));
  });

  it('FETCH on the extended protocol is refused: each Bind of it would be a new result of up to 50 rows', async () => {
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY')), ...(await w.query(DECLARE))];
      for (let i = 0; i < 4; i++) all.push(...(await w.turn([parse('FETCH 50 FROM c'), bind(), execute(0), sync()])));
      all.push(...(await w.turn([parse('MOVE 500 IN c'), bind(), execute(0), sync()])));
      all.push(...(await w.query('ROLLBACK')));
      return all;
    });
    expect(wire.values).toEqual([]);
    expect(replies.filter((r) => r.startsWith('E 0A000'))).toHaveLength(5);
  });

  it('refuses directions the cap cannot bound, and FETCH or MOVE on the extended protocol', async () => {
    const before = await recordCount();
    const fetches = ['FETCH BACKWARD 5 FROM c', 'FETCH PRIOR FROM c', 'FETCH ABSOLUTE 900 FROM c', 'FETCH RELATIVE 3 FROM c', 'FETCH LAST FROM c', 'FETCH -3 FROM c', 'MOVE ABSOLUTE 900 IN c'];
    const replies = await withWire(async (w) => {
      const all: Reply[] = [...(await w.query('BEGIN READ ONLY')), ...(await w.query(`DECLARE c SCROLL CURSOR FOR SELECT id FROM orders ORDER BY id`))];
      for (const sql of fetches) all.push(...(await w.query(sql)));
      return all;
    });
    const refusal = (verb: string): string =>
      `E 0A000 this credential’s policy caps every result at ${CAP} rows, and the gateway counts a cursor's rows forward only, and cannot bound ${verb} BACKWARD, PRIOR, FIRST, LAST, ABSOLUTE, RELATIVE or a negative count (rule max_rows.uncapped); read the cursor with ${verb} FORWARD n (or NEXT); the cursor yields at most the cap's rows in all`;
    expect(replies.slice(4, 6)).toEqual([refusal('FETCH'), 'Z T']);
    expect(replies.filter((r) => r.startsWith('E '))).toEqual([...fetches.slice(0, -1).map(() => refusal('FETCH')), refusal('MOVE')]);
    expect(wire.values).toEqual([]);
    const extended = await withWire(async (w) => [
      ...(await w.query('BEGIN READ ONLY')),
      ...(await w.query(DECLARE)),
      ...(await w.turn([parse('FETCH 10 FROM c'), bind(), execute(0), sync()])),
      ...(await w.query('ROLLBACK')),
    ]);
    expect(extended.slice(4)).toEqual([
      `E 0A000 this credential’s policy caps every result at ${CAP} rows, and the gateway counts a cursor's rows only when FETCH is sent as a simple query (rule max_rows.uncapped); send FETCH FORWARD n as a simple (unparameterized) query, or Execute the cursor's portal with a row limit`,
      'Z T',
      'C ROLLBACK',
      'Z I',
    ]);
    const records = await gateway.decisionsOf(agent.credential.id, before + 2 + fetches.length);
    expect(records.slice(before + 2, before + 2 + fetches.length).map((d) => [d.event, d.decision_rule])).toEqual(fetches.map(() => ['blocked', 'max_rows.uncapped']));
  });
});

const execFileAsync = promisify(execFile);

/** psycopg2 (which speaks only the simple protocol) iterating a named cursor; the ids it saw and the NOTICEs. */
async function psycopg2Named(body: string): Promise<{ ids: number[]; notices: string[] }> {
  const script = [
    'import json, sys, psycopg2',
    'conn = psycopg2.connect(sys.argv[1])',
    'cur = conn.cursor("agent cursor")',
    'cur.execute("SELECT id FROM orders ORDER BY id")',
    body,
    'cur.close()',
    'conn.rollback()',
    'print(json.dumps({"ids": ids, "notices": [n.strip() for n in conn.notices]}))',
  ].join('\n');
  const { stdout } = await execFileAsync('/usr/bin/python3', ['-c', script, agent.connection_string]);
  return JSON.parse(stdout) as { ids: number[]; notices: string[] };
}

const noPsql = missingTool('psql');

it.skipIf(noPsql)(`psql with FETCH_COUNT (DECLARE and FETCH FORWARD on the simple protocol) prints the first 50 rows${noPsql ? ` (skipped: ${noPsql})` : ''}`, async () => {
  for (const count of ['20', '50', '500']) {
    const { stdout, stderr } = await execFileAsync('psql', [agent.connection_string, '-X', '-At', '-v', `FETCH_COUNT=${count}`, '-c', 'SELECT id FROM orders ORDER BY id']);
    expect(stdout.trim().split('\n'), `FETCH_COUNT ${count}`).toEqual(ids(1, 50));
    expect(stderr).toContain('cut at 50 rows');
  }
});

const noPsycopg2 = missingTool('/usr/bin/python3', ['-c', 'import psycopg2']);

describe.skipIf(noPsycopg2)(`psycopg2 (Debian python3-psycopg2) named (server-side) cursors under the cap${noPsycopg2 ? ` (skipped: ${noPsycopg2})` : ''}`, () => {
  const cut = `NOTICE:  pgward: the result was cut at ${CAP} rows by this credential’s policy (max_rows); aggregate or filter to see what lies beyond`;

  for (const itersize of [7, 50, 2000]) {
    it(`iterating with itersize ${itersize} yields the first 50 rows, then stops`, async () => {
      const result = await psycopg2Named(`cur.itersize = ${itersize}\nids = [row[0] for row in cur]`);
      expect(result.ids).toEqual(ids(1, 50).map(Number));
      expect(result.notices.length).toBeGreaterThanOrEqual(1);
      expect(new Set(result.notices)).toEqual(new Set([cut]));
    });
  }

  it('fetchmany, fetchone and fetchall share the 50 rows', async () => {
    const result = await psycopg2Named('ids = [r[0] for r in cur.fetchmany(30)] + [cur.fetchone()[0]] + [r[0] for r in cur.fetchall()] + [r[0] for r in cur.fetchall()]');
    expect(result.ids).toEqual(ids(1, 50).map(Number));
  });
});
