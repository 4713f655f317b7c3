/**
 * Row filters (proxy/policy/row-filters.ts): the predicate vetted when the policy is saved, and the
 * parse-tree rewrite that puts it on every read of the table at every depth (a subquery stands in
 * for the table, so outer joins filter it before joining) and on the rows UPDATE and DELETE change;
 * the refusals of what it cannot bound.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import type { PolicyRow } from '../../projections/policies.js';
import { decideStatement } from '../../proxy/policy/hook.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { rowFilterProblem } from '../../proxy/policy/row-filters.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { catalogFromRows } from '../../proxy/upstream/catalog-query.js';

beforeAll(loadParser);

const catalog = catalogFromRows([
  ['r', '["public", "orders", "r", ["id", "tenant_id", "total"], [["public", "orders_child"]], [], false, [], [], false, [], []]'],
  ['r', '["public", "orders_child", "r", ["id", "tenant_id", "total"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "customers", "r", ["id", "tenant_id", "email"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "Tenant Docs", "r", ["id", "Tenant"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "orders_view", "v", ["id", "tenant_id", "total"], [], [], false, [], [], false, [], []]'],
  ['r', '["app", "orders", "r", ["id", "tenant_id"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "events", "p", ["id", "tenant_id"], [], [], false, [], [], false, [], []]'],
]);

const F = '(SELECT * FROM ONLY public.orders WHERE orders.tenant_id = 7 OFFSET 0)';
const policy: PolicyRules = {
  read_only: false,
  allowed_tables: ['public.*', 'app.*'],
  masked_columns: { 'public.customers.email': 'redact' },
  allow_catalog: false,
  canaries: [],
  row_filters: { 'public.orders': 'tenant_id = 7', 'public.Tenant Docs': '"Tenant" = 7 OR "Tenant" IS NULL' },
};

function decide(sql: string, rules: PolicyRules = policy, searchPath?: string[]): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error('does not parse');
  const session = { catalog, ...(searchPath ? { searchPath } : {}) };
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), rules, session);
}

const runsAs = (sql: string, searchPath?: string[]): string => {
  const decision = decide(sql, policy, searchPath);
  if (decision.action !== 'allow') throw new Error(`${sql}: refused ${decision.rule}: ${decision.reason}`);
  // The deparser pads some parentheses with spaces and not others; the tests compare the text without that padding.
  return decision.sql.replace(/\( /g, '(').replace(/ \)/g, ')');
};

describe('the rewrite, at every depth', () => {
  const CASES: [string, string][] = [
    ['SELECT * FROM orders', `SELECT * FROM ${F} AS orders`],
    ['SELECT o.id FROM public.orders o', `SELECT o.id FROM ${F} AS o`],
    ['SELECT * FROM ONLY orders', `SELECT * FROM ${F} AS orders`],
    ['SELECT * FROM "public"."orders" AS x(a, b)', `SELECT * FROM ${F} AS x(a, b)`],
    ['SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.id = c.id', `SELECT c.id, o.id FROM customers AS c LEFT JOIN ${F} AS o ON o.id = c.id`],
    ['SELECT * FROM orders a FULL JOIN orders b USING (id)', `SELECT * FROM ${F} AS a FULL JOIN ${F} AS b USING (id)`],
    ['SELECT * FROM orders NATURAL JOIN app.orders', `SELECT * FROM ${F} AS orders NATURAL JOIN app.orders`],
    ['SELECT a.id FROM orders a, orders b WHERE a.id = b.id + 1', `SELECT a.id FROM ${F} AS a, ${F} AS b WHERE a.id = (b.id + 1)`],
    ['WITH t AS (SELECT id FROM orders) SELECT * FROM t', `WITH t AS (SELECT id FROM ${F} AS orders) SELECT * FROM t`],
    [
      'WITH RECURSIVE r(id) AS (SELECT min(id) FROM orders UNION ALL SELECT o.id FROM orders o JOIN r ON o.id = r.id + 1) SELECT * FROM r',
      `WITH RECURSIVE r(id) AS (SELECT pg_catalog.min(id) FROM ${F} AS orders UNION ALL SELECT o.id FROM ${F} AS o JOIN r ON o.id = (r.id + 1)) SELECT * FROM r`,
    ],
    ['SELECT id FROM orders UNION SELECT id FROM customers EXCEPT SELECT id FROM orders', `(SELECT id FROM ${F} AS orders UNION SELECT id FROM customers) EXCEPT SELECT id FROM ${F} AS orders`],
    ['SELECT * FROM app.orders c, LATERAL (SELECT * FROM orders o WHERE o.id = c.id) x', `SELECT * FROM app.orders AS c, LATERAL (SELECT * FROM ${F} AS o WHERE o.id = c.id) AS x`],
    ['SELECT * FROM app.orders c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.id = c.id)', `SELECT * FROM app.orders AS c WHERE EXISTS (SELECT 1 FROM ${F} AS o WHERE o.id = c.id)`],
    ['SELECT (SELECT count(*) FROM orders) AS n', `SELECT (SELECT pg_catalog.count(*) FROM ${F} AS orders) AS n`],
    ['SELECT * FROM (SELECT * FROM (SELECT id FROM orders) a) b', `SELECT * FROM (SELECT * FROM (SELECT id FROM ${F} AS orders) AS a) AS b`],
    ['INSERT INTO customers (id) SELECT id FROM orders', `INSERT INTO customers (id) SELECT id FROM ${F} AS orders`],
    ['UPDATE orders SET total = 0', 'UPDATE ONLY orders SET total = 0 WHERE orders.tenant_id = 7'],
    ['UPDATE orders o SET total = 0 WHERE o.id = 1 OR o.id = 2 RETURNING *', 'UPDATE ONLY orders AS o SET total = 0 WHERE o.tenant_id = 7 AND (o.id = 1 OR o.id = 2) RETURNING *'],
    ['UPDATE orders SET total = 0 WHERE id > 1 AND id < 5 RETURNING id', 'UPDATE ONLY orders SET total = 0 WHERE orders.tenant_id = 7 AND id > 1 AND id < 5 RETURNING id'],
    ['UPDATE customers c SET email = o.total::text FROM orders o WHERE o.id = c.id', `UPDATE customers AS c SET email = o.total::text FROM ${F} AS o WHERE o.id = c.id`],
    ['DELETE FROM orders WHERE id = 1 RETURNING *', 'DELETE FROM ONLY orders WHERE orders.tenant_id = 7 AND id = 1 RETURNING *'],
    ['DELETE FROM customers c USING orders o WHERE o.id = c.id', `DELETE FROM customers AS c USING ${F} AS o WHERE o.id = c.id`],
    ['WITH d AS (DELETE FROM orders RETURNING id) SELECT * FROM d', 'WITH d AS (DELETE FROM ONLY orders WHERE orders.tenant_id = 7 RETURNING id) SELECT * FROM d'],
    ['SELECT * FROM "Tenant Docs"', 'SELECT * FROM (SELECT * FROM ONLY public."Tenant Docs" WHERE "Tenant Docs"."Tenant" = 7 OR "Tenant Docs"."Tenant" IS NULL OFFSET 0) AS "Tenant Docs"'],
    ['COPY (SELECT * FROM orders) TO STDOUT', `COPY (SELECT * FROM ${F} AS orders) TO STDIN`],
  ];
  for (const [sql, expected] of CASES) it(sql, () => expect(runsAs(sql)).toBe(expected));

  it('resolves names on the search path: a name that may be the filtered table is refused unless qualified', () => {
    expect(decide('SELECT * FROM orders', policy, ['app', 'public'])).toMatchObject({
      action: 'refuse', rule: 'row_filters.unsupported', reason: 'orders may name app.orders or public.orders; write it schema-qualified (rule row_filters.unsupported).',
    });
    expect(runsAs('SELECT * FROM public.orders', ['app', 'public'])).toBe(`SELECT * FROM ${F} AS orders`);
    expect(runsAs('SELECT * FROM app.orders', ['app', 'public'])).toBe('SELECT * FROM app.orders');
  });

  it('records the filter: query event, rule row_filters.filtered; masks still apply on top', () => {
    expect(decide('SELECT * FROM orders')).toMatchObject({ action: 'allow', event: 'query', rule: 'row_filters.filtered', reason: "rows of public.orders limited by the policy's row filters (rule row_filters.filtered)." });
    expect(decide('SELECT * FROM app.orders')).toMatchObject({ action: 'allow', event: 'query', rule: '', reason: '' });
    const masked = decide('SELECT c.email, o.id FROM customers c JOIN orders o ON o.id = c.id');
    expect(runsAs('SELECT c.email, o.id FROM customers c JOIN orders o ON o.id = c.id')).toBe(`SELECT '[redacted]'::text AS email, o.id FROM customers AS c JOIN ${F} AS o ON o.id = c.id`);
    expect(masked).toMatchObject({
      event: 'masked', rule: 'masked_columns.masked',
      reason: "masked public.customers.email (redact): every reference reads the masked value (rule masked_columns.masked). The rows of public.orders limited by the policy's row filters (rule row_filters.filtered).",
    });
  });
});

describe('what the filter cannot bound is refused', () => {
  const REFUSED: [string, string][] = [
    ['INSERT INTO orders VALUES (1, 7, 1)', 'row_filters.write'],
    ['INSERT INTO orders SELECT * FROM orders', 'row_filters.write'],
    ['UPDATE orders SET tenant_id = 8 WHERE id = 1', 'row_filters.write'],
    ['UPDATE orders SET (total, tenant_id) = (1, 8)', 'row_filters.write'],
    ['TRUNCATE orders', 'row_filters.write'],
    ['COPY orders FROM STDIN', 'row_filters.write'],
    ['COPY orders TO STDOUT', 'row_filters.unsupported'],
    ['SELECT * FROM orders TABLESAMPLE SYSTEM (10)', 'row_filters.unsupported'],
    ['SELECT * FROM orders_view', 'row_filters.indirect'],
    ['SELECT * FROM orders_child', 'row_filters.child'],
    ['SELECT * FROM events', 'row_filters.indirect'],
    ['EXPLAIN SELECT * FROM orders', 'row_filters.explain'],
  ];
  for (const [sql, rule] of REFUSED) it(`${sql}: ${rule}`, () => expect(decide(sql)).toMatchObject({ action: 'refuse', rule, sqlstate: '42501' }));

  it('a filter column the upstream does not have refuses every statement on the table', () => {
    const missing = { ...policy, row_filters: { 'public.orders': 'region = 1' } };
    expect(decide('SELECT id FROM orders', missing)).toMatchObject({ action: 'refuse', rule: 'row_filters.column_missing', tablesBlocked: ['public.orders'] });
    expect(decide('SELECT id FROM customers', missing)).toMatchObject({ action: 'allow', rule: '' });
  });

  it('a partitioned table cannot take a filter: its partitions could be read around it', () => {
    expect(decide('SELECT id FROM events', { ...policy, row_filters: { 'public.events': 'tenant_id = 7' } })).toMatchObject({
      action: 'refuse', rule: 'row_filters.unsupported', reason: 'public.events is a partitioned table, whose partitions could be read around its row filter (rule row_filters.unsupported); the policy must filter a plain table.',
    });
  });

  it('the reason never quotes the predicate', () => {
    for (const [sql] of REFUSED) expect(decide(sql).reason).not.toContain('= 7');
  });
});

describe('vetting the predicate when the policy is saved', () => {
  it('accepts an expression on the table’s own columns with vetted functions', () => {
    expect(rowFilterProblem('public.orders', 'tenant_id = 7')).toBeUndefined();
    expect(rowFilterProblem('public.orders', "lower(region) = 'eu' AND tenant_id IN (7, 8)")).toBeUndefined();
  });

  const REFUSED: [string, string][] = [
    ['tenant_id = (SELECT 7)', 'it contains a subquery'],
    ['EXISTS (SELECT 1 FROM customers)', 'it contains a subquery'],
    ['tenant_id = $1', 'it contains a parameter ($n)'],
    ['orders.tenant_id = 7', 'it names a column other than by its bare name (write tenant_id, not orders.tenant_id)'],
    ['count(*) > 0', 'it calls the aggregate count'],
    ['row_number() OVER () = 1', 'it calls the window function row_number'],
    ['random() < 0.5', 'it calls random, an aggregate, window, set-returning or volatile function'],
    ['pg_sleep(1) IS NULL', 'function pg_sleep is not on the vetted function list. Use none: it would hold an upstream connection instead.'],
    ['true UNION SELECT * FROM customers', 'it is not one boolean expression'],
    ['true ORDER BY 1', 'it is not one boolean expression'],
    ['true; DROP TABLE orders', 'it is not one boolean expression'],
    ['true) OR (true', 'it does not parse as a boolean expression'],
    ["'x'::regclass IS NOT NULL", 'it reaches a cast to regclass, which is not the filtered table'],
  ];
  for (const [predicate, why] of REFUSED) {
    it(predicate, () => expect(rowFilterProblem('public.orders', predicate)).toBe(`the row filter of public.orders is refused: ${why}`));
  }
});

describe('session values: pgward.credential_id() and pgward.project_id()', () => {
  const own = { 'public.orders': 'tenant_id::text = pgward.credential_id() OR pgward.project_id() = \'prj_x\'' };
  const rules = (session_values?: PolicyRules['session_values']): PolicyRules => ({ ...policy, row_filters: own, ...(session_values ? { session_values } : {}) });

  it('are accepted at save time as the only pgward.* calls, with no arguments', () => {
    expect(rowFilterProblem('public.orders', own['public.orders'])).toBeUndefined();
    expect(rowFilterProblem('public.orders', 'tenant_id::text = "pgward".credential_id()')).toBeUndefined();
    const refused: [string, string][] = [
      ['tenant_id::text = pgward.session_user()', 'it calls pgward.session_user, and the only session values are pgward.credential_id() and pgward.project_id()'],
      ['tenant_id::text = pgward.credential_id(1)', 'pgward.credential_id() takes no arguments'],
      ['tenant_id::text = pgward.credential_id(VARIADIC array[1])', 'pgward.credential_id() takes no arguments'],
      ['tenant_id::text = credential_id()', 'function credential_id is not on the vetted function list'],
      ['tenant_id::text = other.pgward.credential_id()', 'other.pgward.credential_id is not a built-in'],
    ];
    for (const [predicate, why] of refused) expect(rowFilterProblem('public.orders', predicate), predicate).toContain(why);
  });

  it('become string constants in the rewrite, quoted faithfully', () => {
    const decision = decide('SELECT id FROM orders', rules({ credential_id: "cred_a'; drop table orders; --", project_id: 'prj_1' }));
    expect(decision).toMatchObject({ action: 'allow', rule: 'row_filters.filtered' });
    expect(decision.action === 'allow' && decision.sql).toBe(
      "SELECT id FROM ( SELECT * FROM ONLY public.orders WHERE orders.tenant_id::text = 'cred_a''; drop table orders; --' OR 'prj_1' = 'prj_x' OFFSET 0 ) AS orders",
    );
    const update = decide('UPDATE orders SET total = 0 WHERE id = 1', rules({ credential_id: 'cred_b', project_id: 'prj_1' }));
    expect(update.action === 'allow' && update.sql).toBe("UPDATE ONLY orders SET total = 0 WHERE (orders.tenant_id::text = 'cred_b' OR 'prj_1' = 'prj_x') AND id = 1");
  });

  it('refuse a statement the filter applies to when the session does not have them (fail closed)', () => {
    expect(decide('SELECT id FROM orders', rules())).toMatchObject({ action: 'refuse', rule: 'row_filters.session_value', sqlstate: '42501' });
    expect(decide('SELECT id FROM orders', rules({ project_id: 'prj_1' }))).toMatchObject({ action: 'refuse', rule: 'row_filters.session_value' });
    expect(decide('SELECT 1 FROM customers', rules())).toMatchObject({ action: 'allow' });
  });

  it('an agent’s own statement may not call them', () => {
    expect(decide("SELECT id FROM customers WHERE pgward.credential_id() = 'x'", rules({ credential_id: 'a', project_id: 'p' }))).toMatchObject({ action: 'refuse', rule: 'function.not_allowed' });
  });

  it('keep one credential’s cached decision from another’s, on one policy row', () => {
    const row: PolicyRow = {
      policy_id: 'pol_1', project_id: 'prj_1', name: 'p', read_only: false, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'redact' }, max_rows: null, queries_per_day: 0,
      bytes_per_month: '0', approval: { held_kinds: [], row_threshold: null, expiry_seconds: 3600, tables: [], auto_approve: {} }, honeytokens: [], audit_mode: 'best_effort', allow_catalog: false,
      statement_timeout_ms: 30_000, statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'warn', row_filters: { 'public.orders': 'tenant_id::text = pgward.credential_id()' },
      max_affected_rows: null, write_mode: 'commit', version: 1, status: 'active', revision: 1, created_at: '', updated_at: '',
    } as PolicyRow;
    const as = (credential_id: string | undefined) => ({
      credential: null, policy: row, protocol: 'simple' as const, catalog, honeytokens: { canariesOf: () => [], tripped: () => undefined },
      ...(credential_id ? { sessionValues: { credential_id, project_id: 'prj_1' } } : {}),
    });
    // Read and masked (the numeric shape cache serves masked reads across numbers), written: each decided for its own credential.
    for (const sql of ['SELECT id FROM orders', 'SELECT c.email FROM customers c JOIN orders o USING (id) WHERE o.id = 1', 'SELECT c.email FROM customers c JOIN orders o USING (id) WHERE o.id = 2', 'DELETE FROM orders WHERE id = 1']) {
      const a = decideStatement(sql, as('cred_a'));
      const b = decideStatement(sql, as('cred_b'));
      expect(a.action === 'allow' ? 'allow' : a.reason, sql).toBe('allow');
      expect(a.action === 'allow' && a.sql, sql).toContain("'cred_a'");
      expect(b.action === 'allow' && b.sql, sql).toContain("'cred_b'");
      expect(b.action === 'allow' && b.sql, sql).not.toContain("'cred_a'");
      expect(decideStatement(sql, as(undefined)), sql).toMatchObject({ action: 'refuse', rule: 'row_filters.session_value' });
    }
  });
});
