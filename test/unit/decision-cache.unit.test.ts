import { describe, expect, it } from 'vitest';
import type { PolicyRow } from '../../projections/policies.js';
import { AllowedDecisions } from '../../proxy/policy/decision-cache.js';
import type { Canary } from '../../proxy/policy/rules.js';

const policy: PolicyRow = {
  policy_id: 'pol_1', project_id: 'prj_1', name: 'p', read_only: true, allowed_tables: ['public.orders'], masked_columns: {}, max_rows: null, queries_per_day: 0,
  bytes_per_month: '0', approval: { held_kinds: [], row_threshold: null, expiry_seconds: 3600 }, honeytokens: [], audit_mode: 'best_effort', allow_catalog: false, statement_timeout_ms: 30_000,
    statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'warn', row_filters: {}, max_affected_rows: null, write_mode: 'commit', version: 1, status: 'active',
  revision: 1, created_at: '', updated_at: '',
};
const canary: Canary = { honeytoken_id: 'hnt_1', kind: 'table', target: 'public.secrets' };

describe('AllowedDecisions', () => {
  it('answers for the same policy row, canaries and exact text only', () => {
    const cache = new AllowedDecisions<string>();
    cache.set(policy, [], 'select 1', 'allowed');
    expect(cache.get(policy, [], 'select 1')).toBe('allowed');
    expect(cache.get(policy, [], 'select 1 ')).toBeUndefined();
    expect(cache.get(policy, [canary], 'select 1')).toBeUndefined();
    expect(cache.get({ ...policy }, [], 'select 1')).toBeUndefined();
    cache.set(policy, [canary], 'select 1', 'with canary');
    expect(cache.get(policy, [{ ...canary }], 'select 1')).toBe('with canary');
    expect(cache.get(policy, [{ ...canary, target: 'public.other' }], 'select 1')).toBeUndefined();
  });

  it('forgets a policy row’s decisions when its revision changes in place', () => {
    const cache = new AllowedDecisions<string>();
    const row = { ...policy };
    cache.set(row, [], 'select 1', 'allowed');
    row.revision = 2;
    expect(cache.get(row, [], 'select 1')).toBeUndefined();
  });

  it('keeps at most its capacity per policy, evicting the oldest', () => {
    const cache = new AllowedDecisions<number>(3);
    for (let i = 0; i < 5; i++) cache.set(policy, [], `select ${i}`, i);
    expect([0, 1, 2, 3, 4].map((i) => cache.get(policy, [], `select ${i}`))).toEqual([undefined, undefined, 2, 3, 4]);
  });
});
