import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { BindingBudgetExceeded, Collector, MAX_BINDING_STEPS } from '../../proxy/policy/analysis.js';
import { analyzeSql } from '../../proxy/policy/analyze.js';
import { searchPathOf } from '../../proxy/policy/names.js';
import { loadParser, MAX_SQL_BYTES, MAX_TREE_NODES, measureTree, parseStatements } from '../../proxy/policy/parser.js';
import { decideSql } from '../../proxy/policy/policy.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';

beforeAll(loadParser);

const policy: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.orders', 'public.customers'],
  masked_columns: { 'public.customers.email': 'redact' },
  allow_catalog: false,
  canaries: [],
};

const terms = (n: number, term: (i: number) => string, separator = ', '): string => Array.from({ length: n }, (_, i) => term(i)).join(separator);

/** Objects and arrays of a JSON value, counted by plain recursion. */
function recursiveCount(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  return 1 + (Array.isArray(value) ? value : Object.values(value)).reduce<number>((sum, child) => sum + recursiveCount(child), 0);
}

const decisionOf = (sql: string) => {
  const verdicts = decideSql(sql, policy);
  expect(verdicts).toHaveLength(1);
  return verdicts[0]!.decision;
};

const BINDING_REASON = `the statement needs more than ${MAX_BINDING_STEPS} steps to bind its column names (column references times the FROM items in scope) (rule parse.too_complex). Split it into several smaller statements: fewer FROM items or CTEs per query, fewer column references, no long lists of subqueries over a wide FROM list.`;
const NODES_REASON = `the statement has more than ${MAX_TREE_NODES} parse tree nodes (rule parse.too_complex). Split it into several smaller statements: fewer FROM items, CTEs, UNION branches or select-list entries per statement.`;

describe('the parse tree node limit', () => {
  it('counts the objects and arrays of any JSON value as recursion would', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        expect(measureTree(value, Infinity, Infinity).nodes).toBe(recursiveCount(value));
      }),
    );
  });

  it('stops counting once past either limit', () => {
    const wide = Array.from({ length: 1_000 }, () => ({}));
    expect(measureTree(wide, Infinity, 10)).toEqual({ depth: 1, nodes: 11 });
    expect(measureTree(wide, Infinity, Infinity)).toEqual({ depth: 1, nodes: 1_001 });
  });

  it('refuses a flat statement under the size limit with too many nodes as parse.too_complex 54001, with the advice to split it', () => {
    const sql = `select ${terms(8_000, () => 'id')} from orders`;
    expect(Buffer.byteLength(sql)).toBeLessThan(MAX_SQL_BYTES);
    expect(parseStatements(sql)).toMatchObject({ ok: false, reason: 'too_complex', what: `has more than ${MAX_TREE_NODES} parse tree nodes` });
    expect(decisionOf(sql)).toMatchObject({ action: 'refuse', rule: 'parse.too_complex', sqlstate: '54001', reason: NODES_REASON });
    expect(decisionOf(`select count(*) from orders where ${terms(4_000, (i) => `id <> ${i}`, ' and ')}`)).toMatchObject({ rule: 'parse.too_complex', reason: NODES_REASON });
  });

  it('lets the flat shapes analysts write through: a 10,000-number IN list, 2,500 ANDed comparisons', () => {
    expect(decisionOf(`select count(*) from orders where id in (${terms(10_000, (i) => `${i}`, ',')})`)).toMatchObject({ action: 'allow' });
    expect(decisionOf(`select count(*) from orders where ${terms(2_500, (i) => `id <> ${i}`, ' and ')}`)).toMatchObject({ action: 'allow' });
  });
});

