/**
 * The pure parts of the upstream catalog work: the snapshot built from catalog rows, the
 * inheritance rule applied by the analyzer on a snapshot, and the row filters of relation-keyed
 * catalogs under allow_catalog.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import type { UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';
import { CatalogShapeError, catalogFromRows } from '../../proxy/upstream/catalog-query.js';

beforeAll(loadParser);

const ROWS: [string, string][] = [
  ['f', '["md5", ["public"]]'],
  ['o', '["===", ["public"]]'],
  ['r', '["public", "customers", "r", ["id", "email"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "events", "p", ["id", "at"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "ledger", "r", ["id"], [["public", "ledger_child"]], [], false, [], [], false, [], []]'],
  ['r', '["public", "ledger_child", "r", ["id"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "orders", "r", ["id", "total"], [["public", "orders_archive"]], [], false, [], [], false, [], []]'],
  ['r', '["public", "orders_archive", "r", ["id", "total", "archived_at"], [["public", "orders_archive_old"]], [], false, [], [], false, [], []]'],
  ['r', '["public", "orders_archive_old", "r", ["id", "total", "archived_at"], [], [], false, [], [], false, [], []]'],
  ['r', '["pg_catalog", "pg_class", "r", ["oid", "relname", "relnamespace"], [], [], false, [], [], false, [], []]'],
  ['r', '["pg_catalog", "pg_type", "r", ["oid", "typname"], [], [], false, [], [], false, [], []]'],
  ['r', '["pg_catalog", "pg_attribute", "r", ["attrelid", "attname"], [], [], false, [], [], false, [], []]'],
  ['r', '["pg_catalog", "pg_attrdef", "r", ["adrelid", "adbin"], [], [], false, [], [], false, [], []]'],
];
const catalog: UpstreamCatalog = catalogFromRows(ROWS);

const policy: PolicyRules = { read_only: true, allowed_tables: ['public.orders', 'public.customers', 'public.events'], masked_columns: { 'public.customers.email': 'redact' }, allow_catalog: false, canaries: [] };
const writer: PolicyRules = { ...policy, read_only: false, allowed_tables: ['public.orders', 'public.ledger'] };

/** `'none'` decides without a snapshot (pure analysis). */
function decide(sql: string, rules: PolicyRules = policy, on: UpstreamCatalog | 'none' = catalog): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error('does not parse');
  const session = on === 'none' ? {} : { catalog: on };
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), rules, session);
}

describe('catalogFromRows', () => {
  it('builds relations, inheritors, and function and operator schemas', () => {
    expect(catalog.relation({ schema: 'public', name: 'orders' })).toEqual({ kind: 'table', columns: ['id', 'total'], inheritors: [{ schema: 'public', name: 'orders_archive' }], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] });
    expect(catalog.relation({ schema: 'public', name: 'events' })?.kind).toBe('partitioned');
    expect(catalog.relation({ schema: 'public', name: 'missing' })).toBeUndefined();
    expect(catalog.functionSchemas('md5')).toEqual(['public']);
    expect(catalog.functionSchemas('lower')).toEqual([]);
    expect(catalog.operatorSchemas('===')).toEqual(['public']);
  });

  it('gives the same rows the same version, and any change another one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: ROWS.length - 1 }), fc.string({ minLength: 1, maxLength: 8 }), (index, name) => {
        expect(catalogFromRows(ROWS).version).toBe(catalog.version);
        const changed = ROWS.map((row, i) => (i === index ? ([row[0], row[1].replace(/"[a-z_]+"/, () => JSON.stringify(`${name}x`))] as [string, string]) : row));
        if (JSON.stringify(changed) !== JSON.stringify(ROWS)) expect(catalogFromRows(changed).version).not.toBe(catalog.version);
      }),
    );
  });

  it('refuses rows of another shape rather than guess', () => {
    const shapes = [
      ['r', 'not json'], ['r', '["public"]'], ['r', '["public", "t", "x", [], [], [], false, [], [], false, [], false]'], ['r', '["public", "t", "r", [1], [], [], false, []]'],
      ['r', '["public", "t", "r", [], [], [], false]'], ['r', '["public", "t", "r", [], [], [["public"]], false, []]'], ['r', '["public", "t", "r", [], [], [], "no", []]'],
      ['r', '["public", "t", "r", [], [], [], false]'], ['r', '["public", "t", "r", [], [], [], false, [["public"]]]'],
      ['r', '["public", "t", "r", [], [], [], false, []]'], ['r', '["public", "t", "v", [], [], [], false, [], [], false, "f", false]'],
      ['r', '["public", "t", "v", [], [], [], false, [], [], false, [], "no"]'], ['r', '["public", "t", "v", [], [], [], false, [], [], false, [[1, 2, 3]], false]'],
      ['r', 'not json'], ['r', '["public"]'], ['r', '["public", "t", "x", [], [], [], false, []]'], ['r', '["public", "t", "r", [1], [], [], false, [], []]'],
      ['r', '["public", "t", "r", [], []]'], ['r', '["public", "t", "r", [], [], [["public"]], false, []]'], ['r', '["public", "t", "r", [], [], [], "no", [], []]'],
      ['r', '["public", "t", "r", [], [], [], false]'], ['r', '["public", "t", "r", [], [], [], false, [["public"]]]'], ['r', '["public", "t", "r", [], [], [], false, [], [["public"]]]'], ['r', '["public", "t", "r", [], [], [], false, [], [], false, "x", []]'], ['r', '["public", "t", "r", [], [], [], false, [], [], false, [], [["c"]]]'], ['r', '["public", "t", "r", [], [], [], false, [], []]'],
      ['q', '[]'], ['f', '[null, []]'], [null, '[]'],
    ];
    for (const row of shapes) {
      expect(() => catalogFromRows([row as [string, string]]), JSON.stringify(row)).toThrow(CatalogShapeError);
    }
  });
});

