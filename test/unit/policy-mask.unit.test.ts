import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { StatementAnalysis } from '../../proxy/policy/analysis.js';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy } from '../../proxy/policy/decide.js';
import { hashKeyOf } from '../../proxy/policy/hash-key.js';
import { applyMasks, maskExpression, type MaskEdit } from '../../proxy/policy/mask.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';

beforeAll(loadParser);

const KEY = hashKeyOf(Buffer.alloc(32, 7));

const policy: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.customers', 'public.orders'],
  masked_columns: {
    'public.customers.email': 'hash',
    'public.customers.phone': 'partial',
    'public.customers.ssn': 'redact',
    'public.customers.birth_date': 'null',
  },
  allow_catalog: false,
  canaries: [],
  hash_key: KEY,
};

function analyze(sql: string): StatementAnalysis {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(parsed.reason);
  return analyzeStatement(parsed.statements[0]!);
}

function rewrite(sql: string): string {
  const decision = decidePolicy(analyze(sql), policy);
  if (decision.action !== 'allow') throw new Error(decision.reason);
  return decision.sql;
}

/** A reference left by a hash or partial mask sits in `fn(ref::text, ...)`; one left by a null mask in `CASE WHEN false THEN ref END`. */
function insideMask(path: readonly (string | number)[]): boolean {
  const tail = path.slice(-5).join('.');
  return tail === 'FuncCall.args.0.TypeCast.arg' || path.slice(-2).join('.') === 'CaseWhen.result';
}

const HASH =
  `pg_catalog.encode(pg_catalog.sha256(pg_catalog.byteacat(pg_catalog.decode('${KEY.outer}', 'hex'), ` +
  `pg_catalog.sha256(pg_catalog.byteacat(pg_catalog.decode('${KEY.inner}', 'hex'), pg_catalog.convert_to(email::text, 'UTF8'))))), 'hex')`;

