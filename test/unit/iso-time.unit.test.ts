import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoTimestamp } from '../../src/iso-time.js';

/** Whole milliseconds from year 0 to the end of year 9999, where toISOString has four year digits. */
const YEAR_0 = Date.parse('0000-01-01T00:00:00.000Z');
const END_OF_9999 = Date.parse('9999-12-31T23:59:59.999Z');
const instant = fc.oneof(fc.integer({ min: YEAR_0, max: END_OF_9999 }), fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }));

describe('isoTimestamp', () => {
  it('equals toISOString for any sequence of instants, the cached second reused or replaced', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(instant, instant.map((ms) => ms - (ms % 1000)), instant.map((ms) => ms - (ms % 1000) + 999)), { maxLength: 50 }), (instants) => {
        for (const ms of instants) expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 500 },
    );
  });

  it('pads the milliseconds within one second', () => {
    const second = Date.UTC(2026, 10, 22, 17, 52, 0);
    expect([0, 7, 42, 999].map((milli) => isoTimestamp(second + milli))).toEqual(['2026-11-22T17:52:00.000Z', '2026-11-22T17:52:00.007Z', '2026-11-22T17:52:00.042Z', '2026-11-22T17:52:00.999Z']);
  });

  it('defaults to now', () => {
    const before = Date.now();
    const stamped = Date.parse(isoTimestamp());
    expect(stamped).toBeGreaterThanOrEqual(before);
    expect(stamped).toBeLessThanOrEqual(Date.now());
  });
});
