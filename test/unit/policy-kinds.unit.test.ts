import { beforeAll, describe, expect, it } from 'vitest';
import { POLICY_STATEMENT_KINDS } from '../../src/events/policies.js';
import { analyzeStatement, type AnalysisSession } from '../../proxy/policy/analyze.js';
import { decideParseFailure, decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { statementKinds } from '../../proxy/policy/kinds.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { decideSql } from '../../proxy/policy/policy.js';
import { allowedByList, type PolicyRules } from '../../proxy/policy/rules.js';
import { statementShape } from '../../proxy/policy/statements.js';

beforeAll(loadParser);

function kindsOf(sql: string): string[] {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(sql);
  return statementKinds(parsed.statements[0]!.stmt).sort();
}

function decide(sql: string, policy: PolicyRules, session: AnalysisSession = {}): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) return decideParseFailure(parsed);
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), policy, session);
}

const writer: PolicyRules = { read_only: false, allowed_tables: ['public.*', 'analytics.daily'], masked_columns: {}, allow_catalog: false, canaries: [] };

describe('statementKinds: every kind a statement runs', () => {
  it.each([
    ['SELECT 1', ['select']],
    ['DELETE FROM orders', ['delete']],
    ['WITH gone AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM gone', ['delete', 'select']],
    ['SELECT * FROM (SELECT 1) s WHERE EXISTS (WITH u AS (UPDATE orders SET total = 0 RETURNING 1) SELECT 1 FROM u)', ['select', 'update']],
    ['WITH a AS (WITH b AS (INSERT INTO orders VALUES (1) RETURNING id) SELECT id FROM b) SELECT * FROM a', ['insert', 'select']],
    ['INSERT INTO orders SELECT * FROM orders', ['insert']],
    ['INSERT INTO orders VALUES (1) ON CONFLICT (id) DO UPDATE SET total = 0', ['insert', 'update']],
    ['INSERT INTO orders VALUES (1) ON CONFLICT DO NOTHING', ['insert']],
    ['WITH w AS (INSERT INTO orders VALUES (1) ON CONFLICT (id) DO UPDATE SET total = 0 RETURNING 1) SELECT * FROM w', ['insert', 'select', 'update']],
    ['WITH d AS (DELETE FROM orders RETURNING *) INSERT INTO archive SELECT * FROM d', ['delete', 'insert']],
    ['EXPLAIN DELETE FROM orders', ['explain']],
    ['EXPLAIN (ANALYZE false) DELETE FROM orders', ['explain']],
    ['EXPLAIN ANALYZE DELETE FROM orders', ['delete', 'explain']],
    ['EXPLAIN (ANALYZE 0) DELETE FROM orders', ['delete', 'explain']],
    ['EXPLAIN (ANALYZE) WITH d AS (DELETE FROM orders RETURNING 1) SELECT 1', ['delete', 'explain', 'select']],
    ['PREPARE p AS DELETE FROM orders', ['delete', 'prepare']],
    ['EXECUTE p', ['execute']],
    ['COPY (DELETE FROM orders RETURNING id) TO STDOUT', ['copy', 'delete']],
    ['COPY orders FROM STDIN', ['copy']],
    ['DECLARE c CURSOR FOR SELECT 1', ['declare', 'select']],
    ['CREATE TABLE t AS SELECT 1', ['ddl', 'select']],
    ['SELECT 1 INTO t', ['ddl', 'select']],
    ['MERGE INTO orders o USING orders s ON o.id = s.id WHEN MATCHED THEN DELETE', ['merge']],
    ['DO $$ BEGIN DELETE FROM orders; END $$', ['do']],
    ['CALL p()', ['call']],
    ['TRUNCATE orders', ['truncate']],
    ['CREATE INDEX ON orders (id)', ['ddl']],
    ['BEGIN', ['transaction']],
  ])('%s', (sql, kinds) => {
    expect(kindsOf(sql)).toEqual(kinds);
  });

  it('the policy vocabulary is exactly the analyzer’s kinds', () => {
    const analyzer = new Set(['SelectStmt', 'InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt', 'CopyStmt', 'ExplainStmt', 'VariableSetStmt', 'VariableShowStmt', 'TransactionStmt', 'CallStmt', 'DoStmt', 'LockStmt', 'ListenStmt', 'UnlistenStmt', 'NotifyStmt', 'PrepareStmt', 'ExecuteStmt', 'DeallocateStmt', 'TruncateStmt', 'DiscardStmt', 'DeclareCursorStmt', 'FetchStmt', 'ClosePortalStmt', 'CreateStmt', 'ConstraintsSetStmt'].map((type) => statementShape(type).kind));
    expect([...analyzer].sort()).toEqual([...POLICY_STATEMENT_KINDS].sort());
  });
});

