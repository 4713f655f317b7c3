import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bucketFloor, countBucket, latencyBucket, OCTAVE_BUCKETS, octavesOf } from '../../src/audit/latency-buckets.js';

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

  it('are stored as rows of 64 counts, one for each octave any latency fell in, that hold every count at its bucket and no other', () => {
    const counts: number[] = [];
    for (const us of [3, 3, 70, 300, 300, 301]) countBucket(counts, latencyBucket(us));
    const zeros = Array.from({ length: OCTAVE_BUCKETS }, () => 0);
    expect(octavesOf(counts)).toEqual([
      { octave: 0, buckets: zeros.map((_, i) => (i === 3 ? 2 : 0)) },
      { octave: 1, buckets: zeros.map((_, i) => (i === 6 ? 1 : 0)) },
      { octave: 3, buckets: zeros.map((_, i) => (i === 11 ? 3 : 0)) },
    ]);
    expect(octavesOf([])).toEqual([]);
    fc.assert(
      fc.property(fc.array(fc.nat(100_000_000), { maxLength: 50 }), (latencies) => {
        const dense: number[] = [];
        for (const us of latencies) countBucket(dense, latencyBucket(us));
        const rows = octavesOf(dense);
        const back = new Map<number, number>();
        for (const { octave, buckets } of rows) {
          expect(buckets).toHaveLength(OCTAVE_BUCKETS);
          expect(buckets.some((count) => count > 0)).toBe(true);
          buckets.forEach((count, i) => count > 0 && back.set(octave * OCTAVE_BUCKETS + i, count));
        }
        expect(rows.map((row) => row.octave)).toEqual([...new Set(latencies.map((us) => Math.floor(latencyBucket(us) / OCTAVE_BUCKETS)))].sort((a, b) => a - b));
        expect(back).toEqual(new Map(dense.flatMap((count, bucket) => (count > 0 ? [[bucket, count] as const] : []))));
      }),
    );
  });
});
