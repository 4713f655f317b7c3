import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { StatementAnalysis } from '../../proxy/policy/analysis.js';
import { analyzeSql, analyzeStatement, type AnalysisSession } from '../../proxy/policy/analyze.js';
import type { Node } from '../../proxy/policy/ast.js';
import { AnalysisCache } from '../../proxy/policy/cache.js';
import { qualified } from '../../proxy/policy/names.js';
import { loadParser, MAX_SQL_BYTES, normalize, parseStatements } from '../../proxy/policy/parser.js';

beforeAll(loadParser);

function analyze(sql: string, session: AnalysisSession = {}): StatementAnalysis {
  const parsed = parseStatements(sql);
  if (!parsed.ok || parsed.statements.length !== 1) throw new Error(`expected one statement: ${sql}`);
  return analyzeStatement(parsed.statements[0]!, session);
}

const tables = (analysis: StatementAnalysis) => analysis.relations.map((use) => use.candidates.map(qualified).join('|'));
const columns = (analysis: StatementAnalysis) =>
  analysis.columns.map((use) => `${use.text}=>${use.candidates.map((c) => `${qualified(c.table)}.${c.column}`).join('|')}`);

describe('parser', () => {
  it('splits a query string into statements with their own text, by UTF-8 byte offsets', () => {
    const parsed = parseStatements("SELECT 'é€' ; /* two */ SELECT 2;\nSELECT 3");
    expect(parsed.ok && parsed.statements.map((s) => s.sql)).toEqual(["SELECT 'é€'", '/* two */ SELECT 2', 'SELECT 3']);
  });

  it('refuses text over 64 KB before parsing, a NUL byte, and syntax errors with a position', () => {
    expect(parseStatements(`SELECT '${'x'.repeat(MAX_SQL_BYTES)}'`)).toMatchObject({ ok: false, reason: 'too_large' });
    expect(parseStatements('SELECT 1\u0000; DELETE FROM t')).toMatchObject({ ok: false, reason: 'error', position: 8 });
    expect(parseStatements('SELECT FROM WHERE')).toMatchObject({ ok: false, reason: 'error', position: 12 });
  });

  it('treats blank text as no statements', () => {
    expect(parseStatements('  ')).toEqual({ ok: true, version: 0, statements: [] });
    expect(parseStatements(';;')).toMatchObject({ ok: true, statements: [] });
  });

  it('normalizes literals to $N for audit, and nothing that does not parse', () => {
    expect(normalize("SELECT * FROM t WHERE a = 'x' AND b = 2")).toBe('SELECT * FROM t WHERE a = $1 AND b = $2');
    expect(normalize('SELEC')).toBeNull();
  });

  it('shows why normalized text cannot key decisions: literals that change a decision collide', () => {
    expect(normalize("SELECT set_config('role', 'x', false)")).toBe(normalize("SELECT set_config('application_name', 'x', false)"));
  });
});

describe('statement kinds and effects', () => {
  it.each([
    ['SELECT 1', 'select', []],
    ['UPDATE t SET a = 1', 'update', ['write:UPDATE']],
    ['WITH d AS (DELETE FROM t RETURNING 1) SELECT 1', 'select', ['write:a data-modifying WITH query (DELETE)', 'write:DELETE']],
    ['SELECT 1 FROM t FOR SHARE', 'select', ['lock:SELECT ... FOR SHARE']],
    ['CREATE TABLE t (a int)', 'ddl', ['ddl:CREATE TABLE']],
    ['CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$', 'ddl', ['ddl:CREATE FUNCTION']],
    ['SET ROLE admin', 'set', ['setting:SET role']],
    ['SET statement_timeout = 10', 'set', []],
    ['BEGIN READ WRITE', 'transaction', ['transaction:BEGIN READ WRITE']],
    ['EXPLAIN DELETE FROM t', 'explain', []],
    ['EXPLAIN ANALYZE DELETE FROM t', 'explain', ['write:EXPLAIN ANALYZE of DELETE']],
    ["COPY t TO PROGRAM 'x'", 'copy', ['copy:COPY TO PROGRAM']],
    ['DO $$ BEGIN END $$', 'do', ['procedure:DO']],
    ['PREPARE p AS SELECT 1', 'prepare', ['prepare:PREPARE']],
  ])('%s', (sql, kind, effects) => {
    const analysis = analyze(sql);
    expect(analysis.kind).toBe(kind);
    expect(analysis.effects.map((effect) => `${effect.family}:${effect.detail}`)).toEqual(effects);
  });

  it('marks the effects every policy refuses', () => {
    expect(analyze('SET ROLE admin').effects[0]?.always).toBe(true);
    expect(analyze('DELETE FROM t').effects[0]?.always).toBe(false);
  });
});

