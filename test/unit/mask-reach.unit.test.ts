import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { catalogMasks } from '../../proxy/policy/mask-reach.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { catalogFromRows } from '../../proxy/upstream/catalog-query.js';

beforeAll(loadParser);

const catalog = catalogFromRows([
  ['r', '["public", "customers", "r", ["id", "email"], [["public", "customers_archive"]], [], false, [], [], false, [], []]'],
  ['r', '["public", "customers_archive", "r", ["id", "email", "at"], [["public", "customers_old"]], [], false, [], [], false, [], []]'],
  ['r', '["public", "customers_old", "r", ["id", "email", "at"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "people", "p", ["id", "email"], [], [], false, [], [], false, [["public", "people_a"], ["public", "people_b"]], []]'],
  ['r', '["public", "people_a", "r", ["id", "email"], [], [], false, [], [], false, [["public", "people"]], []]'],
  ['r', '["public", "people_b", "r", ["id", "email"], [], [], false, [], [], false, [["public", "people"]], []]'],
  ['r', '["public", "contacts", "v", ["id", "contact"], [], [], false, [["public", "customers"]], [], false, [], []]'],
  ['r', '["public", "contact_list", "m", ["contact"], [], [], false, [["public", "contacts"]], [], false, [], []]'],
  ['r', '["public", "people_view", "v", ["email"], [], [], false, [["public", "people"]], [], false, [], []]'],
  ['r', '["public", "orders", "r", ["id", "total"], [], [], false, [], [], false, [], []]'],
  ['r', '["public", "snapshots", "r", ["id", "one", "many"], [], [], false, [], [], false, [], [["one", "public", "customers"], ["many", "public", "people_a"]]]'],
  ['r', '["public", "order_totals", "v", ["id", "total"], [], [], false, [["public", "orders"]], [], false, [], []]'],
]);

const policy = (masked_columns: PolicyRules['masked_columns']): PolicyRules => ({ read_only: true, allowed_tables: ['public.*'], masked_columns, allow_catalog: false, canaries: [] });

function decide(sql: string, rules: PolicyRules, withCatalog = true): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error('does not parse');
  const session = withCatalog ? { catalog } : {};
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), rules, session);
}

describe('catalogMasks: a mask holds wherever the catalog shows its table’s rows', () => {
  it('reaches inheritance descendants at every depth and every member of a partition tree, not siblings', () => {
    expect(catalogMasks({ 'public.customers.email': 'hash' }, catalog)).toEqual({
      'public.customers.email': 'hash', 'public.customers_archive.email': 'hash', 'public.customers_old.email': 'hash',
    });
    expect(catalogMasks({ 'public.people.email': 'partial' }, catalog)).toEqual({
      'public.people.email': 'partial', 'public.people_a.email': 'partial', 'public.people_b.email': 'partial',
    });
    expect(catalogMasks({ 'public.people_a.email': 'null' }, catalog)).toEqual({ 'public.people_a.email': 'null', 'public.people.email': 'null' });
  });

  it('keeps a mask the policy names itself, takes the strictest of two reaching one column, and the policy’s own without a catalog', () => {
    expect(catalogMasks({ 'public.people.email': 'partial', 'public.people_a.email': 'hash' }, catalog)).toEqual({
      'public.people.email': 'partial', 'public.people_a.email': 'hash', 'public.people_b.email': 'partial',
    });
    expect(catalogMasks({ 'public.people_a.email': 'hash', 'public.people_b.email': 'redact' }, catalog)['public.people.email']).toBe('redact');
    const own = { 'public.orders.total': 'redact' } as const;
    expect(catalogMasks(own, catalog)).toBe(own);
    expect(catalogMasks({ 'public.people.email': 'hash' }, undefined)).toEqual({ 'public.people.email': 'hash' });
  });

  it('masks a partition and a child as their table is masked', () => {
    const rules = policy({ 'public.people.email': 'redact', 'public.customers.email': 'redact' });
    for (const table of ['people_a', 'customers_old']) {
      const decided = decide(`SELECT id, email FROM ${table}`, rules);
      expect(decided).toMatchObject({ action: 'allow', event: 'masked', sql: `SELECT id, '[redacted]'::text AS email FROM ${table}` });
    }
    expect(decide('SELECT email FROM people_a', rules, false)).toMatchObject({ action: 'allow', event: 'query' });
  });
});

