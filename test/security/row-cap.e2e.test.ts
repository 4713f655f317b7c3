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
