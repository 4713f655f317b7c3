import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF, failuresAfterExit, restartDelay } from '../../src/workers/backoff.js';

describe('worker restart backoff', () => {
  it('doubles from the initial delay up to the cap', () => {
    expect([1, 2, 3, 4, 8, 9, 100].map((n) => restartDelay(DEFAULT_BACKOFF, n))).toEqual([250, 500, 1_000, 2_000, 30_000, 30_000, 30_000]);
  });

  it('never waits less than the initial delay nor more than the cap, and never less after another failure', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), (failures) => {
        const delay = restartDelay(DEFAULT_BACKOFF, failures);
        expect(delay).toBeGreaterThanOrEqual(DEFAULT_BACKOFF.initialMs);
        expect(delay).toBeLessThanOrEqual(DEFAULT_BACKOFF.maxMs);
        expect(restartDelay(DEFAULT_BACKOFF, failures + 1)).toBeGreaterThanOrEqual(delay);
      }),
    );
  });

  it('starts the series again after a worker ran long enough, and counts on after a short run', () => {
    expect(failuresAfterExit(DEFAULT_BACKOFF, 5, DEFAULT_BACKOFF.resetAfterMs)).toBe(1);
    expect(failuresAfterExit(DEFAULT_BACKOFF, 5, DEFAULT_BACKOFF.resetAfterMs - 1)).toBe(6);
    expect(failuresAfterExit(DEFAULT_BACKOFF, 0, 10)).toBe(1);
  });

  it('refuses a failure count below 1', () => {
    expect(() => restartDelay(DEFAULT_BACKOFF, 0)).toThrow(RangeError);
  });
});
