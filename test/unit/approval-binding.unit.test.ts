import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextApprovalId } from '../../commands/approvals/binding.js';
import type { PolicyRow } from '../../projections/policies.js';
import { boundToEstimate } from '../../proxy/approval-hold.js';
import type { StatementDecision } from '../../proxy/policy/hook.js';
import { guardBroken, writeGuardOf, type WriteShape } from '../../proxy/policy/write-guard.js';
import { ApprovalId } from '../../src/events/fields.js';

type Allowed = Extract<StatementDecision, { action: 'allow' }>;

const counted: WriteShape = { rows: 'counted', ddl: false, returning: false };
const decisionOf = (writes: WriteShape): Allowed => ({ writes }) as Allowed;
const policyOf = (tolerance: number | undefined, maxRows: number | null = null): PolicyRow =>
  ({ read_only: false, max_affected_rows: null, write_mode: 'commit', max_rows: maxRows, approval: { held_kinds: ['update'], row_threshold: null, expiry_seconds: 60, ...(tolerance === undefined ? {} : { row_tolerance_percent: tolerance }) } }) as unknown as PolicyRow;
const seen = (rows: number | null, method: 'trial' | 'plan' | null = 'trial') => ({ estimated_rows: rows === null ? null : String(rows), estimate_method: method });

function boundOf(decision: Allowed): { min: number; max: number } | undefined {
  const writes = decision.writes;
  return writes.rows === 'counted' && writes.bound ? { min: writes.bound.min, max: writes.bound.max } : undefined;
}

describe('an approved write bound to the rows its reviewer saw', () => {
  it('is bound exactly by default, within the rule’s percent otherwise (rounded down)', () => {
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(2), policyOf(undefined)))).toEqual({ min: 2, max: 2 });
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(2), policyOf(50)))).toEqual({ min: 1, max: 3 });
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(25), policyOf(10)))).toEqual({ min: 23, max: 27 });
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(0), policyOf(100)))).toEqual({ min: 0, max: 0 });
  });

  it('is bound to a planner estimate from none up to ten times it (at least one row expected), whatever the tolerance', () => {
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(5, 'plan'), policyOf(0)))).toEqual({ min: 0, max: 50 });
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(5, 'plan'), policyOf(100)))).toEqual({ min: 0, max: 50 });
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(0, 'plan'), policyOf(0)))).toEqual({ min: 0, max: 10 });
    const guard = writeGuardOf({ read_only: false, max_affected_rows: null, write_mode: 'commit' }, boundToEstimate(decisionOf(counted), seen(5, 'plan'), policyOf(0)).writes)!;
    expect(guardBroken(guard, 0)).toBeUndefined();
    expect(guardBroken(guard, 50)).toBeUndefined();
    expect(guardBroken(guard, 51)).toEqual({
      rule: 'approval.count_drift',
      sqlstate: '55000',
      reason: 'its reviewer approved it on the planner’s estimate of 5 rows (EXPLAIN; a trial run took too long), and an approval on a planner’s estimate lets it affect at most 10 times that, so it had to affect 0 to 50 rows; it affected 51 rows, so it was rolled back and nothing changed (rule approval.count_drift)',
    });
  });

  it('is not bound to none, to a write no tag counts, nor where max_rows must cut RETURNING rows', () => {
    expect(boundOf(boundToEstimate(decisionOf({ ...counted, returning: true }), seen(5, 'plan'), policyOf(0, 10)))).toBeUndefined();
    expect(boundOf(boundToEstimate(decisionOf(counted), seen(null, null), policyOf(0)))).toBeUndefined();
    expect(boundOf(boundToEstimate(decisionOf({ rows: 'uncounted', ddl: false, what: 'TRUNCATE' }), seen(5), policyOf(0)))).toBeUndefined();
    expect(boundOf(boundToEstimate(decisionOf({ ...counted, returning: true }), seen(5), policyOf(0, 10)))).toBeUndefined();
    expect(boundOf(boundToEstimate(decisionOf({ ...counted, returning: true }), seen(5), policyOf(0, null)))).toEqual({ min: 5, max: 5 });
  });

  it('guards the write even under a policy with no cap, and refuses it outside the bounds, naming both counts; the cap still applies', () => {
    const bound = boundToEstimate(decisionOf(counted), seen(2), policyOf(0)).writes;
    const guard = writeGuardOf({ read_only: false, max_affected_rows: null, write_mode: 'commit' }, bound)!;
    expect(guard).toMatchObject({ cap: undefined, rollback: false, bound: { min: 2, max: 2, rule: 'approval.count_drift' } });
    expect(guardBroken(guard, 2)).toBeUndefined();
    expect(guardBroken(guard, 3)).toMatchObject({ rule: 'approval.count_drift', sqlstate: '55000', reason: expect.stringMatching(/affecting 2 rows.*it affected 3 rows, so it was rolled back/) });
    expect(guardBroken(guard, 1)).toMatchObject({ rule: 'approval.count_drift' });
    expect(guardBroken(guard, undefined)).toMatchObject({ rule: 'approval.count_drift', reason: expect.stringContaining('its rows could not be counted') });
    const capped = writeGuardOf({ read_only: false, max_affected_rows: 1, write_mode: 'commit' }, bound)!;
    expect(guardBroken(capped, 2)).toMatchObject({ rule: 'write_cap.exceeded', sqlstate: '54000' });
  });
});

describe('the ids of a binding’s requests', () => {
  it('are derived: the same binding and predecessor give the same id, anything else another; each a valid apr_ id', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-f]{64}$/), fc.option(fc.stringMatching(/^apr_[a-z2-7]{26}$/), { nil: null }), fc.stringMatching(/^[0-9a-f]{64}$/), (binding, previous, other) => {
        const id = nextApprovalId(binding, previous);
        expect(ApprovalId.safeParse(id).success).toBe(true);
        expect(nextApprovalId(binding, previous)).toBe(id);
        expect(nextApprovalId(binding, id)).not.toBe(id);
        if (other !== binding) expect(nextApprovalId(other, previous)).not.toBe(id);
      }),
    );
  });
});