describe('relations and the search path', () => {
  it('resolves unqualified names on the search path, $user treated as absent', () => {
    expect(tables(analyze('SELECT * FROM orders'))).toEqual(['public.orders']);
    expect(tables(analyze('SELECT * FROM orders', { searchPath: ['$user', 'sales', 'public'] }))).toEqual(['sales.orders|public.orders']);
    expect(tables(analyze('SELECT * FROM orders', { searchPath: [] }))).toEqual(['']);
  });

  it('finds pg_catalog relations first unless the path lists pg_catalog later', () => {
    expect(tables(analyze('SELECT * FROM pg_class'))).toEqual(['pg_catalog.pg_class']);
    expect(tables(analyze('SELECT * FROM pg_class', { searchPath: ['public', 'pg_catalog'] }))).toEqual(['public.pg_class|pg_catalog.pg_class']);
    expect(tables(analyze('SELECT * FROM pg_temp.t'))).toEqual(['pg_temp.t']);
  });

  it('lets a CTE name shadow a table only within its scope', () => {
    expect(tables(analyze('WITH orders AS (SELECT 1) SELECT * FROM orders'))).toEqual([]);
    expect(tables(analyze('WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a'))).toEqual(['public.b']);
    expect(tables(analyze('WITH RECURSIVE a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a'))).toEqual([]);
    expect(tables(analyze('SELECT * FROM (WITH x AS (SELECT 1) SELECT * FROM x) s, x'))).toEqual(['public.x']);
    expect(tables(analyze('WITH x AS (SELECT 1) SELECT * FROM public.x'))).toEqual(['public.x']);
  });

  it('marks written relations', () => {
    const analysis = analyze('INSERT INTO a SELECT * FROM b');
    expect(analysis.relations.map((use) => `${use.text}:${use.written}`)).toEqual(['a:true', 'b:false']);
  });
});

describe('column binding', () => {
  it('binds a qualified reference through its alias and an unqualified one to every table in scope', () => {
    expect(columns(analyze('SELECT c.email, total FROM customers c JOIN orders o ON true'))).toEqual([
      'c.email=>public.customers.email',
      'total=>public.customers.total|public.orders.total',
    ]);
  });

  it('sees outer query levels from sublinks and earlier FROM items from LATERAL', () => {
    expect(columns(analyze('SELECT 1 FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.x = c.email)'))).toContain('c.email=>public.customers.email');
    expect(columns(analyze('SELECT 1 FROM customers c, LATERAL (SELECT c.email) x'))).toEqual(['c.email=>public.customers.email']);
  });

  it('never binds through subqueries and CTEs: their base columns are bound at the source', () => {
    expect(columns(analyze('SELECT s.email FROM (SELECT 1 AS email) s'))).toEqual([]);
    expect(columns(analyze('WITH w AS (SELECT email FROM customers) SELECT w.email FROM w'))).toEqual(['email=>public.customers.email']);
  });

  it('binds schema-qualified references to the unaliased relation', () => {
    expect(columns(analyze('SELECT public.customers.email FROM public.customers'))).toEqual(['public.customers.email=>public.customers.email']);
  });

  it('records USING columns and DDL columns as not rewritable', () => {
    const using = analyze('SELECT 1 FROM a JOIN b USING (k)').columns[0];
    expect(using).toMatchObject({ text: 'USING (k)', rewritable: false });
    expect(analyze('ALTER TABLE a ADD CHECK (k > 0)').columns.every((use) => !use.rewritable)).toBe(true);
  });

  it('records assignment targets as writes', () => {
    expect(analyze('UPDATE a SET k = j').columns.map((use) => `${use.text}:${use.written}`)).toEqual(['k:true', 'j:false']);
  });

  it('keeps the path of each reference for the rewrite', () => {
    expect(analyze('SELECT a FROM t WHERE b = 1').columns.map((use) => use.path)).toEqual([
      ['SelectStmt', 'targetList', 0, 'ResTarget', 'val'],
      ['SelectStmt', 'whereClause', 'A_Expr', 'lexpr'],
    ]);
  });
});

describe('whole-row uses', () => {
  it.each([
    ['SELECT * FROM t', 'star'],
    ['SELECT x.* FROM t x', 'star'],
    ['SELECT to_jsonb(x) FROM t x', 'row'],
    ['SELECT t FROM t', 'row'],
    ['SELECT x.row_to_json FROM t x', 'function_notation'],
    ['SELECT 1 FROM t NATURAL JOIN u', 'natural'],
    ['SELECT 1 FROM t AS x(a, b)', 'column_alias'],
    ['COPY t TO STDOUT', 'copy'],
    ['ALTER TABLE t RENAME TO u', 'rename'],
  ])('%s is a %s use', (sql, form) => {
    expect(analyze(sql).wholeRows.map((use) => use.form)).toEqual([form]);
  });

  it('ignores the select list of EXISTS, which is never evaluated', () => {
    expect(analyze('SELECT 1 WHERE EXISTS (SELECT * FROM t)').wholeRows).toEqual([]);
  });

  it('does not count a subquery star: its columns were bound inside', () => {
    expect(analyze('SELECT s.* FROM (SELECT a FROM t) s').wholeRows).toEqual([]);
  });
});

