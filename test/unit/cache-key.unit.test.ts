/**
 * The result cache's key never crosses what a policy shows: over random policies (allowlists,
 * masks, row filters, some naming the session's credential) and random credentials, two lookups
 * of one statement get one key only when the gateway runs the same text and shows the same
 * columns the same way. The policies share one id and revision, so it is their content, not their
 * name, that the key tells apart.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { uncacheable } from '../../proxy/cache/cacheable.js';
import { lookupKey } from '../../proxy/cache/session-cache.js';
import { upstreamOf } from '../../proxy/cache/key.js';
import { decideStatement, sessionValuesOf, type StatementDecision } from '../../proxy/policy/hook.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { CORPUS_HASH_KEY } from '../security/corpus.js';
import { handCatalog } from '../support/catalog.js';

beforeAll(loadParser);

const catalog = handCatalog({ 'public.customers': ['id', 'email'], 'public.orders': ['id', 'customer', 'total'] });

type Allowed = Extract<StatementDecision, { action: 'allow' }>;

const STATEMENTS = [
  'select id, email from customers order by id',
  'select * from customers where id = 3',
  'select o.id, o.customer, c.email from orders o join customers c on c.id = o.id',
  'select count(*) from orders',
  'select customer, sum(total) from orders group by customer',
  'select upper(email) as e from customers',
  'select id from orders where customer = $1',
];

const MASKABLE = ['public.customers.email', 'public.orders.customer', 'public.orders.total'];
const ORDER_FILTERS = ['total > 100', 'id % 2 = 0', 'customer = pgward.credential_id()', "customer <> 'c1'"];
const CUSTOMER_FILTERS = ['id < 5', 'email <> pgward.credential_id()'];
const optional = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined });

const policyArb = fc.record({
  allowed_tables: fc.constantFrom(['public.*'], ['public.customers', 'public.orders'], ['public.orders'], ['public.customers']),
  masked_columns: fc.dictionary(fc.constantFrom(...MASKABLE), fc.constantFrom('redact', 'hash', 'partial', 'null')),
  row_filters: fc.record({ orders: optional(fc.constantFrom(...ORDER_FILTERS)), customers: optional(fc.constantFrom(...CUSTOMER_FILTERS)) }).map(({ orders, customers }) => ({
    ...(orders === undefined ? {} : { 'public.orders': orders }),
    ...(customers === undefined ? {} : { 'public.customers': customers }),
  })),
});

function policyRow(content: { allowed_tables: readonly string[]; masked_columns: Record<string, string>; row_filters: Record<string, string> }, revision = 1): PolicyRow {
  return {
    policy_id: 'pol_same', project_id: 'prj_1', revision, status: 'active', read_only: true, allow_catalog: false, max_rows: null, honeytokens: [],
    statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'off', max_affected_rows: null, write_mode: 'normal', ...content,
  } as unknown as PolicyRow;
}

function decided(sql: string, policy: PolicyRow, credentialId: string): Allowed | undefined {
  const credential = { credential_id: credentialId, project_id: 'prj_1' } as CredentialRow;
  const decision = decideStatement(sql, { credential, policy, protocol: 'simple', honeytokens: { canariesOf: () => [], tripped: () => undefined }, catalog, hashKey: CORPUS_HASH_KEY, sessionValues: sessionValuesOf(credential) });
  return decision.action === 'allow' && !uncacheable(sql, decision, { inTransaction: false, pinned: false }) ? decision : undefined;
}

function keyOf(decision: Allowed, policy: PolicyRow, credentialId: string): string {
  return lookupKey({ decision, policy, databaseId: 'db_1', upstream: 'up_1', catalogVersion: 'v1', sessionValues: sessionValuesOf({ credential_id: credentialId, project_id: 'prj_1' }), protocol: 'simple' });
}

describe('the result cache key', () => {
  it('differs whenever the rewritten statement or the shown columns differ, over random policies and credentials', () => {
    let compared = 0;
    fc.assert(
      fc.property(fc.constantFrom(...STATEMENTS), policyArb, policyArb, fc.constantFrom('c1', 'c2'), fc.constantFrom('c1', 'c2'), (sql, a, b, first, second) => {
        const [policyA, policyB] = [policyRow(a), policyRow(b)];
        const [decisionA, decisionB] = [decided(sql, policyA, first), decided(sql, policyB, second)];
        fc.pre(decisionA !== undefined && decisionB !== undefined);
        compared++;
        const shownDiffers = decisionA.sql !== decisionB.sql || JSON.stringify(decisionA.maskedColumns) !== JSON.stringify(decisionB.maskedColumns) || JSON.stringify(decisionA.rowFiltered) !== JSON.stringify(decisionB.rowFiltered);
        const sameKey = keyOf(decisionA, policyA, first) === keyOf(decisionB, policyB, second);
        if (shownDiffers) expect(sameKey).toBe(false);
        // Equal keys only for equal runs: the upstream gives both the same rows.
        if (sameKey) expect(decisionA.sql).toBe(decisionB.sql);
      }),
      { numRuns: 100 },
    );
    // Runs where either lookup is refused or uncacheable are skipped and replaced, so every run compares two keys.
    expect(compared).toBe(100);
  });

  it('is one key for one policy, credential and statement, so the cache serves repeats', () => {
    const policy = policyRow({ allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'partial' }, row_filters: {} });
    const decision = decided('select id, email from customers order by id', policy, 'c1')!;
    expect(keyOf(decision, policy, 'c1')).toBe(keyOf(decided('select id, email from customers order by id', policy, 'c1')!, policy, 'c1'));
    // Without a filter naming the session, two credentials of one policy share entries.
    expect(keyOf(decision, policy, 'c1')).toBe(keyOf(decision, policy, 'c2'));
  });

  it('separates policy revisions, and credentials whose row filters name them', () => {
    const content = { allowed_tables: ['public.orders'], masked_columns: {}, row_filters: { 'public.orders': 'customer = pgward.credential_id()' } };
    const [one, two] = [policyRow(content, 1), policyRow(content, 2)];
    const sql = 'select count(*) from orders';
    const decisionOne = decided(sql, one, 'c1')!;
    expect(keyOf(decisionOne, one, 'c1')).not.toBe(keyOf(decided(sql, two, 'c1')!, two, 'c1'));
    expect(keyOf(decisionOne, one, 'c1')).not.toBe(keyOf(decided(sql, one, 'c2')!, one, 'c2'));
    // Even were the rewrite to hold no trace of the credential, the key holds its session values.
    expect(keyOf(decisionOne, one, 'c1')).not.toBe(keyOf(decisionOne, one, 'c2'));
  });

  it('keys the extended protocol’s parameters, their formats and types, and the result formats', () => {
    const policy = policyRow({ allowed_tables: ['public.orders'], masked_columns: {}, row_filters: {} });
    const decision = decided('select id from orders where customer = $1', policy, 'c1')!;
    const base = { decision, policy, databaseId: 'db_1', upstream: 'up_1', catalogVersion: 'v1', sessionValues: undefined, protocol: 'extended' as const };
    const wire = { paramTypes: [25], paramFormats: [0], params: [Buffer.from('c1')], resultFormats: [0] };
    const keys = [
      lookupKey({ ...base, wire }),
      lookupKey({ ...base, wire: { ...wire, params: [Buffer.from('c2')] } }),
      lookupKey({ ...base, wire: { ...wire, params: [null] } }),
      lookupKey({ ...base, wire: { ...wire, paramFormats: [1] } }),
      lookupKey({ ...base, wire: { ...wire, paramTypes: [0] } }),
      lookupKey({ ...base, wire: { ...wire, resultFormats: [1] } }),
      lookupKey({ ...base, protocol: 'simple' }),
      lookupKey({ ...base, wire, databaseId: 'db_2' }),
      // The same database re-pointed at another server or database (PATCH host, port, name, username).
      lookupKey({ ...base, wire, upstream: upstreamOf({ host: '10.0.0.2', port: 5432, name: 'shop', username: 'app' }) }),
      lookupKey({ ...base, wire, upstream: upstreamOf({ host: '10.0.0.2', port: 5432, name: 'shop_staging', username: 'app' }) }),
      lookupKey({ ...base, wire, catalogVersion: 'v2' }),
      // Where one part ends and the next begins is never ambiguous.
      lookupKey({ ...base, wire: { ...wire, params: [Buffer.from('ab'), Buffer.from('c')] } }),
      lookupKey({ ...base, wire: { ...wire, params: [Buffer.from('a'), Buffer.from('bc')] } }),
      lookupKey({ ...base, wire: { ...wire, params: [Buffer.from('n')] } }),
      lookupKey({ ...base, wire: { ...wire, paramTypes: [2, 5] } }),
      lookupKey({ ...base, wire, databaseId: 'db_1pol_1' }),
      lookupKey({ ...base, wire, databaseId: 'db', policy: { ...policy, policy_id: `1${policy.policy_id}` } }),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('holds the session’s context as a number given once: equal only for equal parts, whatever order sessions look up in', () => {
    const policy = policyRow({ allowed_tables: ['public.orders'], masked_columns: {}, row_filters: {} });
    const decision = decided('select id from orders where customer = $1', policy, 'c1')!;
    const context = fc.record({
      databaseId: fc.constantFrom('db_1', 'db_2'),
      upstream: fc.constantFrom('up_1', 'up_2'),
      catalogVersion: fc.constantFrom('v1', 'v2'),
      protocol: fc.constantFrom('simple' as const, 'extended' as const),
      revision: fc.constantFrom(1, 2),
      credential: fc.constantFrom(undefined, 'c1', 'c2'),
      param: fc.constantFrom('a', 'b'),
    });
    fc.assert(
      fc.property(fc.array(context, { minLength: 2, maxLength: 30 }), (lookups) => {
        const seen = new Map<string, string>();
        for (const c of lookups) {
          const parts = JSON.stringify(c);
          const key = lookupKey({
            decision,
            policy: { ...policy, revision: c.revision, row_filters: { 'public.orders': 'customer = pgward.credential_id()' } },
            databaseId: c.databaseId,
            upstream: c.upstream,
            catalogVersion: c.catalogVersion,
            sessionValues: c.credential === undefined ? undefined : sessionValuesOf({ credential_id: c.credential, project_id: 'prj_1' }),
            protocol: c.protocol,
            wire: { params: [Buffer.from(c.param)] },
          });
          const known = seen.get(key);
          if (known !== undefined) expect(known).toBe(parts);
          seen.set(key, parts);
        }
        const distinct = new Set(lookups.map((c) => JSON.stringify(c))).size;
        expect(seen.size).toBe(distinct);
      }),
      { numRuns: 300 },
    );
    // The number stands for the database, its upstream, the policy and the catalog: they are not spelled out in every key.
    const key = lookupKey({ decision, policy, databaseId: `db_${'x'.repeat(200)}`, upstream: 'up_1', catalogVersion: 'v1', sessionValues: undefined, protocol: 'extended', wire: { params: [Buffer.from('a')] } });
    expect(key).not.toContain('x'.repeat(200));
  });

  it('never gives a forgotten context’s number to another: a context seen again after many others keys anew', () => {
    const policy = policyRow({ allowed_tables: ['public.orders'], masked_columns: {}, row_filters: {} });
    const decision = decided('select count(*) from orders', policy, 'c1')!;
    const keyIn = (databaseId: string) => lookupKey({ decision, policy, databaseId, upstream: 'up_1', catalogVersion: 'v1', sessionValues: undefined, protocol: 'simple' });
    const first = keyIn('db_first');
    const others = new Set<string>();
    for (let index = 0; index < 10_050; index++) others.add(keyIn(`db_${index}`));
    expect(others.size).toBe(10_050);
    const again = keyIn('db_first');
    expect(others.has(again)).toBe(false);
    expect(others.has(first)).toBe(false);
    expect(keyIn('db_first')).toBe(again);
  });
});

