/**
 * Which of a statement's own conjuncts a row filter's stand-in subquery copies in after the filter
 * (proxy/policy/row-filter-pushdown.ts): single-relation, leakproof ones only, as the catalog
 * snapshot's operators and column types say; everything else stays outside the OFFSET 0 fence.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy } from '../../proxy/policy/decide.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { Node } from '../../proxy/policy/ast.js';
import { pushableConjuncts } from '../../proxy/policy/row-filter-pushdown.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { catalogFromRows } from '../../proxy/upstream/catalog-query.js';

beforeAll(loadParser);

const [INT4, INT8, NUMERIC, TEXT, BOOL] = [23, 20, 1700, 25, 16];
const relation = (name: string, columns: string[], types: number[]): [string, string] => [
  'r',
  JSON.stringify(['public', name, 'r', columns, [], [], false, [], [], false, [], [], [], types]),
];
const leakproof = (name: string, left: number, right: number): [string, string] => ['l', JSON.stringify([name, left, right])];
const rows: [string, string][] = [
  relation('orders', ['id', 'tenant_id', 'total', 'note', 'paid'], [INT4, INT4, NUMERIC, TEXT, BOOL]),
  relation('customers', ['id', 'name'], [INT4, TEXT]),
  // As PostgreSQL 15 marks them: int4 and text comparisons are leakproof, numeric_eq is not.
  leakproof('=', INT4, INT4),
  leakproof('=', INT4, INT8),
  leakproof('<', INT4, INT4),
  leakproof('=', TEXT, TEXT),
  leakproof('<>', TEXT, TEXT),
];
const catalog = catalogFromRows(rows);
const shadowed = catalogFromRows([...rows, ['o', JSON.stringify(['=', ['app']])]]);

const policy: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.*'],
  masked_columns: {},
  allow_catalog: false,
  canaries: [],
  row_filters: { 'public.orders': 'tenant_id = 7' },
};

/** The text `sql` runs as (parentheses unpadded), or an error naming its refusal. */
function runsAs(sql: string, upstream = catalog): string {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error('does not parse');
  const session = { catalog: upstream };
  const decision = decidePolicy(analyzeStatement(parsed.statements[0]!, session), policy, session);
  if (decision.action !== 'allow') throw new Error(`${sql}: refused ${decision.rule}: ${decision.reason}`);
  return decision.sql.replace(/\( /g, '(').replace(/ \)/g, ')');
}

const fenced = (pushed: string): string => `(SELECT * FROM ONLY public.orders WHERE orders.tenant_id = 7${pushed ? ` AND ${pushed}` : ''} OFFSET 0)`;

describe('conjuncts copied in before the filter', () => {
  const CASES: [string, string, string][] = [
    ['an equality on the key', 'SELECT * FROM orders WHERE id = 5', `SELECT * FROM ${fenced('orders.id = 5')} AS orders WHERE id = 5`],
    ['by its alias, the literal on the left, each conjunct alone', "SELECT o.id FROM orders o WHERE 5 = o.id AND o.note = 'x' AND 100 / (o.id - 777) > 0",
      `SELECT o.id FROM ${fenced("5 = orders.id AND orders.note = 'x'")} AS o WHERE 5 = o.id AND o.note = 'x' AND (100 / (o.id - 777)) > 0`],
    ['an OR whose arms are all leakproof, whole', "SELECT id FROM orders WHERE id < 3 OR note = 'x' OR paid OR note IS NULL",
      `SELECT id FROM ${fenced("(orders.id < 3 OR orders.note = 'x' OR orders.paid OR orders.note IS NULL)")} AS orders WHERE id < 3 OR note = 'x' OR paid OR note IS NULL`],
    ['NOT of a leakproof comparison', 'SELECT id FROM orders WHERE NOT id = 4', `SELECT id FROM ${fenced('NOT (orders.id = 4)')} AS orders WHERE NOT (id = 4)`],
    ['an inner join’s ON and the WHERE, by qualified names only', 'SELECT c.id FROM customers c JOIN orders o ON o.id = 5 AND c.id = o.id WHERE o.note = \'x\' AND name = \'y\'',
      `SELECT c.id FROM customers AS c JOIN ${fenced("orders.id = 5 AND orders.note = 'x'")} AS o ON o.id = 5 AND c.id = o.id WHERE o.note = 'x' AND name = 'y'`],
    ['IN and NOT IN lists of constants of the column’s type or untyped', "SELECT id FROM orders WHERE id IN (1, 2) AND note NOT IN ('a', NULL)",
      `SELECT id FROM ${fenced("orders.id IN (1, 2) AND orders.note NOT IN ('a', NULL)")} AS orders WHERE id IN (1, 2) AND note NOT IN ('a', NULL)`],
    ['each arm of a set operation, its own WHERE', 'SELECT id FROM orders WHERE id = 5 UNION SELECT id FROM orders WHERE id = 6',
      `SELECT id FROM ${fenced('orders.id = 5')} AS orders WHERE id = 5 UNION SELECT id FROM ${fenced('orders.id = 6')} AS orders WHERE id = 6`],
    ['a column of the same relation on both sides', 'SELECT id FROM orders WHERE id = tenant_id', `SELECT id FROM ${fenced('orders.id = orders.tenant_id')} AS orders WHERE id = tenant_id`],
  ];
  for (const [what, sql, expected] of CASES) it(what, () => expect(runsAs(sql)).toBe(expected));
});

