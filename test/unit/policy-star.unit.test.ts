import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement, type AnalysisSession } from '../../proxy/policy/analyze.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { handCatalog } from '../support/catalog.js';

beforeAll(loadParser);

const catalog = handCatalog({
  'public.customers': ['id', 'name', 'email', 'ssn'],
  'public.orders': ['id', 'customer_id', 'amount'],
  'public.tags': ['id', 'label'],
});

/** The red team's fixture: orders and customers, email and ssn redacted. */
const policy: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.orders', 'public.customers', 'public.tags'],
  masked_columns: { 'public.customers.email': 'redact', 'public.customers.ssn': 'redact' },
  allow_catalog: false,
  canaries: [],
};

function decide(sql: string, session: AnalysisSession = { catalog }, rules: PolicyRules = policy): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(parsed.reason);
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), rules, session);
}

function rewrite(sql: string, session: AnalysisSession = { catalog }): string {
  const decision = decide(sql, session);
  if (decision.action !== 'allow') throw new Error(`${decision.rule}: ${decision.reason}`);
  return decision.sql;
}

const R = "'[redacted]'::text";
const CUSTOMERS = `customers.id, customers.name, ${R} AS email, ${R} AS ssn`;

describe('* over masked tables, expanded from the catalog', () => {
  it('writes out select *, c.* and TABLE with each masked column masked under its own name', () => {
    expect(rewrite('select * from customers')).toBe(`SELECT ${CUSTOMERS} FROM customers`);
    expect(rewrite('TABLE customers')).toBe(`SELECT ${CUSTOMERS} FROM customers`);
    expect(rewrite('select c.* from customers c where c.id = 1')).toBe(`SELECT c.id, c.name, ${R} AS email, ${R} AS ssn FROM customers AS c WHERE c.id = 1`);
    expect(rewrite('select public.customers.* from public.customers')).toBe(
      `SELECT public.customers.id, public.customers.name, ${R} AS email, ${R} AS ssn FROM public.customers`,
    );
  });

  it('keeps * over unmasked tables as written, and masks the named columns beside it', () => {
    expect(decide('select * from orders')).toMatchObject({ action: 'allow', event: 'query', sql: 'select * from orders' });
    expect(rewrite('select o.*, c.* , c.email as mail from orders o join customers c on c.id = o.customer_id')).toBe(
      `SELECT o.*, c.id, c.name, ${R} AS email, ${R} AS ssn, ${R} AS mail FROM orders AS o JOIN customers AS c ON c.id = o.customer_id`,
    );
  });

  it('writes out q.* by the nearest FROM item named q, as PostgreSQL binds it', () => {
    expect(rewrite('select (select c.* from orders c limit 1) from customers c')).toBe('SELECT (SELECT c.id, c.customer_id, c.amount FROM orders AS c LIMIT 1) FROM customers AS c');
    expect(rewrite('select * from customers c, lateral (select c.*) x')).toBe(
      `SELECT c.id, c.name, ${R} AS email, ${R} AS ssn, x.* FROM customers AS c, LATERAL ( SELECT c.id, c.name, ${R} AS email, ${R} AS ssn ) AS x`,
    );
    expect(decide('select * from customers, (select 1)')).toMatchObject({ action: 'refuse', rule: 'masked_columns.whole_row', reason: expect.stringContaining('a subquery or function in FROM has no alias; give it one') });
  });

  it('expands * over a join in FROM order, each table by its own name', () => {
    expect(rewrite('select * from orders o join customers c on c.id = o.customer_id')).toBe(
      `SELECT o.id, o.customer_id, o.amount, c.id, c.name, ${R} AS email, ${R} AS ssn FROM orders AS o JOIN customers AS c ON c.id = o.customer_id`,
    );
    expect(rewrite('select * from customers, orders where customers.id = orders.customer_id')).toBe(
      `SELECT ${CUSTOMERS}, orders.id, orders.customer_id, orders.amount FROM customers, orders WHERE customers.id = orders.customer_id`,
    );
  });

  it('puts USING columns first, unqualified, as PostgreSQL does', () => {
    expect(rewrite('select * from customers join tags using (id)')).toBe(
      `SELECT id, customers.name, ${R} AS email, ${R} AS ssn, tags.label FROM customers JOIN tags USING (id)`,
    );
  });

  it('expands * in subqueries, CTEs and both arms of a set operation', () => {
    expect(rewrite('select s.name from (select * from customers) s')).toBe(`SELECT s.name FROM ( SELECT ${CUSTOMERS} FROM customers ) AS s`);
    expect(rewrite('with x as (select * from customers) select * from x')).toBe(`WITH x AS (SELECT ${CUSTOMERS} FROM customers) SELECT * FROM x`);
    expect(rewrite('select * from customers union all select * from customers')).toBe(`SELECT ${CUSTOMERS} FROM customers UNION ALL SELECT ${CUSTOMERS} FROM customers`);
    expect(rewrite('select * from (select * from customers) s where s.email is not null')).toBe(
      `SELECT * FROM ( SELECT ${CUSTOMERS} FROM customers ) AS s WHERE s.email IS NOT NULL`,
    );
  });

  it('keeps refusing when there is no catalog, saying why and what to write; with one that does not list the table, refuses it as unknown', () => {
    const decision = decide('select * from customers', {});
    expect(decision).toMatchObject({ action: 'refuse', rule: 'masked_columns.whole_row', sqlstate: '42501' });
    expect(decision.reason).toBe(
      '* would expose masked column public.customers.email and the gateway cannot list the columns it stands for: the gateway does not know the columns of public.customers (the upstream catalog has not been read, or does not list it) (rule masked_columns.whole_row); list the columns you need instead of *.',
    );
    expect(decide('select * from customers', { catalog: handCatalog({ 'public.orders': ['id'] }) })).toMatchObject({ action: 'refuse', rule: 'catalog.relation_unknown', sqlstate: '42501', tablesBlocked: ['public.customers'] });
  });

  it('refuses, as too large (54001), stars that would be written out into more than 4,000 columns', () => {
    const wide = handCatalog({ 'public.customers': Array.from({ length: 1_000 }, (_, index) => (index === 7 ? 'email' : `c${index}`)) });
    expect(decide('select *, *, * from customers', { catalog: wide })).toMatchObject({ action: 'allow', event: 'masked' });
    expect(decide('select *, *, *, * from customers union all select * from customers', { catalog: wide })).toMatchObject({
      action: 'refuse',
      rule: 'masked_columns.whole_row',
      sqlstate: '54001',
      reason: "written out, the statement's * would list 5000 columns, more than the 4000 the gateway writes out (rule masked_columns.whole_row); list the columns you need instead of *.",
    });
  });

  it('still refuses whole-row uses that are not a select-list star', () => {
    for (const sql of ['select row_to_json(c) from customers c', 'select c from customers c', 'select (c.*)::text from customers c', 'select to_jsonb(c.*) from customers c']) {
      expect(decide(sql), sql).toMatchObject({ action: 'refuse', rule: 'masked_columns.whole_row' });
    }
  });

  it('still trips a column honeytoken on *, answered as a table that is not allowed', () => {
    const trap: PolicyRules = { ...policy, masked_columns: {}, canaries: [{ honeytoken_id: 'h1', kind: 'column', target: 'public.customers.ssn' }] };
    for (const [sql, rules] of [
      ['select * from customers', trap],
      ['select c.* from customers c', { ...trap, masked_columns: policy.masked_columns }],
      ['select * from customers as c(i, n)', { ...trap, masked_columns: policy.masked_columns }],
    ] as const) {
      expect(decide(sql, { catalog }, rules), sql).toMatchObject({ action: 'refuse', event: 'blocked', rule: 'allowed_tables.not_allowed', trip: { honeytokenId: 'h1', rule: 'honeytoken.column' } });
    }
  });
});