describe('mask expressions', () => {
  it('rewrites each mode at the source and keeps the output name', () => {
    expect(rewrite('SELECT email, phone, ssn, birth_date FROM customers')).toBe(
      `SELECT ${HASH} AS email, pg_catalog.concat(pg_catalog.substr(phone::text, 1, 1), '***') AS phone, ` +
        "'[redacted]'::text AS ssn, CASE WHEN false THEN birth_date END AS birth_date FROM customers",
    );
  });

  it('keeps an explicit alias and names a cast reference after its column', () => {
    expect(rewrite('SELECT ssn AS s, ssn::varchar(4) FROM customers')).toBe(
      "SELECT '[redacted]'::text AS s, CAST('[redacted]'::text AS varchar(4)) AS ssn FROM customers",
    );
  });

  it('makes predicates, joins, ordering and grouping compare masked values', () => {
    expect(rewrite("SELECT id FROM customers WHERE email = 'a@b.c' ORDER BY email")).toBe(
      `SELECT id FROM customers WHERE ${HASH} = 'a@b.c' ORDER BY ${HASH}`,
    );
    expect(rewrite('SELECT count(*) FROM orders o JOIN customers c ON c.ssn = o.ssn GROUP BY c.ssn')).toBe(
      "SELECT pg_catalog.count(*) FROM orders AS o JOIN customers AS c ON '[redacted]'::text = o.ssn GROUP BY '[redacted]'::text",
    );
  });

  it('masks inside sublinks, CTEs, window clauses and function arguments', () => {
    const sql = rewrite(
      'WITH x AS (SELECT phone FROM customers) SELECT lower(phone), rank() OVER (PARTITION BY phone) FROM x WHERE EXISTS (SELECT 1 FROM customers c WHERE c.ssn = x.phone)',
    );
    expect(sql).toContain("WITH x AS (SELECT pg_catalog.concat(pg_catalog.substr(phone::text, 1, 1), '***') AS phone FROM customers)");
    expect(sql).toContain("WHERE '[redacted]'::text = x.phone");
  });

  it('builds expressions whose functions are pg_catalog-qualified', () => {
    const ref = { ColumnRef: { fields: [{ String: { sval: 'email' } }] } };
    const { node, inner } = maskExpression('hash', ref, KEY);
    const schemas = [...JSON.stringify(node).matchAll(/"funcname":\[\{"String":\{"sval":"(\w+)"\}\},/g)].map((match) => match[1]);
    expect(schemas).toEqual(Array(8).fill('pg_catalog'));
    const arg = ['FuncCall', 'args', 0];
    const second = ['FuncCall', 'args', 1];
    expect(inner).toEqual([...arg, ...arg, ...second, ...arg, ...second, ...arg, 'TypeCast', 'arg']);
    expect(maskExpression('redact', ref, undefined).inner).toBeNull();
    expect(() => maskExpression('hash', ref, undefined)).toThrow('a hash mask needs the project’s hash key');
  });
});

describe('round-trip verification', () => {
  it('refuses when an edit misses a masked reference', () => {
    const analysis = analyze('SELECT email FROM customers WHERE email IS NOT NULL');
    const first = analysis.columns[0]!;
    const edits: MaskEdit[] = [{ column: 'public.customers.email', mode: 'hash', path: first.path, text: first.text }];
    expect(applyMasks(analysis, edits, policy.masked_columns, {}, KEY)).toEqual({ ok: false, why: 'email would still reach a masked column' });
  });

  it('refuses when the path does not hold a column reference', () => {
    const analysis = analyze('SELECT 1 FROM customers');
    const edits: MaskEdit[] = [{ column: 'public.customers.email', mode: 'hash', path: ['SelectStmt', 'targetList', 0, 'ResTarget', 'val'], text: '1' }];
    expect(applyMasks(analysis, edits, policy.masked_columns, {}, KEY)).toMatchObject({ ok: false });
  });

  it('refuses when the deparsed text does not parse back to the edited tree', () => {
    // The deparser writes FETCH FIRST ... WITH TIES as a plain LIMIT.
    const decision = decidePolicy(analyze('SELECT email FROM customers c ORDER BY email FETCH FIRST 1 ROWS WITH TIES'), policy);
    expect(decision).toMatchObject({ action: 'refuse', rule: 'masked_columns.rewrite_failed' });
  });

  it('writes ts AT LOCAL (PostgreSQL 17) back as written, not as the call pg_catalog.timezone(ts) it parses to', () => {
    const decision = decidePolicy(analyze('SELECT now() AT LOCAL AS here, email FROM customers'), policy);
    expect(decision).toMatchObject({ action: 'allow', event: 'masked' });
    expect(decision.action === 'allow' && decision.sql).toMatch(/^SELECT \(\(pg_catalog\.now\(\)\) AT LOCAL\) AS here, /);
  });

  it('refuses to mask when pg_catalog is not searched first', () => {
    const analysis = analyze('SELECT email FROM customers');
    const decision = decidePolicy(analysis, policy, { searchPath: ['public', 'pg_catalog'] });
    expect(decision).toMatchObject({ action: 'refuse', rule: 'masked_columns.rewrite_failed' });
  });

  it('never lets a masked column through, for any mix of clauses over the masked table', () => {
    const column = fc.constantFrom('email', 'phone', 'ssn', 'birth_date', 'id', 'c.email', 'c.ssn', 'c.id');
    const clause = fc.record({
      select: fc.array(column, { minLength: 1, maxLength: 3 }),
      where: fc.option(column),
      order: fc.option(column),
      group: fc.boolean(),
    });
    fc.assert(
      fc.property(clause, ({ select, where, order, group }) => {
        const sql =
          `SELECT ${select.join(', ')} FROM customers c` +
          (where ? ` WHERE ${where} IS NOT NULL` : '') +
          (group ? ` GROUP BY ${select.join(', ')}` : '') +
          (order ? ` ORDER BY ${group ? select[0] : order}` : '');
        const decision = decidePolicy(analyze(sql), policy);
        if (decision.action !== 'allow') return false;
        const again = analyze(decision.sql);
        return again.columns.every((use) => !/^(c\.)?(email|phone|ssn|birth_date)$/.test(use.text) || insideMask(use.path));
      }),
      { numRuns: 200 },
    );
  });
});
