import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement, type AnalysisSession } from '../../proxy/policy/analyze.js';
import { AnalysisCache } from '../../proxy/policy/cache.js';
import { decideParseFailure, decidePolicy, SCHEMA_CHANGE, type PolicyDecision } from '../../proxy/policy/decide.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { decideSql } from '../../proxy/policy/policy.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { corpus, corpusColumns, corpusPolicies, CORPUS_HASH_KEY } from '../security/corpus.js';
import { recordedRefusal } from '../../proxy/decision-record.js';
import { handCatalog } from '../support/catalog.js';

beforeAll(loadParser);

const readOnly: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.orders', 'analytics.*'],
  masked_columns: { 'public.orders.card': 'redact' },
  allow_catalog: false,
  canaries: [{ honeytoken_id: 'hnt_apikeys000000000000000000', kind: 'table', target: 'public.api_keys' }],
};
const writable: PolicyRules = { ...readOnly, read_only: false };

function decide(sql: string, policy: PolicyRules = readOnly, session: AnalysisSession = {}): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) return decideParseFailure(parsed);
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), policy, session);
}

describe('decisions', () => {
  it('allows a plain read with the facts the audit needs', () => {
    expect(decide('SELECT id FROM orders o JOIN analytics.daily d ON d.id = o.id')).toEqual({
      action: 'allow',
      event: 'query',
      rule: '',
      reason: '',
      masks: [],
      sql: 'SELECT id FROM orders o JOIN analytics.daily d ON d.id = o.id',
      statementKind: 'select',
      tablesRead: ['public.orders', 'analytics.daily'],
      tablesWritten: [],
      progress: [],
      changesSession: false,
      rowFiltered: [],
    });
  });

  it('explains a read-only refusal so the agent can fix it', () => {
    expect(decide('UPDATE orders SET total = 0')).toMatchObject({
      action: 'refuse',
      event: 'blocked',
      rule: 'read_only.write',
      sqlstate: '42501',
      reason:
        "UPDATE is not allowed: this credential's policy is read-only (rule read_only.write). Only statements that read allowed tables run: SELECT, WITH without data-modifying parts, EXPLAIN without ANALYZE, SHOW.",
      tablesWritten: ['public.orders'],
    });
  });

  it('names the table, the rule and what is allowed', () => {
    expect(decide('SELECT * FROM customers')).toMatchObject({
      rule: 'allowed_tables.not_allowed',
      reason: 'table public.customers is not in the allowed tables (public.orders, analytics.*); query only those (rule allowed_tables.not_allowed).',
      tablesBlocked: ['public.customers'],
    });
  });

  it('asks for a schema when a name may resolve to several tables', () => {
    expect(decide('SELECT 1 FROM daily', readOnly, { searchPath: ['public', 'analytics'] })).toMatchObject({
      rule: 'allowed_tables.not_allowed',
      tablesBlocked: ['public.daily'],
      reason: expect.stringContaining('daily may resolve to public.daily or analytics.daily on the search_path; schema-qualify it'),
    });
  });

  it('matches allowed tables part by part, so a dotted name cannot pass for a wildcard', () => {
    expect(decide('SELECT 1 FROM "analytics.x".t')).toMatchObject({ rule: 'allowed_tables.not_allowed' });
    expect(decide('SELECT 1 FROM analytics."x.y"')).toMatchObject({ action: 'allow' });
  });

  it('uses the SQLSTATE of each failure kind', () => {
    expect(decide('SELEC 1')).toMatchObject({ rule: 'parse.error', sqlstate: '42601' });
    expect(decide(`SELECT '${'x'.repeat(70_000)}'`)).toMatchObject({ rule: 'parse.too_large', sqlstate: '54000' });
    expect(decide('SELECT 1 FROM orders TABLESAMPLE system_rows (1)')).toMatchObject({ rule: 'parse.unsupported', sqlstate: '0A000' });
    expect(decide('SELECT pg_sleep(1)')).toMatchObject({ rule: 'read_only.function', sqlstate: '42501' });
  });

  it('trips a canary before any other rule, and answers the agent as for a table off the allowlist', () => {
    const decision = decide('SELECT * FROM api_keys');
    expect(decision).toMatchObject({
      action: 'refuse',
      event: 'blocked',
      rule: 'allowed_tables.not_allowed',
      sqlstate: '42501',
      reason: 'table public.api_keys is not in the allowed tables (public.orders, analytics.*); query only those (rule allowed_tables.not_allowed).',
      tablesBlocked: ['public.api_keys'],
      trip: { honeytokenId: 'hnt_apikeys000000000000000000', rule: 'honeytoken.table', denied: ['public.api_keys'] },
    });
    expect(decide('SELECT * FROM secrets')).toMatchObject({ reason: 'table public.secrets is not in the allowed tables (public.orders, analytics.*); query only those (rule allowed_tables.not_allowed).' });
    // What the table off the allowlist would get first, the canary gets too: here the read-only rule.
    expect(decide('DELETE FROM api_keys')).toMatchObject({ rule: 'read_only.write', trip: { rule: 'honeytoken.table' } });
    expect(decide('DELETE FROM api_keys')).toMatchObject({ rule: decide('DELETE FROM secrets').rule, reason: decide('DELETE FROM secrets').reason });
  });

  it('refuses effects by policy: read-only refuses writes, every policy refuses session changes', () => {
    expect(decide('INSERT INTO orders VALUES (1)', writable)).toMatchObject({ action: 'allow', tablesWritten: ['public.orders'] });
    expect(decide('SET ROLE admin', writable)).toMatchObject({ rule: 'statement.setting' });
    expect(decide('SELECT pg_sleep(1)', writable)).toMatchObject({ rule: 'function.not_allowed' });
  });

  it('flags schema changes under a write-capable policy before deciding them', () => {
    expect(decide('ALTER TABLE orders ADD COLUMN note text', writable)).toMatchObject({ action: 'allow', statementKind: 'ddl', progress: [SCHEMA_CHANGE] });
    expect(decide('DROP TABLE customers', writable)).toMatchObject({ action: 'refuse', progress: [SCHEMA_CHANGE] });
    expect(decide('DROP TABLE orders')).toMatchObject({ rule: 'read_only.ddl', progress: [] });
  });

  it('never writes a catalog, even with catalog access', () => {
    expect(decide('ALTER TABLE pg_catalog.pg_class ADD COLUMN x int', { ...writable, allow_catalog: true })).toMatchObject({ rule: 'allowed_tables.catalog' });
    expect(decide('SELECT relname FROM pg_class', { ...readOnly, allow_catalog: true })).toMatchObject({ action: 'allow' });
  });

  it('returns the masked rewrite and its edits', () => {
    const decision = decide('SELECT card FROM orders WHERE card IS NOT NULL');
    expect(decision).toMatchObject({
      action: 'allow',
      event: 'masked',
      rule: 'masked_columns.masked',
      sql: "SELECT '[redacted]'::text AS card FROM orders WHERE '[redacted]'::text IS NOT NULL",
      masks: [
        { column: 'public.orders.card', mode: 'redact', text: 'card' },
        { column: 'public.orders.card', mode: 'redact', text: 'card' },
      ],
    });
  });

  it('refuses a reference that could be two masked columns with different masks', () => {
    const policy = { ...readOnly, allowed_tables: ['public.*'], masked_columns: { 'public.a.x': 'hash', 'public.b.x': 'null' }, hash_key: CORPUS_HASH_KEY } as const;
    expect(decide('SELECT x FROM a, b', policy)).toMatchObject({ rule: 'masked_columns.ambiguous' });
    expect(decide('SELECT a.x FROM a, b', policy)).toMatchObject({ event: 'masked' });
  });

  it('refuses what a hash mask applies to without the project’s key, and EXPLAIN of it with the key', () => {
    const policy = { ...readOnly, allowed_tables: ['public.*'], masked_columns: { 'public.a.x': 'hash', 'public.a.y': 'redact' } } as const;
    expect(decide('SELECT a.x FROM a', policy)).toMatchObject({ action: 'refuse', rule: 'masked_columns.hash_key_unavailable', sqlstate: '58000' });
    expect(decide('SELECT a.y FROM a', policy)).toMatchObject({ action: 'allow', event: 'masked' });
    const keyed = { ...policy, hash_key: CORPUS_HASH_KEY };
    expect(decide('SELECT a.x FROM a', keyed)).toMatchObject({ action: 'allow', event: 'masked' });
    for (const sql of ['EXPLAIN SELECT a.x FROM a', 'EXPLAIN (VERBOSE) SELECT 1 FROM a WHERE x = $1', 'explain select count(*) from a group by x']) {
      expect(decide(sql, keyed)).toMatchObject({ action: 'refuse', rule: 'masked_columns.explain', sqlstate: '42501' });
    }
    expect(decide('EXPLAIN SELECT a.y FROM a', keyed)).toMatchObject({ action: 'allow' });
  });
});