describe('NATURAL JOIN and column alias lists over masked tables', () => {
  it('turns a NATURAL JOIN on an unmasked key into USING its common columns', () => {
    expect(rewrite('select id, label from customers natural join tags')).toBe('SELECT id, label FROM customers JOIN tags USING (id)');
    expect(rewrite('select * from customers natural join tags')).toBe(`SELECT id, customers.name, ${R} AS email, ${R} AS ssn, tags.label FROM customers JOIN tags USING (id)`);
  });

  it('knows the columns of subqueries and CTEs whose select list names them plainly', () => {
    expect(rewrite('with t as (select id, label as tag from tags) select * from t natural join customers')).toBe(
      `WITH t AS (SELECT id, label AS tag FROM tags) SELECT id, t.tag, customers.name, ${R} AS email, ${R} AS ssn FROM t JOIN customers USING (id)`,
    );
    expect(rewrite('select * from (select id from orders union select 1) s(k) join customers c on c.id = s.k')).toBe(
      `SELECT s.k, c.id, c.name, ${R} AS email, ${R} AS ssn FROM ( SELECT id FROM orders UNION SELECT 1 ) AS s(k) JOIN customers AS c ON c.id = s.k`,
    );
    expect(decide('select * from (select id + 0 from orders) s natural join customers')).toMatchObject({
      action: 'refuse',
      rule: 'masked_columns.whole_row',
      reason: expect.stringContaining('the columns a NATURAL JOIN merges are not known to the gateway'),
    });
  });

  it('refuses a NATURAL JOIN whose common column is masked, and one over unknown columns', () => {
    const masksId: PolicyRules = { ...policy, masked_columns: { 'public.customers.id': 'hash' } };
    expect(decide('select label from customers natural join tags', { catalog }, masksId)).toMatchObject({
      action: 'refuse',
      rule: 'masked_columns.unmaskable',
      reason: 'NATURAL JOIN compares masked column public.customers.id, where no mask can be applied (rule masked_columns.unmaskable); join with ON on the columns you need.',
    });
    expect(decide('select label from customers natural join tags', {})).toMatchObject({ action: 'refuse', rule: 'masked_columns.whole_row' });
  });

  it('maps an alias list onto the catalog columns: masks follow the column, whatever its new name', () => {
    expect(rewrite('select c.i, c.n, c.e from customers as c(i, n, e)')).toBe(
      `SELECT c.i, c.n, c.e FROM ( SELECT customers.id, customers.name, ${R} AS email, ${R} AS ssn FROM customers ) AS c(i, n, e)`,
    );
    expect(rewrite('select * from customers as c(i, n)')).toBe(`SELECT c.i, c.n, c.email, c.ssn FROM ( SELECT ${CUSTOMERS} FROM customers ) AS c(i, n)`);
  });

  it('masks a masked column an alias list renames to an unmasked name, and joins NATURAL on the new names', () => {
    expect(rewrite('select name from customers as c(id, email, name)')).toBe(`SELECT name FROM ( SELECT ${CUSTOMERS} FROM customers ) AS c(id, email, name)`);
    expect(rewrite('select a from customers c(a, b) natural join tags t(a)')).toBe(`SELECT a FROM ( SELECT ${CUSTOMERS} FROM customers ) AS c(a, b) JOIN tags AS t(a) USING (a)`);
    expect(decide('select 1 from customers c(a, b, x) natural join tags t(x)')).toMatchObject({ action: 'refuse', rule: 'masked_columns.unmaskable' });
  });

  it('refuses an alias list over a masked table the catalog does not know', () => {
    expect(decide('select c.i from customers as c(i, n)', {})).toMatchObject({ action: 'refuse', rule: 'masked_columns.whole_row' });
  });
});

