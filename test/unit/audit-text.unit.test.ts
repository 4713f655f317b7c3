import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { auditSql } from '../../proxy/audit-text.js';
import { statementIdentity } from '../../proxy/policy/identity.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { AUDIT_SQL_MAX } from '../../src/events/audit.js';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

beforeAll(async () => {
  await loadParser();
});

describe('the statement text an audit entry keeps', () => {
  it('keeps a text that fits exactly as sent', () => {
    const sql = `/* ${'c'.repeat(AUDIT_SQL_MAX - 30)} */ select 1`;
    expect(sql.length).toBeLessThanOrEqual(AUDIT_SQL_MAX);
    expect(auditSql(sql)).toBe(sql);
  });

  it('keeps the statement behind a 4,100-byte leading comment, written from its parse tree, with the digest of the whole text', () => {
    const sql = `/* ${'x'.repeat(4_100)} */ select secret from public.secrets where id = 1 -- ${'y'.repeat(10)}\n; select '/* kept */', $$x$$`;
    expect(auditSql(sql)).toBe(
      `SELECT secret FROM public.secrets WHERE id = 1; SELECT '/* kept */', 'x' /* pgward: written from its parse tree, without comments or layout; ${Buffer.byteLength(sql)} bytes as sent; sha256 of the whole text: ${sha256(sql)} */`,
    );
  });

  it('keeps the head and the tail of a statement too long even without comments, and says how much is left out', () => {
    const sql = `select ${Array.from({ length: 1_000 }, (_, i) => `c${i}`).join(', ')} from public.orders where id = 7`;
    const kept = auditSql(sql);
    expect(kept.length).toBeLessThanOrEqual(AUDIT_SQL_MAX);
    expect(kept.startsWith('SELECT c0, c1, c2,')).toBe(true);
    expect(kept.endsWith('c999 FROM public.orders WHERE id = 7')).toBe(true);
    expect(kept).toMatch(new RegExp(`/\\* pgward: \\d+ of \\d+ bytes left out here; sha256 of the whole text: ${sha256(sql)} \\*/`));
  });

  it('keeps the head and tail of a long text that does not parse, around the marker', () => {
    const sql = `/* ${'x'.repeat(4_100)} */ select from where`;
    const kept = auditSql(sql);
    expect(kept.endsWith('*/ select from where')).toBe(true);
    expect(kept).toContain(`sha256 of the whole text: ${sha256(sql)}`);
  });

  it('never exceeds the limit and never splits a surrogate pair (any text)', () => {
    const unit = fc.oneof(fc.constantFrom('😀', '/*', '*/', '--', '\n', "'", ' ', 'é'), fc.string({ maxLength: 3 }));
    fc.assert(
      fc.property(fc.array(unit, { minLength: 0, maxLength: 3_000 }), fc.nat(4_000), (parts, pad) => {
        const sql = `${parts.join('')}${'y'.repeat(pad)}`;
        const kept = auditSql(sql);
        expect(kept.length).toBeLessThanOrEqual(AUDIT_SQL_MAX);
        expect(Buffer.from(kept, 'utf8').toString('utf8')).toBe(kept.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD'));
        if (sql.length <= AUDIT_SQL_MAX) expect(kept).toBe(sql);
        else expect(kept).toContain(sha256(sql));
      }),
      { numRuns: 200 },
    );
  });

  it('keeps the statement in normalized_sql whatever comments surround it', () => {
    const commented = statementIdentity(`/* ${'x'.repeat(4_100)} */ select secret from public.secrets -- why\nwhere id = 6`);
    expect(commented.normalized_sql).toBe('SELECT secret FROM public.secrets WHERE id = $1');
    const long = statementIdentity(`select ${Array.from({ length: 1_000 }, (_, i) => `c${i}`).join(', ')} from public.orders where id = 7`).normalized_sql;
    expect(long.startsWith('SELECT c0, c1,')).toBe(true);
    expect(long.endsWith('c999 FROM public.orders WHERE id = $1')).toBe(true);
    expect(long.length).toBeLessThanOrEqual(AUDIT_SQL_MAX);
  });
});