describe('inheritance on a catalog snapshot', () => {
  it('runs a read, UPDATE, DELETE, TRUNCATE and LOCK of a parent ONLY, wherever the parent appears', () => {
    const cases: [string, string][] = [
      ['SELECT id FROM orders WHERE id = 9001', 'SELECT id FROM ONLY orders WHERE id = 9001'],
      ['SELECT id FROM public.orders o JOIN customers c ON c.id = o.id', 'SELECT id FROM ONLY public.orders AS o JOIN customers AS c ON c.id = o.id'],
      ['SELECT (SELECT count(*) FROM orders)', 'SELECT (SELECT pg_catalog.count(*) FROM ONLY orders)'],
      ['WITH o AS (SELECT id FROM orders) SELECT id FROM o', 'WITH o AS (SELECT id FROM ONLY orders) SELECT id FROM o'],
      ['TABLE orders', 'SELECT * FROM ONLY orders'],
      ['EXPLAIN SELECT id FROM orders', 'EXPLAIN SELECT id FROM ONLY orders'],
    ];
    for (const [sql, runs] of cases) expect(decide(sql), sql).toMatchObject({ action: 'allow', sql: runs });
    for (const [sql, runs] of [
      ['UPDATE orders SET total = 0 WHERE id = 1', 'UPDATE ONLY orders SET total = 0 WHERE id = 1'],
      ['DELETE FROM ledger', 'DELETE FROM ONLY ledger'],
      ['TRUNCATE ledger', 'TRUNCATE ONLY ledger'],
      ['LOCK TABLE ledger', 'LOCK TABLE ONLY ledger IN ACCESS EXCLUSIVE MODE'],
      ['DELETE FROM ledger USING orders WHERE ledger.id = orders.id', 'DELETE FROM ONLY ledger USING ONLY orders WHERE ledger.id = orders.id'],
    ] as const) {
      expect(decide(sql, writer), sql).toMatchObject({ action: 'allow', sql: runs });
    }
  });

  it('runs as sent what cannot reach a child: no children, ONLY already, a partitioned table, an INSERT, a COPY, a CTE name', () => {
    for (const sql of ['SELECT id FROM customers', 'SELECT id FROM ONLY orders', 'SELECT id FROM events', 'WITH orders AS (SELECT 1 AS id) SELECT id FROM orders']) expect(decide(sql), sql).toMatchObject({ action: 'allow', sql });
    for (const sql of ['INSERT INTO orders (id, total) VALUES (1, 2)', 'COPY ledger FROM STDIN']) expect(decide(sql, writer), sql).toMatchObject({ action: 'allow', sql });
  });

  it('runs a relation the snapshot does not know ONLY (refused under masks or denials); decides nothing about inheritance without a snapshot', () => {
    const open: PolicyRules = { ...policy, allowed_tables: ['public.*'], masked_columns: {} };
    expect(decide('SELECT id FROM created_later', open)).toMatchObject({ action: 'allow', sql: 'SELECT id FROM ONLY created_later' });
    expect(decide('SELECT id FROM created_later', { ...open, masked_columns: { 'public.customers.email': 'redact' } })).toMatchObject({ action: 'refuse', rule: 'catalog.relation_unknown', sqlstate: '42501', tablesBlocked: ['public.created_later'] });
    expect(decide('SELECT id FROM created_later', { ...open, denied_tables: ['public.customers'] })).toMatchObject({ action: 'refuse', rule: 'catalog.relation_unknown' });
    expect(decide('CREATE TABLE created_later (id int)', { ...open, read_only: false, masked_columns: { 'public.customers.email': 'redact' } })).toMatchObject({ action: 'allow' });
    expect(decide('SELECT id FROM orders', policy, 'none')).toMatchObject({ action: 'allow', sql: 'SELECT id FROM orders' });
  });

  it('counts the children of an altered parent as written: refused unless the allowlist covers them', () => {
    expect(decide('ALTER TABLE ledger ADD COLUMN note text', writer)).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed', tablesBlocked: ['public.ledger_child'] });
    expect(decide('ALTER TABLE orders RENAME COLUMN total TO amount', writer)).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed', tablesBlocked: ['public.orders_archive'] });
    const both: PolicyRules = { ...writer, allowed_tables: ['public.ledger', 'public.ledger_child'] };
    expect(decide('ALTER TABLE ledger ADD COLUMN note text', both)).toMatchObject({ action: 'allow', sql: 'ALTER TABLE ledger ADD COLUMN note text', tablesWritten: ['public.ledger', 'public.ledger_child'] });
  });

  it('masks and runs ONLY together', () => {
    const masked: PolicyRules = { ...policy, masked_columns: { 'public.orders.total': 'redact' } };
    expect(decide('SELECT total FROM orders', masked)).toMatchObject({ action: 'allow', event: 'masked', sql: "SELECT '[redacted]'::text AS total FROM ONLY orders" });
  });
});

