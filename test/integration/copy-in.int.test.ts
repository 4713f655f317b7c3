/**
 * COPY FROM STDIN through copyIn: PostgreSQL reads every field back as the value the audit
 * projection's array parameters carried before (`String(value)`, JSON text for jsonb), a failing
 * copy rejects with the server's error, and the connection serves the next statement either way.
 */
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyField, copyIn } from '../../src/pg/copy-in.js';
import { createPool } from '../../src/pg/pool.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await freshDatabase('copy_in');
  pool = createPool(db.url);
  await pool.query('create table copied (n integer primary key, t text, b bigint, f double precision, ok boolean, j jsonb)');
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

// PostgreSQL text holds no NUL character.
const text = fc.oneof(fc.string({ unit: 'grapheme' }), fc.string({ unit: fc.constantFrom('\\', '\n', '\r', '\t', 'N', '.', 'a', '"', '\u00e9', '\u{1f600}') }), fc.constantFrom('', '\\N', '\\.', 'NULL')).filter((s) => !s.includes('\0'));
const row = fc.record({ t: fc.option(text), b: fc.option(fc.maxSafeInteger()), f: fc.option(fc.double({ noNaN: true, noDefaultInfinity: true })), ok: fc.option(fc.boolean()), j: fc.option(fc.array(text, { maxLength: 3 })) });

describe('copyIn', () => {
  it('stores each field as the value it was written from', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 1, maxLength: 20 }), async (rows) => {
        const client = await pool.connect();
        try {
          await client.query('begin');
          const data = rows.map((r, n) => [n, r.t, r.b, r.f, r.ok, r.j === null ? null : JSON.stringify(r.j)].map(copyField).join('\t') + '\n').join('');
          expect(await copyIn(client, 'copy copied (n, t, b, f, ok, j) from stdin', Buffer.from(data, 'utf8'))).toBe(rows.length);
          const { rows: stored } = await client.query<{ t: string | null; b: string | null; f: number | null; ok: boolean | null; j: string[] | null }>('select t, b::text, f, ok, j from copied order by n');
          expect(stored).toEqual(rows.map((r) => ({ t: r.t, b: r.b === null ? null : String(r.b), f: r.f === null ? null : Number(String(r.f)), ok: r.ok, j: r.j })));
        } finally {
          await client.query('rollback');
          client.release();
        }
      }),
      { numRuns: 60 },
    );
  });

  it("rejects with the server's error, and the connection goes on", async () => {
    const client = await pool.connect();
    try {
      await client.query('begin');
      await expect(copyIn(client, 'copy copied (n, t) from stdin', Buffer.from('1\tone\n1\tagain\n'))).rejects.toMatchObject({ code: '23505' });
      await client.query('rollback');
      await expect(copyIn(client, 'copy missing (n) from stdin', Buffer.from('1\n'))).rejects.toMatchObject({ code: '42P01' });
      expect((await client.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      client.release();
    }
  });
});