describe('decideSql', () => {
  it('decides each statement of a simple query on its own', () => {
    const verdicts = decideSql('SELECT id FROM orders; DELETE FROM orders', readOnly);
    expect(verdicts.map((v) => [v.sql, v.decision.action])).toEqual([
      ['SELECT id FROM orders', 'allow'],
      ['DELETE FROM orders', 'refuse'],
    ]);
  });

  it('uses a cache when given one', () => {
    const cache = new AnalysisCache();
    decideSql('SELECT id FROM orders', readOnly, {}, cache);
    expect(decideSql('SELECT id FROM orders', readOnly, {}, cache)[0]?.decision.action).toBe('allow');
    expect(cache.size).toBe(1);
  });
});

/** The first refused statement decides a multi-statement string; otherwise masked outranks query. */
function outcome(verdicts: ReturnType<typeof decideSql>): { action: string; rule: string; event: string } {
  const decisions = verdicts.map((verdict) => verdict.decision);
  // As the audit trail records it: a tripped canary first, with its true rule and event.
  const decisive = decisions.find((d) => d.action === 'refuse' && d.trip) ?? decisions.find((d) => d.action === 'refuse') ?? decisions.find((d) => d.event === 'masked') ?? decisions[0];
  if (decisive?.action === 'refuse') return { action: decisive.action, ...recordedRefusal(decisive) };
  return decisive ? { action: decisive.action, rule: decisive.rule, event: decisive.event } : { action: 'allow', rule: '', event: 'query' };
}