describe('statement_deny and statement_allow', () => {
  const denyDelete: PolicyRules = { ...writer, statement_deny: ['delete'] };

  it('deny refuses the kind, with 42501, the rule and the denied kinds', () => {
    expect(decide('DELETE FROM orders WHERE id = 1', { ...writer, statement_deny: ['delete', 'truncate'] })).toMatchObject({
      action: 'refuse',
      event: 'blocked',
      sqlstate: '42501',
      rule: 'statement_kind.denied',
      reason: "the statement is of kind delete, and this credential's policy denies delete statements (rule statement_kind.denied). Denied kinds: delete, truncate.",
      statementKind: 'delete',
    });
    expect(decide('UPDATE orders SET total = 0', denyDelete)).toMatchObject({ action: 'allow' });
  });

  it('deny reaches a data-modifying WITH at any depth, and EXPLAIN ANALYZE, but not a plan that runs nothing', () => {
    expect(decide('WITH x AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM x', denyDelete)).toMatchObject({
      action: 'refuse',
      rule: 'statement_kind.denied',
      reason: "the statement (of kind select) runs a statement of kind delete, in a data-modifying WITH query or as its operand, and this credential's policy denies delete statements (rule statement_kind.denied). Denied kinds: delete.",
    });
    expect(decide('EXPLAIN ANALYZE DELETE FROM orders', denyDelete)).toMatchObject({ action: 'refuse', rule: 'statement_kind.denied' });
    expect(decide('EXPLAIN DELETE FROM orders', denyDelete)).toMatchObject({ action: 'allow' });
    expect(decide('COPY (DELETE FROM orders RETURNING id) TO STDOUT', denyDelete)).toMatchObject({ action: 'refuse', rule: 'statement_kind.denied' });
  });

  it('allow narrows to the kinds it lists; each kind a statement runs must be listed', () => {
    const selectInsert: PolicyRules = { ...writer, statement_allow: ['select', 'insert'] };
    expect(decide('SELECT id FROM orders', selectInsert)).toMatchObject({ action: 'allow' });
    expect(decide('INSERT INTO orders SELECT * FROM orders', selectInsert)).toMatchObject({ action: 'allow' });
    expect(decide('UPDATE orders SET total = 0', selectInsert)).toMatchObject({
      action: 'refuse',
      rule: 'statement_kind.not_allowed',
      sqlstate: '42501',
      reason: "the statement is of kind update, and this credential's policy allows no update statements (rule statement_kind.not_allowed). Allowed kinds: select, insert.",
    });
    expect(decide('WITH u AS (UPDATE orders SET total = 0 RETURNING id) SELECT * FROM u', selectInsert)).toMatchObject({ action: 'refuse', rule: 'statement_kind.not_allowed' });
    expect(decide('EXPLAIN SELECT 1', selectInsert)).toMatchObject({ action: 'refuse', rule: 'statement_kind.not_allowed' });
    expect(decide('BEGIN', selectInsert)).toMatchObject({ action: 'refuse', rule: 'statement_kind.not_allowed' });
    expect(decide('SELECT 1', { ...writer, statement_allow: [] })).toMatchObject({ action: 'refuse', rule: 'statement_kind.not_allowed', reason: expect.stringContaining('Allowed kinds: none.') });
  });

  it('deny wins over allow', () => {
    expect(decide('DELETE FROM orders', { ...writer, statement_allow: ['delete'], statement_deny: ['delete'] })).toMatchObject({ action: 'refuse', rule: 'statement_kind.denied' });
  });

  it('allow cannot lift read_only, which refuses first', () => {
    expect(decide('DELETE FROM orders', { ...writer, read_only: true, statement_allow: ['delete'] })).toMatchObject({ action: 'refuse', rule: 'read_only.write' });
  });

  it('every statement of a query string is decided', () => {
    const verdicts = decideSql('SELECT 1; DELETE FROM orders; SELECT 2', denyDelete);
    expect(verdicts.map((v) => [v.decision.action, v.decision.rule])).toEqual([['allow', ''], ['refuse', 'statement_kind.denied'], ['allow', '']]);
  });
});

