import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bucketFloor, latencyBucket } from '../../src/audit/latency-buckets.js';

/** The bucket as docs/audit.md defines it: the latency's 7 most significant binary digits, written out. */
function definedBucket(us: number): number {
  const shift = Math.max(0, us.toString(2).length - 7);
  return shift * 64 + Math.floor(us / 2 ** shift);
}

const edges = [0, 1, 127, 128, 129, 255, 256, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 33 - 1, 2 ** 52, Number.MAX_SAFE_INTEGER];

describe('latency buckets', () => {
  it('keep the 7 most significant bits of any safe latency, across the 32-bit word', () => {
    for (const us of edges) expect(latencyBucket(us)).toBe(definedBucket(us));
    fc.assert(
      fc.property(fc.oneof(fc.nat(), fc.maxSafeNat(), fc.integer({ min: 2 ** 31, max: 2 ** 34 })), (us) => {
        expect(latencyBucket(us)).toBe(definedBucket(us));
        expect(bucketFloor(latencyBucket(us))).toBeLessThanOrEqual(us);
      }),
      { numRuns: 5_000 },
    );
  });
});