describe('conjuncts that stay outside the fence only', () => {
  const CASES: [string, string][] = [
    ['a numeric comparison (numeric_eq is not leakproof)', 'SELECT id FROM orders WHERE total = 5'],
    ['an operator with no exact match for the literal (int4 = numeric)', 'SELECT id FROM orders WHERE id = 5.5'],
    ['an OR with one arm not leakproof', 'SELECT id FROM orders WHERE id = 1 OR total = 2'],
    ['a division', 'SELECT id FROM orders WHERE 100 / (id - 777) > 0'],
    ['a function call', "SELECT id FROM orders WHERE lower(note) = 'x'"],
    ['a cast', 'SELECT id FROM orders WHERE id = 5::int4'],
    ['an IN list with a constant of another type (the column would be cast to the common type)', "SELECT id FROM orders WHERE note IN ('a', 1)"],
    ['an IN list naming another column', 'SELECT id FROM orders WHERE id IN (1, tenant_id)'],
    ['an IN list whose operator is not leakproof for the type', 'SELECT id FROM orders WHERE total IN (1, 2)'],
    ['a parameter, whose declared type the decision does not know', 'SELECT id FROM orders WHERE id = $1'],
    ['a subquery', 'SELECT id FROM orders WHERE id = (SELECT 1)'],
    ['IN over a subquery', 'SELECT id FROM orders WHERE id IN (SELECT id FROM customers)'],
    ['two relations in one conjunct', 'SELECT o.id FROM orders o, customers c WHERE o.id = c.id'],
    ['a bare name beside another FROM item (it may be the other’s)', "SELECT o.id FROM orders o, customers c WHERE note = 'x'"],
    ['the nullable side of a LEFT JOIN: its ON and the WHERE', 'SELECT c.id FROM customers c LEFT JOIN orders o ON o.id = 5 WHERE o.id = 6'],
    ['the preserved side of a LEFT JOIN: its ON', 'SELECT o.id FROM orders o LEFT JOIN customers c ON o.id = 5'],
    ['inside a FULL JOIN', 'SELECT o.id FROM orders o FULL JOIN customers c ON c.id = o.id WHERE o.id = 5'],
    ['the table by its name while it has an alias', 'SELECT id FROM orders o, customers c WHERE orders.id = 5'],
    ['a comparison with an outer query’s column (EXISTS)', 'SELECT 1 FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.id = c.id)'],
    ['a correlated reference in a LATERAL subquery', 'SELECT * FROM customers c, LATERAL (SELECT * FROM orders WHERE id = c.id) s'],
    ['a system column', 'SELECT id FROM orders WHERE ctid = \'(0,1)\''],
    ['a column alias list (names the catalog does not know)', 'SELECT * FROM orders AS x(a, b) WHERE x.a = 5'],
  ];
  for (const [what, sql] of CASES) {
    it(what, () => expect(runsAs(sql)).toContain(`${fenced('')} AS`));
  }

  it('an operator name another schema defines too (the search path may pick that one)', () => {
    expect(runsAs('SELECT id FROM orders WHERE id = 5', shadowed)).toBe(`SELECT id FROM ${fenced('')} AS orders WHERE id = 5`);
  });

  it('a masked column: the copy would compare the value the mask hides', () => {
    const parsed = parseStatements("SELECT 1 WHERE id = 3 AND note = 'x'");
    if (!parsed.ok) throw new Error('does not parse');
    const where = (parsed.statements[0]!.stmt.SelectStmt as { whereClause: { BoolExpr: { args: Node[] } } }).whereClause.BoolExpr.args;
    const target = { rangeName: 'o', innerName: 'orders', columns: ['id', 'note'], types: [INT4, TEXT], soleItem: true, leakproof: () => true };
    expect(pushableConjuncts(where, { ...target, masked: new Set<string>() })).toHaveLength(2);
    expect(pushableConjuncts(where, { ...target, masked: new Set(['note']) })).toEqual([{ A_Expr: { ...(where[0]!.A_Expr as Node), lexpr: { ColumnRef: { fields: [{ String: { sval: 'orders' } }, { String: { sval: 'id' } }], location: 15 } } } }]);
  });

  it('a catalog without column types or leakproof operators (fail closed)', () => {
    const bare = catalogFromRows([['r', JSON.stringify(['public', 'orders', 'r', ['id', 'tenant_id'], [], [], false, [], [], false, [], []])]]);
    expect(runsAs('SELECT id FROM orders WHERE id = 5', bare)).toBe(`SELECT id FROM ${fenced('')} AS orders WHERE id = 5`);
  });
});
