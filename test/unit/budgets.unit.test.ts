import { describe, expect, it } from 'vitest';
import { BUDGET_REFRESH_MS, Budgets, type SpentSource } from '../../proxy/budgets.js';
import type { BudgetScope } from '../../queries/budget-usage.js';

const policy = (queries: number, bytes: string) => ({ name: 'p', queries_per_day: queries, bytes_per_month: bytes });
const credential: BudgetScope = { kind: 'credential', id: 'cred_1' };

function clock(start: string): { now: () => number; set: (iso: string) => void } {
  let at = Date.parse(start);
  return { now: () => at, set: (iso) => void (at = Date.parse(iso)) };
}

/** A statement admitted, then ended having sent `bytes`: as the wire and MCP count it. */
function ran(budgets: Budgets, scopes: readonly BudgetScope[], bytes: number): void {
  budgets.admit(scopes);
  budgets.spent(scopes, bytes);
}

describe('Budgets', () => {
  it('adds what the trail spent this period to what the proxy counts, and refuses at the limit with the reset time', async () => {
    const time = clock('2026-03-31T23:00:00Z');
    const reads: [string, string][] = [];
    const source: SpentSource = async (_scope, day, month) => (reads.push([day.toISOString(), month.toISOString()]), { queries: 2, bytes: 100n });
    const budgets = new Budgets(source, () => undefined, time.now);
    await budgets.prepare(credential);
    expect(reads).toEqual([['2026-03-31T00:00:00.000Z', '2026-03-01T00:00:00.000Z']]);
    expect(budgets.refusal('cred_1', { policy: policy(3, '0') })).toBeUndefined();
    ran(budgets, [credential], 10);
    expect(budgets.refusal('cred_1', { policy: policy(3, '0') })).toEqual({
      rule: 'budget.queries_per_day',
      reason: 'the daily budget of 3 statements set by this credential’s policy “p” is spent (rule budget.queries_per_day); it resets at 2026-04-01T00:00:00.000Z',
    });
    expect(budgets.refusal('cred_1', { policy: policy(0, '110') })?.rule).toBe('budget.bytes_per_month');
    expect(budgets.refusal('cred_1', { policy: policy(0, '111') })).toBeUndefined();

    time.set('2026-04-01T00:00:01Z');
    expect(budgets.refusal('cred_1', { policy: policy(3, '0') })?.rule).toBe('budget.unknown');
    await budgets.prepare(credential);
    expect(reads.at(-1)).toEqual(['2026-04-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z']);
    expect(budgets.refusal('cred_1', { policy: policy(3, '0') })).toBeUndefined();
  });

  it('refuses while the trail cannot be read, and tries again after a pause', async () => {
    const time = clock('2026-05-10T12:00:00Z');
    let failing = true;
    const errors: unknown[] = [];
    const budgets = new Budgets(async () => {
      if (failing) throw new Error('read model down');
      return { queries: 0, bytes: 0n };
    }, (error) => errors.push(error), time.now);
    await budgets.prepare(credential);
    expect(errors).toHaveLength(1);
    expect(budgets.refusal('cred_1', { policy: policy(5, '0') })?.rule).toBe('budget.unknown');
    failing = false;
    time.set('2026-05-10T12:00:06Z');
    expect(budgets.refusal('cred_1', { policy: policy(5, '0') })?.rule).toBe('budget.unknown');
    await new Promise((resolve) => setImmediate(resolve));
    expect(budgets.refusal('cred_1', { policy: policy(5, '0') })).toBeUndefined();
  });

  it('counts an organization’s plan limit across its credentials', async () => {
    const budgets = new Budgets(async () => ({ queries: 0, bytes: 0n }), () => undefined, clock('2026-05-10T12:00:00Z').now);
    const org: BudgetScope = { kind: 'org', id: 'org_1' };
    const limits = { policy: policy(0, '0'), org: { id: 'org_1', plan: 'free', terms: { queriesPerDay: 2, bytesPerMonth: 0n, overagePer1kQueries: 0, overagePerGb: 0 } } };
    await budgets.prepare(org);
    ran(budgets, [{ kind: 'credential', id: 'cred_1' }, org], 1);
    ran(budgets, [{ kind: 'credential', id: 'cred_2' }, org], 1);
    expect(budgets.refusal('cred_3', limits)?.reason).toContain('the organization’s free plan');
    expect(budgets.refusal('cred_3', limits)?.rule).toBe('budget.plan.queries_per_day');
  });

  it('enforces a plan’s limit only where the plan prices no overage beyond it (a hard cap)', async () => {
    const budgets = new Budgets(async () => ({ queries: 0, bytes: 0n }), () => undefined, clock('2026-05-10T12:00:00Z').now);
    const org: BudgetScope = { kind: 'org', id: 'org_1' };
    await budgets.prepare(org);
    ran(budgets, [{ kind: 'credential', id: 'cred_1' }, org], 10);
    ran(budgets, [{ kind: 'credential', id: 'cred_1' }, org], 10);
    const terms = { queriesPerDay: 2, bytesPerMonth: 5n, overagePer1kQueries: 0.05, overagePerGb: 0.09 };
    const limits = (changes: Partial<typeof terms>) => ({ policy: policy(0, '0'), org: { id: 'org_1', plan: 'pro', terms: { ...terms, ...changes } } });
    expect(budgets.refusal('cred_1', limits({}))).toBeUndefined();
    expect(budgets.refusal('cred_1', limits({ overagePer1kQueries: 0 }))?.rule).toBe('budget.plan.queries_per_day');
    expect(budgets.refusal('cred_1', limits({ overagePerGb: 0 }))?.rule).toBe('budget.plan.bytes_per_month');
  });

  it('counts a statement against the daily budget as it is admitted, and its bytes when it ends', async () => {
    const budgets = new Budgets(async () => ({ queries: 0, bytes: 0n }), () => undefined, clock('2026-05-10T12:00:00Z').now);
    await budgets.prepare(credential);
    budgets.admit([credential]);
    budgets.admit([credential]);
    expect(budgets.spentBy(credential)).toEqual({ queries: 2, bytes: 0 });
    expect(budgets.refusal('cred_1', { policy: policy(2, '0') })?.rule).toBe('budget.queries_per_day');
    budgets.spent([credential], 70);
    expect(budgets.spentBy(credential)).toEqual({ queries: 2, bytes: 70 });
  });

  it('reads the trail again every BUDGET_REFRESH_MS while statements are checked: another process’s spending counts within that bound, and its own is never forgotten', async () => {
    const time = clock('2026-06-01T08:00:00Z');
    let trail = 0;
    const budgets = new Budgets(async () => ({ queries: trail, bytes: 0n }), () => undefined, time.now);
    await budgets.prepare(credential);
    const limits = { policy: policy(5, '0') };
    budgets.admit([credential]);
    budgets.admit([credential]);
    // Another process ran two statements; this one does not know before its next read.
    trail = 2;
    time.set('2026-06-01T08:00:01Z');
    expect(budgets.refusal('cred_1', limits)).toBeUndefined();
    expect(budgets.spentBy(credential)).toEqual({ queries: 2, bytes: 0 });
    time.set(new Date(Date.parse('2026-06-01T08:00:00Z') + BUDGET_REFRESH_MS).toISOString());
    // The check that finds the figures stale starts a read and is answered from what is known.
    expect(budgets.refusal('cred_1', limits)).toBeUndefined();
    await new Promise((resolve) => setImmediate(resolve));
    // The trail lags behind this process's own two: it holds only the other's two, so the figure is not lowered.
    expect(budgets.spentBy(credential)).toEqual({ queries: 2, bytes: 0 });
    trail = 4 + 1;
    time.set(new Date(Date.parse('2026-06-01T08:00:00Z') + 2 * BUDGET_REFRESH_MS).toISOString());
    budgets.refusal('cred_1', limits);
    await new Promise((resolve) => setImmediate(resolve));
    expect(budgets.refusal('cred_1', limits)?.rule).toBe('budget.queries_per_day');
  });
});
