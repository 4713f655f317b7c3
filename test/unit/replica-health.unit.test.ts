import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { observe, UNCHECKED, type HealthThresholds, type Probe, type ReplicaHealth } from '../../proxy/replica-health.js';

const thresholds: HealthThresholds = { failuresToEject: 3, successesToRestore: 2, maxLagMs: 1_000 };
const good: Probe = { ok: true, inRecovery: true, lagMs: 10 };
const down: Probe = { ok: false, error: 'connect ECONNREFUSED' };
const behind: Probe = { ok: true, inRecovery: true, lagMs: 5_000 };
const promoted: Probe = { ok: true, inRecovery: false, lagMs: 0 };

const run = (probes: readonly Probe[], from: ReplicaHealth = UNCHECKED, limits = thresholds): ReplicaHealth => probes.reduce((state, probe) => observe(state, probe, limits), from);

describe('replica health', () => {
  it('starts out of rotation and joins after successesToRestore good probes in a row', () => {
    expect(UNCHECKED.healthy).toBe(false);
    expect(run([good])).toMatchObject({ healthy: false, successes: 1, reason: '1 of 2 good probes to rejoin' });
    expect(run([good, good])).toEqual({ healthy: true, failures: 0, successes: 2, lagMs: 10, reason: '' });
    expect(run([good, down, good]).healthy).toBe(false);
  });

  it('leaves after failuresToEject unreachable probes in a row, not before', () => {
    const joined = run([good, good]);
    expect(run([down, down], joined)).toMatchObject({ healthy: true, failures: 2 });
    expect(run([down, down, down], joined)).toEqual({ healthy: false, failures: 3, successes: 0, lagMs: 10, reason: 'connect ECONNREFUSED' });
    expect(run([down, down, good, down, down], joined).healthy).toBe(true);
  });

  it('leaves at once when it lags over maxLagMs, is promoted, or its lag is unknown', () => {
    const joined = run([good, good]);
    expect(run([behind], joined)).toMatchObject({ healthy: false, lagMs: 5_000, reason: 'replay lag 5000 ms is over 1000 ms' });
    expect(run([promoted], joined)).toMatchObject({ healthy: false, reason: expect.stringMatching(/^not in recovery/) });
    expect(run([{ ok: true, inRecovery: true, lagMs: null }], joined)).toMatchObject({ healthy: false, reason: expect.stringMatching(/lag is unknown/) });
    expect(run([{ ok: true, inRecovery: true, lagMs: 1_000 }], joined).healthy).toBe(true);
  });

  it('rejoins after successesToRestore good probes once out', () => {
    const out = run([good, good, behind]);
    expect(run([good], out).healthy).toBe(false);
    expect(run([good, good], out).healthy).toBe(true);
  });

  const probe = fc.oneof(
    fc.constant<Probe>(down),
    fc.record({ ok: fc.constant(true as const), inRecovery: fc.boolean(), lagMs: fc.option(fc.integer({ min: 0, max: 3_000 }), { nil: null }) }),
  );
  const limits = fc.record({ failuresToEject: fc.integer({ min: 1, max: 5 }), successesToRestore: fc.integer({ min: 1, max: 5 }), maxLagMs: fc.integer({ min: 0, max: 2_000 }) });
  const isGood = (p: Probe, l: HealthThresholds): boolean => p.ok && p.inRecovery && p.lagMs !== null && p.lagMs <= l.maxLagMs;

  it('property: in rotation exactly when the probes since it last left hold successesToRestore good ones in a row, and no stale one or failuresToEject failures in a row since', () => {
    fc.assert(
      fc.property(fc.array(probe, { maxLength: 40 }), limits, (probes, l) => {
        // A reference model: replay with explicit membership.
        let healthy = false;
        let goodRun = 0;
        let badRun = 0;
        for (const p of probes) {
          if (isGood(p, l)) {
            goodRun += 1;
            badRun = 0;
            if (goodRun >= l.successesToRestore) healthy = true;
          } else {
            badRun += 1;
            goodRun = 0;
            if (p.ok || badRun >= l.failuresToEject) healthy = false;
          }
        }
        const state = run(probes, UNCHECKED, l);
        expect(state.healthy).toBe(healthy);
        expect(state.successes).toBe(goodRun);
        expect(state.failures).toBe(badRun);
        expect(state.reason === '').toBe(state.healthy);
      }),
    );
  });

  it('property: a stale probe always takes it out, and a good probe never does', () => {
    fc.assert(
      fc.property(fc.array(probe, { maxLength: 20 }), probe, limits, (before, last, l) => {
        const prior = run(before, UNCHECKED, l);
        const after = observe(prior, last, l);
        if (last.ok && !isGood(last, l)) expect(after.healthy).toBe(false);
        if (isGood(last, l) && prior.healthy) expect(after.healthy).toBe(true);
        if (!prior.healthy && !isGood(last, l)) expect(after.healthy).toBe(false);
      }),
    );
  });
});