describe('relation-keyed catalogs under allow_catalog', () => {
  const reader: PolicyRules = { ...policy, allow_catalog: true };

  it('reads pg_class through a stand-in that keeps the alias; other catalogs and policies without allow_catalog are untouched', () => {
    const decision = decide('SELECT c.relname FROM pg_catalog.pg_class c', reader);
    expect(decision).toMatchObject({ action: 'allow' });
    const sql = (decision as { sql: string }).sql;
    expect(sql).toMatch(/^SELECT c\.relname FROM \( ?SELECT \* FROM pg_catalog\.pg_class WHERE .*\) AS c$/s);
    expect(sql).toContain(`pg_catalog.to_regclass('"public"."orders"')`);
    expect(decide('SELECT typname FROM pg_type', reader)).toMatchObject({ action: 'allow', sql: 'SELECT typname FROM pg_type' });
    expect(decide('SELECT relname FROM pg_class', policy)).toMatchObject({ action: 'refuse', rule: 'allowed_tables.catalog' });
  });

  it('refuses a relation-keyed catalog read whole (COPY)', () => {
    expect(decide('COPY pg_catalog.pg_class TO STDOUT', reader)).toMatchObject({ action: 'refuse', rule: 'allowed_tables.catalog', tablesBlocked: ['pg_catalog.pg_class'] });
  });

  it('runs catalog-describing functions only under allow_catalog, and only pg_catalog’s', () => {
    expect(decide('SELECT pg_catalog.format_type(atttypid, atttypmod) FROM pg_attribute', reader)).toMatchObject({ action: 'allow' });
    expect(decide('SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef', reader)).toMatchObject({ action: 'allow' });
    expect(decide('SELECT pg_catalog.format_type(23, -1)', policy)).toMatchObject({ action: 'refuse', rule: 'read_only.function' });
    expect(decide('SELECT public.format_type(23, -1)', reader)).toMatchObject({ action: 'refuse', rule: 'read_only.function' });
    // An unqualified call runs pg_catalog's, whatever other schema defines the name.
    const shadowed = catalogFromRows([...ROWS, ['f', '["pg_get_expr", ["public"]]']]);
    const decision = decide('SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef', reader, shadowed);
    expect(decision).toMatchObject({ action: 'allow' });
    expect((decision as { sql: string }).sql).toMatch(/^SELECT pg_catalog\.pg_get_expr\(adbin, adrelid\) FROM \(/);
  });
});