describe('a view or materialized view reaching a masked table', () => {
  const rules = policy({ 'public.customers.email': 'partial', 'public.people_b.email': 'hash' });

  it('is refused wherever it is named, at any depth of views', () => {
    for (const [sql, named, reached] of [
      ['SELECT contact FROM contacts', 'view public.contacts', 'public.customers'],
      ['SELECT 1 FROM orders WHERE EXISTS (SELECT 1 FROM contact_list)', 'materialized view public.contact_list', 'public.customers'],
      ['SELECT email FROM people_view', 'view public.people_view', 'public.people'],
    ] as const) {
      expect(decide(sql, rules)).toMatchObject({
        action: 'refuse', rule: 'masked_columns.view', sqlstate: '42501', tablesBlocked: [named.slice(named.lastIndexOf(' ') + 1)],
        reason: `${named} reads ${reached}, whose columns this credential's policy masks, and would show them unmasked (rule masked_columns.view); query ${reached} itself, or ask for ${named.slice(named.lastIndexOf(' ') + 1)} to be named in allowed_tables if it leaves the masked columns out.`,
      });
    }
  });

  it('is not refused over unmasked tables, when allowed_tables names it itself, nor without a catalog', () => {
    expect(decide('SELECT id, total FROM order_totals', rules)).toMatchObject({ action: 'allow', event: 'query' });
    expect(decide('SELECT contact FROM contacts', { ...rules, allowed_tables: ['public.contacts', 'public.customers'] })).toMatchObject({ action: 'allow', event: 'query' });
    expect(decide('SELECT contact FROM contact_list', { ...rules, allowed_tables: ['public.contacts', 'public.*'] })).toMatchObject({ action: 'refuse', rule: 'masked_columns.view' });
    expect(decide('SELECT contact FROM contacts', rules, false)).toMatchObject({ action: 'allow', event: 'query' });
  });
});

describe('rowColumnMasks: a column typed as a masked relation’s rows', () => {
  it('is masked as a whole with the strictest of that relation’s masks, unless the policy names it', () => {
    const rules = policy({ 'public.customers.email': 'partial', 'public.customers.id': 'redact', 'public.people.email': 'null' });
    expect(decide('SELECT id, one, many FROM snapshots', rules)).toMatchObject({
      action: 'allow', event: 'masked', sql: "SELECT id, '[redacted]'::text AS one, CASE WHEN false THEN many END AS many FROM snapshots",
    });
    expect(decide('SELECT s FROM snapshots s', rules)).toMatchObject({ action: 'refuse', rule: 'masked_columns.whole_row' });
    expect(decide('SELECT one FROM snapshots', { ...rules, masked_columns: { ...rules.masked_columns, 'public.snapshots.one': 'redact' } })).toMatchObject({ sql: "SELECT '[redacted]'::text AS one FROM snapshots" });
    expect(decide('SELECT one FROM snapshots', policy({ 'public.orders.total': 'redact' }))).toMatchObject({ action: 'allow', event: 'query' });
  });
});

describe('a view or materialized view reaching a denied table', () => {
  it('is refused as the table is, before any mask, unless allowed_tables names the view itself', () => {
    const rules = { ...policy({ 'public.customers.email': 'partial' }), denied_tables: ['public.customers'] };
    expect(decide('SELECT contact FROM contact_list', rules)).toMatchObject({
      action: 'refuse', rule: 'table.denied', tablesBlocked: ['public.contact_list'],
      reason: "materialized view public.contact_list reads public.customers, which is on this credential's denied tables (rule table.denied); query other tables.",
    });
    expect(decide('SELECT id, total FROM order_totals', { ...rules, denied_tables: ['public.orders'] })).toMatchObject({ action: 'refuse', rule: 'table.denied' });
    expect(decide('SELECT id, total FROM order_totals', { ...rules, denied_tables: ['public.orders'], allowed_tables: ['public.order_totals'] })).toMatchObject({ action: 'allow' });
  });
});

it('a partition, inheritance child or partitioned table of a denied table is refused as the table is', () => {
  const rules = { ...policy({}), denied_tables: ['public.people', 'public.customers_archive'] };
  expect(decide('SELECT id FROM people_a', rules)).toMatchObject({
    action: 'refuse', rule: 'table.denied', tablesBlocked: ['public.people_a'],
    reason: "public.people_a shows rows of public.people, which is on this credential's denied tables, as its partition or inheritance child, or its partitioned table (rule table.denied); query other tables.",
  });
  expect(decide('SELECT id FROM customers_old', rules)).toMatchObject({ action: 'refuse', rule: 'table.denied' });
  expect(decide('SELECT id FROM customers', rules)).toMatchObject({ action: 'allow' });
  expect(decide('SELECT id FROM people', { ...rules, denied_tables: ['public.people_b'] })).toMatchObject({ action: 'refuse', rule: 'table.denied' });
  expect(decide('SELECT id FROM people_a', { ...rules, denied_tables: ['public.people_b'] })).toMatchObject({ action: 'allow' });
});