describe('TABLESAMPLE', () => {
  it('allows SYSTEM and BERNOULLI with constant arguments and REPEATABLE', () => {
    expect(decide('select id from orders tablesample system (10)')).toMatchObject({ action: 'allow', event: 'query' });
    expect(decide('select id from orders tablesample bernoulli (50.5) repeatable (42)')).toMatchObject({ action: 'allow' });
    expect(rewrite('select * from customers tablesample bernoulli (10) repeatable (1)')).toBe(`SELECT ${CUSTOMERS} FROM customers TABLESAMPLE bernoulli (10) REPEATABLE (1)`);
  });

  it('refuses other methods and arguments that are not constants, without parser node names', () => {
    for (const sql of [
      'select id from orders tablesample system_rows (10)',
      'select id from orders tablesample public.system (10)',
      'select id from orders tablesample system ((select 10))',
      'select id from orders tablesample bernoulli (random() * 10)',
      'select id from orders tablesample bernoulli (10) repeatable ((select max(id) from customers))',
    ]) {
      const decision = decide(sql);
      expect(decision, sql).toMatchObject({ action: 'refuse', rule: 'parse.unsupported', sqlstate: '0A000' });
      expect(decision.reason, sql).not.toMatch(/RangeTableSample|SubLink|FuncCall|A_Expr/);
    }
  });

  it('checks the sampled table like any other', () => {
    expect(decide('select * from secrets tablesample system (10)')).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed' });
  });
});

describe('WITH RECURSIVE ... SEARCH and CYCLE', () => {
  const tree = 'with recursive t(id, depth) as (select id, 0 from customers where id = 1 union all select c.id, t.depth + 1 from customers c join t on c.id = t.id + 1 where t.depth < 3)';

  it('allows SEARCH DEPTH/BREADTH FIRST and CYCLE as written', () => {
    const search = `${tree} search depth first by id set ord select * from t order by ord`;
    expect(decide(search)).toMatchObject({ action: 'allow', sql: search });
    expect(decide(`${tree} search breadth first by id set ord cycle id set looped using path select id from t`)).toMatchObject({ action: 'allow' });
    expect(decide(`${tree} cycle id set looped to 'Y' default 'N' using path select id from t`)).toMatchObject({ action: 'allow' });
  });

  it('keeps SEARCH and CYCLE through a mask rewrite', () => {
    const masked = 'with recursive t(id, mail) as (select id, email from customers where id = 1 union all select c.id, c.email from customers c join t on c.id = t.id + 1) search breadth first by mail set ord cycle mail set looped using path select * from t';
    expect(rewrite(masked)).toBe(
      `WITH RECURSIVE t(id, mail) AS (SELECT id, ${R} AS email FROM customers WHERE id = 1 UNION ALL SELECT c.id, ${R} AS email FROM customers AS c JOIN t ON c.id = (t.id + 1)) SEARCH BREADTH FIRST BY mail SET ord CYCLE mail SET looped TO true DEFAULT false USING path SELECT * FROM t`,
    );
  });
});