describe('denied_tables', () => {
  const denied: PolicyRules = { ...writer, denied_tables: ['public.secrets', 'audit.*'] };

  it('wins over a broad allowlist, on reads and writes, with 42501 and the rule', () => {
    expect(decide('SELECT * FROM secrets', denied)).toMatchObject({
      action: 'refuse',
      sqlstate: '42501',
      rule: 'table.denied',
      reason: "table public.secrets is on this credential's denied tables, whatever its allowed tables say (rule table.denied). Query other tables.",
      tablesBlocked: ['public.secrets'],
    });
    expect(decide('UPDATE public.secrets SET id = 1', denied)).toMatchObject({ rule: 'table.denied' });
    expect(decide('INSERT INTO orders SELECT id FROM secrets', denied)).toMatchObject({ rule: 'table.denied' });
    expect(decide('SELECT * FROM orders', denied)).toMatchObject({ action: 'allow' });
  });

  it('reaches every depth and spelling', () => {
    for (const sql of [
      'SELECT o.id FROM orders o JOIN secrets s ON s.id = o.id',
      'SELECT (SELECT count(*) FROM secrets)',
      'SELECT 1 WHERE EXISTS (SELECT 1 FROM public.secrets)',
      'WITH s AS (SELECT * FROM "public"."secrets") SELECT * FROM s',
      'SELECT * FROM orders UNION SELECT * FROM secrets',
      'SELECT * FROM orders, LATERAL (SELECT * FROM secrets) s',
      'SELECT null::secrets',
      'DELETE FROM orders USING secrets WHERE secrets.id = orders.id',
      'EXPLAIN SELECT * FROM secrets',
      'TRUNCATE secrets',
      'LOCK TABLE secrets',
      'CREATE INDEX ON secrets (id)',
      'DROP TABLE secrets',
    ]) {
      expect(decide(sql, denied), sql).toMatchObject({ action: 'refuse', rule: 'table.denied', tablesBlocked: ['public.secrets'] });
    }
  });

  it('schema.* denies the whole schema; names compare case-sensitively, as on the allowlist', () => {
    expect(decide('SELECT * FROM audit.log', { ...denied, allowed_tables: ['audit.*'] })).toMatchObject({ rule: 'table.denied', tablesBlocked: ['audit.log'] });
    expect(decide('SELECT * FROM "Secrets"', denied)).toMatchObject({ action: 'allow' });
  });

  it('an unqualified name that may resolve to a denied table on the search path is refused', () => {
    expect(decide('SELECT * FROM log', { ...denied, allowed_tables: ['audit.*', 'public.*'] }, { searchPath: ['audit', 'public'] })).toMatchObject({
      rule: 'table.denied',
      reason: expect.stringContaining('(log may resolve to audit.log or public.log on the search_path)'),
    });
  });

  it('allowedByList (list_tables, describe_table) leaves denied tables out', () => {
    expect(allowedByList(denied, { schema: 'public', name: 'secrets' })).toBe(false);
    expect(allowedByList(denied, { schema: 'public', name: 'orders' })).toBe(true);
  });
});
