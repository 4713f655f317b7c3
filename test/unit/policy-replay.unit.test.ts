import { describe, expect, it } from 'vitest';
import { changed, ReplayTally, skipReason, type RecordedStatement } from '../../proxy/policy/replay.js';

const o = (event: string, decision_rule = '') => ({ event, decision_rule });

describe('changed', () => {
  it('compares what the trail recorded with what the candidate decides', () => {
    expect(changed(o('query'), o('query'))).toBe(false);
    expect(changed(o('query'), o('masked', 'masked_columns.masked'))).toBe(true);
    expect(changed(o('masked', 'masked_columns.masked'), o('masked', 'masked_columns.masked'))).toBe(false);
    expect(changed(o('query'), o('blocked', 'read_only.write'))).toBe(true);
    expect(changed(o('blocked', 'read_only.write'), o('blocked', 'read_only.write'))).toBe(false);
    expect(changed(o('blocked', 'read_only.write'), o('blocked', 'statement_kind.denied'))).toBe(true);
    expect(changed(o('canary_tripped', 'honeytoken.table'), o('blocked', 'allowed_tables.not_allowed'))).toBe(true);
  });

  it('takes what happened while a statement ran as an allow: a cut result, a write rolled back past its cap, a rehearsal, a timeout', () => {
    for (const ran of [o('truncated', 'max_rows.truncated'), o('truncated', 'max_rows.rows'), o('blocked', 'write_cap.exceeded')]) {
      expect(changed(ran, o('query'))).toBe(false);
      expect(changed(ran, o('masked', 'masked_columns.masked'))).toBe(false);
      expect(changed(ran, o('blocked', 'read_only.write'))).toBe(true);
    }
    expect(changed(o('query', 'write_mode.rolled_back'), o('query'))).toBe(false);
    expect(changed(o('query', 'statement_timeout'), o('query'))).toBe(false);
  });
});

describe('skipReason', () => {
  it('skips outcomes of the moment and abridged texts', () => {
    expect(skipReason({ event: 'budget_exhausted', decision_rule: 'budget.queries_per_day', sql: 'SELECT 1' })).toBe('budget');
    expect(skipReason({ event: 'blocked', decision_rule: 'catalog.unavailable', sql: 'SELECT 1' })).toBe('upstream');
    expect(skipReason({ event: 'blocked', decision_rule: 'upstream.unreachable', sql: 'SELECT 1' })).toBe('upstream');
    expect(skipReason({ event: 'blocked', decision_rule: 'region.peer_unreachable', sql: 'SELECT 1' })).toBe('upstream');
    expect(skipReason({ event: 'query', decision_rule: '', sql: `SELECT 1 /* pgward: written from its parse tree, without comments or layout; 5000 bytes as sent; sha256 of the whole text: ${'a'.repeat(64)} */` })).toBe('abridged');
    expect(skipReason({ event: 'query', decision_rule: '', sql: 'SELECT 1 /* pgward: a comment of the agent */' })).toBeUndefined();
  });
});

it('tallies by old and new outcome, changed groups first, three examples each', () => {
  const tally = new ReplayTally();
  const statement = (seq: number, event: string, rule = ''): RecordedStatement => ({ seq, id: `e${seq}`, ts: '', credential_id: 'c', session_id: 's', source: 'wire', sql: `SELECT ${seq}`, event, decision_rule: rule });
  for (let seq = 1; seq <= 5; seq += 1) tally.add(statement(seq, 'query'), o('query'));
  tally.add(statement(6, 'query'), o('blocked', 'table.denied'));
  tally.skip('abridged');
  const groups = tally.sorted();
  expect(groups.map((g) => [g.changed, g.count, g.examples.map((e) => e.seq)])).toEqual([[true, 1, [6]], [false, 5, [1, 2, 3]]]);
  expect([tally.changedCount, tally.unchangedCount, tally.skipped.abridged]).toEqual([1, 5, 1]);
});
