/** The row cap's pure parts: per-portal counts (portal-rows.ts), what a cap cannot bound (result-rows.ts), capped FETCH texts (cursors.ts). */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { serialize } from 'pg-protocol';
import { cappedCursorRead, type CursorRead } from '../../proxy/cursors.js';
import { cappedPipeline } from '../../proxy/row-cap.js';
import type { Statement } from '../../proxy/pipeline.js';
import { PortalRows } from '../../proxy/portal-rows.js';
import { nodeType } from '../../proxy/policy/ast.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { resultRows, uncappable, type ResultRows } from '../../proxy/policy/result-rows.js';
import { statementShape } from '../../proxy/policy/statements.js';

beforeAll(async () => {
  await loadParser();
});

const CAP = 50;

function rowsOf(sql: string): ResultRows[] {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(`does not parse: ${sql}`);
  return parsed.statements.map((s) => resultRows(s.stmt, statementShape(nodeType(s.stmt)).kind));
}

function statement(): Statement {
  return { text: '', event: 'query', rule: '', reason: '', startedAt: 0, ts: '', rows: 0, bytes: 0, failed: false, lost: false, truncated: false };
}

type Op =
  | { op: 'execute'; name: string; want: number }
  | { op: 'make'; name: string; succeeds: boolean }
  | { op: 'confirm' }
  | { op: 'rollbackTo' };

describe('PortalRows', () => {
  /**
   * A model of the server: each name's live portal and what it delivered. A make that fails aborts
   * the transaction (nothing is delivered) until ROLLBACK TO SAVEPOINT brings the old portal back;
   * confirmations of successful makes arrive at any later point, in order.
   */
  it('no portal ever delivers more than the cap, whatever the makes, failures, late confirmations and rollbacks', () => {
    const name = fc.constantFrom('', 'p');
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('execute' as const), name, want: fc.nat(80) }),
      fc.record({ op: fc.constant('make' as const), name, succeeds: fc.boolean() }),
      fc.record({ op: fc.constant('confirm' as const) }),
      fc.record({ op: fc.constant('rollbackTo' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const rows = new PortalRows();
        const delivered = new Map<string, number>([['', 0], ['p', 0]]);
        const pending: (() => void)[] = [];
        let aborted = false;
        for (const step of ops) {
          if (step.op === 'execute') {
            const left = rows.left(step.name, CAP);
            const limit = step.want > 0 && step.want <= left ? step.want : left;
            if (left > 0) rows.take(step.name, limit);
            if (!aborted && left > 0) delivered.set(step.name, delivered.get(step.name)! + limit);
          } else if (step.op === 'make') {
            const confirm = rows.made(step.name);
            if (aborted) continue;
            if (step.succeeds) {
              delivered.set(step.name, 0);
              pending.push(confirm);
            } else aborted = true;
          } else if (step.op === 'confirm') pending.shift()?.();
          else {
            rows.revived();
            aborted = false;
          }
          for (const count of delivered.values()) if (count > CAP) return false;
        }
        return true;
      }),
      { numRuns: 2000 },
    );
  });

  it('a portal made again starts anew at once, and a close once confirmed forgets it', () => {
    const rows = new PortalRows();
    rows.take('p', CAP);
    expect(rows.left('p', CAP)).toBe(0);
    const confirm = rows.made('p');
    expect(rows.left('p', CAP)).toBe(CAP);
    rows.take('p', 10);
    confirm();
    rows.revived();
    expect(rows.left('p', CAP)).toBe(CAP - 10);
    rows.closed('p')();
    expect(rows.left('p', CAP)).toBe(CAP);
  });
});

describe('what a row cap cannot bound', () => {
  it.each([
    ['SELECT id FROM orders', null],
    ['BEGIN READ ONLY; SELECT count(*) FROM orders; COMMIT', null],
    ['DECLARE c CURSOR FOR SELECT 1; CLOSE c', null],
    ['FETCH FORWARD 20 FROM c', 'max_rows.uncapped/extended'],
    ['FETCH ALL FROM c', 'max_rows.uncapped/extended'],
    ['MOVE 5 IN c', 'max_rows.uncapped/extended'],
    ['FETCH 0 FROM c', 'max_rows.uncapped/extended'],
    ['FETCH BACKWARD 1 FROM c', 'max_rows.uncapped/always'],
    ['FETCH PRIOR FROM c', 'max_rows.uncapped/always'],
    ['FETCH FIRST FROM c', 'max_rows.uncapped/always'],
    ['FETCH ABSOLUTE 3 FROM c', 'max_rows.uncapped/always'],
    ['FETCH RELATIVE 1 FROM c', 'max_rows.uncapped/always'],
    ['FETCH -2 FROM c', 'max_rows.uncapped/always'],
    ['MOVE LAST IN c', 'max_rows.uncapped/always'],
    ['SELECT 1; FETCH 5 FROM c', 'max_rows.multi_statement/always'],
    ['COPY (SELECT 1) TO STDOUT', 'max_rows.uncapped/always'],
    ['COPY orders FROM STDIN', null],
    ['SET x.y = 1; COPY orders FROM STDIN', 'max_rows.multi_statement/always'],
  ])('%s', (sql, expected) => {
    const found = uncappable(rowsOf(sql));
    expect(found === null ? null : `${found.rule}/${found.on}`).toBe(expected);
    // No dangling fragments: each part of a reason is a whole clause.
    if (found) expect(`${found.because}; ${found.instead}`).not.toMatch(/;\s*(use|and)\s+\w+$/i);
  });
});