describe('the name-binding budget', () => {
  it('stops the walk once the steps spent pass the budget', () => {
    const out = new Collector(searchPathOf(['public']));
    out.bind(MAX_BINDING_STEPS);
    expect(out.bindingSteps).toBe(MAX_BINDING_STEPS);
    expect(() => out.bind(1)).toThrow(BindingBudgetExceeded);
  });

  it.each([
    ['2,400 unqualified names over 2,400 FROM items', `select ${terms(2_400, () => 'id')} from ${terms(2_400, (i) => `orders o${i}`)}`],
    ['1,900 qualified names over 1,900 FROM items', `select ${terms(1_900, (i) => `o${i}.id`)} from ${terms(1_900, (i) => `orders o${i}`)}`],
    ['2,000 scalar subqueries over 2,000 FROM items', `select ${terms(2_000, () => '(select id)')} from ${terms(2_000, (i) => `orders o${i}`)}`],
    ['2,000 derived tables, each seeing the ones before it', `select 1 from ${terms(2_000, (i) => `(select id from orders) s${i}`)}`],
    ['masked names over 2,100 FROM items', `select ${terms(2_100, () => 'email')} from ${terms(2_100, (i) => `customers c${i}`)}`],
  ])('refuses %s as parse.too_complex 54001, with the advice to split it', (_what, sql) => {
    expect(Buffer.byteLength(sql)).toBeLessThan(MAX_SQL_BYTES);
    expect(parseStatements(sql)).toMatchObject({ ok: true });
    expect(analyzeSql(sql)).toMatchObject({ ok: false, reason: 'too_complex' });
    expect(decisionOf(sql)).toEqual({
      action: 'refuse',
      event: 'blocked',
      rule: 'parse.too_complex',
      sqlstate: '54001',
      reason: BINDING_REASON,
      statementKind: '',
      tablesRead: [],
      tablesWritten: [],
      tablesBlocked: [],
      progress: [],
    });
  });

  it('allows what analysts write: a 300-table join with 1,000 qualified references, 300 CTEs', () => {
    const join = `select ${terms(1_000, (i) => `t${i % 300}.amount`)} from orders t0 ${terms(299, (i) => `join orders t${i + 1} on t${i + 1}.id = t${i}.id`, ' ')}`;
    expect(decisionOf(join)).toMatchObject({ action: 'allow', tablesRead: ['public.orders'] });
    const ctes = `with ${terms(300, (i) => `c${i} as (select id, amount from ${i === 0 ? 'orders' : `c${i - 1}`} where id > ${i})`)} select id, amount from c299`;
    expect(decisionOf(ctes)).toMatchObject({ action: 'allow', tablesRead: ['public.orders'] });
  });

  it('binds a name to one candidate per distinct table, however often the table is in scope', () => {
    const analyzed = analyzeSql(`select id, o.amount from orders, orders o, public.orders p, customers c, orders x`);
    if (!analyzed.ok) throw new Error('does not analyze');
    const [id, amount] = analyzed.statements[0]!.columns;
    expect(id?.candidates).toEqual([
      { table: { schema: 'public', name: 'orders' }, column: 'id' },
      { table: { schema: 'public', name: 'customers' }, column: 'id' },
    ]);
    expect(amount?.candidates).toEqual([{ table: { schema: 'public', name: 'orders' }, column: 'amount' }]);
  });
});

describe('the masked rewrite under the node limit', () => {
  it('refuses a rewrite that would pass the node limit before making it, with the advice to reference masked columns less', () => {
    expect(decisionOf(`select ${terms(4_000, () => 'email')} from customers`)).toMatchObject({
      action: 'refuse',
      rule: 'parse.too_complex',
      sqlstate: '54001',
      tablesRead: ['public.customers'],
      reason: `the statement would have more than ${MAX_TREE_NODES} parse tree nodes once its 4000 references to masked columns are masked (rule parse.too_complex). Split it into several smaller statements, or reference the masked columns fewer times.`,
    });
  });

  it('masks a statement whose rewrite stays under it', () => {
    const decision = decisionOf(`select ${terms(1_000, () => 'email')} from customers`);
    expect(decision).toMatchObject({ action: 'allow', event: 'masked', rule: 'masked_columns.masked' });
    expect(decision.action === 'allow' ? decision.sql.match(/'\[redacted\]'/g)?.length : 0).toBe(1_000);
  });
});
