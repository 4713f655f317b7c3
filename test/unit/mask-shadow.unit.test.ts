import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { hashKeyOf } from '../../proxy/policy/hash-key.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { handCatalog } from '../support/catalog.js';

beforeAll(loadParser);

const policy: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.*'],
  masked_columns: { 'public.customers.email': 'hash', 'public.customers.phone': 'partial' },
  allow_catalog: false,
  canaries: [],
  hash_key: hashKeyOf(Buffer.alloc(32, 3)),
};
const catalog = handCatalog({ 'public.customers': ['id', 'email', 'phone'], 'public.orders': ['id', 'note'], 'public.guesses': ['email'] });

function decide(sql: string, withCatalog: boolean): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(parsed.reason);
  const session = withCatalog ? { catalog } : {};
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), policy, session);
}

describe('a hash mask is never computed on a value another FROM item supplies', () => {
  // Each would have hashed the agent's own guess (or another table's values) under the project's key: a keyed-hash oracle.
  const oracles = [
    "SELECT (SELECT email FROM (VALUES ('guess@example.com')) v(email)) FROM customers",
    "WITH v(email) AS (VALUES ('guess@example.com')) SELECT (SELECT email FROM v) FROM customers",
    "SELECT x.h FROM customers c, LATERAL (SELECT email AS h FROM (VALUES ('guess@example.com')) v(email)) x",
    "SELECT id FROM customers WHERE email IN (SELECT email FROM (VALUES ('guess@example.com')) v(email))",
    "SELECT (SELECT email FROM jsonb_to_record('{\"email\": \"guess@example.com\"}') AS r(email text)) FROM customers",
    "SELECT (SELECT c.email FROM (VALUES ('guess@example.com')) c(email)) FROM customers c",
    'SELECT (SELECT email FROM guesses LIMIT 1) FROM customers',
    'SELECT (SELECT customers.email FROM guesses AS customers LIMIT 1) FROM customers',
  ];
  for (const sql of oracles) {
    it(`refuses ${sql}, with the catalog and without`, () => {
      for (const withCatalog of [true, false]) {
        expect(decide(sql, withCatalog), String(withCatalog)).toMatchObject({ action: 'refuse', rule: 'masked_columns.ambiguous', sqlstate: '42501' });
      }
    });
  }

  it('says which masked column and what to do', () => {
    expect(decide(oracles[0]!, true)).toMatchObject({
      reason: 'email may denote public.customers.email, masked with hash, or a column of another FROM item as near to it, whose values the hash would then be computed on (rule masked_columns.ambiguous); qualify it with an alias no other FROM item of the statement uses.',
    });
  });

  const masked = [
    'SELECT email FROM customers',
    'SELECT c.email FROM customers c JOIN orders o ON o.id = c.id',
    'SELECT id FROM orders WHERE note IN (SELECT email FROM customers)',
    'SELECT (SELECT c.email FROM orders o LIMIT 1) FROM customers c',
    'WITH c AS (SELECT email FROM customers) SELECT email FROM c',
    "SELECT (SELECT phone FROM (VALUES ('guess')) v(phone)) FROM customers",
  ];
  for (const sql of masked) {
    it(`still masks ${sql}`, () => {
      expect(decide(sql, true)).toMatchObject({ action: 'allow', event: 'masked' });
    });
  }

  it('knows from the catalog that a joined table has no such column', () => {
    const sql = 'SELECT email FROM customers c JOIN orders o ON o.id = c.id';
    expect(decide(sql, true)).toMatchObject({ action: 'allow', event: 'masked' });
    expect(decide(sql, false)).toMatchObject({ action: 'refuse', rule: 'masked_columns.ambiguous' });
  });
});

it('a stale catalog that does not list the masked column yet still refuses the guess', () => {
  const stale = handCatalog({ 'public.customers': ['id'], 'public.orders': ['id', 'note'] });
  const parsed = parseStatements("SELECT (SELECT email FROM (VALUES ('guess@example.com')) v(email)) FROM customers");
  if (!parsed.ok) throw new Error(parsed.reason);
  expect(decidePolicy(analyzeStatement(parsed.statements[0]!, { catalog: stale }), policy, { catalog: stale })).toMatchObject({ action: 'refuse', rule: 'masked_columns.ambiguous' });
});