describe('FETCH and MOVE under a cap', () => {
  const fetchOf = (sql: string): Extract<ResultRows, { kind: 'fetch' }> => rowsOf(sql)[0] as Extract<ResultRows, { kind: 'fetch' }>;
  const readOf = (...args: Parameters<typeof cappedCursorRead>): Exclude<CursorRead, { refused: string }> => {
    const read = cappedCursorRead(...args);
    if ('refused' in read) throw new Error(read.refused);
    return read;
  };

  it.each([
    ['FETCH FORWARD 20 FROM "agent cursor"', CAP, 'FETCH FORWARD 20 "agent cursor"', 20],
    ['FETCH ALL FROM c', CAP, 'FETCH FORWARD 50 c', 50],
    ['FETCH FORWARD ALL FROM c', 7, 'FETCH FORWARD 7 c', 7],
    ['FETCH NEXT FROM c', 1, 'FETCH FORWARD 1 c', 1],
    ['MOVE 100 IN c', 30, 'MOVE FORWARD 30 c', 30],
    // Past the cap: one row is read for its RowDescription and withheld; the count does not grow.
    ['FETCH 20 FROM c', 0, 'FETCH FORWARD 1 c', 0],
    ['FETCH 0 FROM c', 0, 'FETCH FORWARD 1 c', 0],
    ['MOVE 100 IN c', 0, 'MOVE FORWARD 1 c', 0],
  ])('%s with %i rows left runs as %s', (sql, left, expected, takes) => {
    const read = readOf(fetchOf(sql), left, CAP, statement());
    expect(read.sql).toBe(expected);
    expect(read.takes).toBe(takes);
    expect(rowsOf(read.sql!)[0]).toMatchObject({ kind: 'fetch', forward: true, count: Math.max(takes, 1) });
  });

  it('FETCH 0 (the current row again, one already passed) runs as sent while rows are left', () => {
    expect(cappedCursorRead(fetchOf('FETCH 0 FROM c'), 10, CAP, statement())).toEqual({ sql: undefined, rewrite: undefined, takes: 0 });
  });

  it('past the cap, the row read is withheld and the reply says FETCH 0 after the NOTICE', () => {
    const truncated = statement();
    const rewrite = readOf(fetchOf('FETCH 5 FROM c'), 0, CAP, truncated).rewrite!;
    expect(rewrite({ kind: 'Run', type: 'D', count: 1, bytes: 20, end: 20 })).toBeNull();
    expect(rewrite({ kind: 'Other', type: 'T', bytes: 30, end: 50 })).toBeUndefined();
    const complete = rewrite({ kind: 'Other', type: 'C', bytes: 13, end: 63 });
    expect(complete?.toString()).toContain('FETCH 0');
    expect(truncated.truncated).toBe(true);
  });

  it.each(['"a""b"', '"Agent Cursor"', '"select"', 'ünï', '"x;DROP TABLE orders"', '"$1"', 'U&"\\0041bc"'])('a cursor named %s is named exactly so in the rewrite', (name) => {
    const read = fetchOf(`FETCH 10 FROM ${name}`);
    expect(rowsOf(readOf(read, 5, CAP, statement()).sql!)[0]).toEqual({ ...read, count: 5 });
  });

  it('a read within what is left runs without rewriting its replies', () => {
    expect(readOf(fetchOf('FETCH 10 FROM c'), 40, CAP, statement()).rewrite).toBeUndefined();
  });
});

describe('a capped simple query as an extended pipeline', () => {
  /** The pipeline as pg-protocol writes it, message by message. */
  const reference = (statements: readonly string[], rows: number): Buffer =>
    Buffer.concat([
      ...statements.flatMap((text) => [serialize.parse({ text }), serialize.bind({}), serialize.describe({ type: 'P' }), serialize.execute({ rows })]),
      serialize.close({ type: 'P', name: '' }),
      serialize.close({ type: 'S', name: '' }),
      serialize.sync(),
    ]);

  it('is byte for byte what pg-protocol serializes, for any texts (multi-byte ones too) and any cap', () => {
    const text = fc.string({ unit: fc.oneof(fc.constantFrom('a', ' ', ';', "'", 'é', '€', '😀'), fc.integer({ min: 1, max: 0x7f }).map((code) => String.fromCharCode(code))), maxLength: 200 });
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 5 }), fc.integer({ min: 1, max: 2 ** 31 - 1 }), (statements, rows) => {
        expect(cappedPipeline(statements, rows).equals(reference(statements, rows))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