describe('security corpus', () => {
  it('holds at least 200 statements, 40 of them legitimate analytics', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(200);
    expect(corpus.filter((entry) => entry.family === 'analytics' && entry.expect.action === 'allow').length).toBeGreaterThanOrEqual(40);
  });

  it.each(corpus.map((entry, index) => [index, entry.family, entry.sql.slice(0, 80).replace(/\p{Cc}/gu, ' '), entry] as const))('#%i %s: %s', (_index, _family, _sql, entry) => {
    const got = outcome(decideSql(entry.sql, corpusPolicies[entry.policy], { searchPath: entry.searchPath }));
    expect({ action: got.action, rule: got.rule }).toEqual({ action: entry.expect.action, rule: entry.expect.rule });
    if (entry.expect.event) expect(got.event).toBe(entry.expect.event);
  });

  const catalog = handCatalog(corpusColumns);
  it.each(corpus.map((entry, index) => [index, entry.family, entry.sql.slice(0, 80).replace(/\p{Cc}/gu, ' '), entry] as const))('#%i %s with the catalog: %s', (_index, _family, _sql, entry) => {
    const got = outcome(decideSql(entry.sql, corpusPolicies[entry.policy], { searchPath: entry.searchPath, catalog }));
    const expected = entry.withCatalog ?? entry.expect;
    expect({ action: got.action, rule: got.rule }).toEqual({ action: expected.action, rule: expected.rule });
    if (expected.event) expect(got.event).toBe(expected.event);
  });
});