describe('functions', () => {
  it('vets pg_catalog functions on the allowlist, resolved the way PostgreSQL resolves them', () => {
    const names = (sql: string, session?: AnalysisSession) => analyze(sql, session).functions.map((fn) => `${fn.name}:${fn.vetted}`);
    expect(names('SELECT lower(a), pg_catalog.upper(a), public.lower(a), pg_sleep(1) FROM t')).toEqual([
      'lower:true',
      'pg_catalog.upper:true',
      'public.lower:false',
      'pg_sleep:false',
    ]);
    expect(names('SELECT lower(a) FROM t', { searchPath: ['public', 'pg_catalog'] })).toEqual(['lower:true']);
    expect(names("SELECT query_to_xml('select 1', true, true, '')")).toEqual(['query_to_xml:false']);
  });

  it('treats qualified operators outside pg_catalog as unvetted functions', () => {
    expect(analyze('SELECT 1 OPERATOR(public.+) 2').functions).toEqual([{ name: 'OPERATOR(public.+)', vetted: false, kind: 'operator' }]);
  });

  it('checks set_config against the settings allowlist', () => {
    expect(analyze("SELECT set_config('application_name', 'a', false)").effects).toEqual([]);
    expect(analyze("SELECT set_config('role', 'a', false)").effects.map((effect) => effect.family)).toEqual(['setting']);
  });
});

describe('coverage', () => {
  it('refuses node types the walker does not know', () => {
    expect(analyze("SELECT xmlelement(name a, 'x')").unsupported).toEqual(['XmlExpr']);
  });

  it('refuses fields the walker does not know', () => {
    const parsed = parseStatements('SELECT a FROM t');
    if (!parsed.ok) throw new Error('parse');
    const stmt = structuredClone(parsed.statements[0]!.stmt) as { SelectStmt: Record<string, unknown> };
    stmt.SelectStmt.futureClause = { A_Const: { ival: { ival: 1 } } };
    expect(analyzeStatement({ ...parsed.statements[0]!, stmt: stmt as Node }).unsupported).toEqual(['SelectStmt.futureClause']);
  });

  it('sweeps for relation, function and column nodes hidden where the walker does not look', () => {
    const parsed = parseStatements('SELECT a FROM t');
    if (!parsed.ok) throw new Error('parse');
    const stmt = structuredClone(parsed.statements[0]!.stmt) as { SelectStmt: Record<string, unknown> };
    stmt.SelectStmt.limitOption = { RangeVar: { relname: 'secrets', relpersistence: 'p' } };
    const analysis = analyzeStatement({ ...parsed.statements[0]!, stmt: stmt as Node });
    expect(analysis.unsupported).toEqual(['RangeVar outside the analyzed clauses']);
    expect(tables(analysis)).toContain('public.secrets');
  });

  it('gathers every constant for value honeytokens, however it was quoted', () => {
    expect([...analyze("SELECT $$a$$, E'\\x62', U&'\\0063', 4 FROM t").literals].sort()).toEqual(['4', 'a', 'b', 'c']);
  });

  it('never throws, whatever the text', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        const result = analyzeSql(text);
        return result.ok ? result.statements.every((s) => typeof s.kind === 'string') : result.reason === 'error';
      }),
      { numRuns: 300 },
    );
  });
});

describe('AnalysisCache', () => {
  it('reuses an analysis for the same text and search path only', () => {
    const cache = new AnalysisCache(2);
    const first = cache.analyze('SELECT * FROM orders');
    expect(cache.analyze('SELECT * FROM orders')).toBe(first);
    expect(cache.analyze('SELECT * FROM orders', { searchPath: ['sales'] })).not.toBe(first);
    expect(cache.analyze('SELECT  * FROM orders')).not.toBe(first);
    expect(cache.size).toBe(2);
  });

  it('keeps at most its text capacity of large statements, evicting the least recently used', () => {
    const large = (n: number): string => `SELECT ${n} FROM orders WHERE id IN (${Array.from({ length: 2_000 }, (_, i) => i).join(', ')})`;
    const cache = new AnalysisCache(10_000, 3 * large(0).length + 100);
    const first = cache.analyze(large(1));
    cache.analyze(large(2));
    cache.analyze(large(3));
    expect(cache.size).toBe(3);
    expect(cache.analyze(large(1))).toBe(first);
    cache.analyze(large(4));
    expect(cache.size).toBe(3);
    expect(cache.analyze(large(1))).toBe(first);
    const second = cache.analyze(large(2));
    expect(cache.analyze(large(2))).toBe(second);
    expect(cache.size).toBe(3);
  });
});
