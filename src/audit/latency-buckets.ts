/**
 * Log-linear latency buckets for the usage rollups (docs/audit.md, "Percentiles"): a latency of v
 * microseconds keeps its 7 most significant bits. Below 128 µs every value is its own bucket;
 * above, a bucket spans [floor, floor + 2^shift) with 2^shift ≤ floor / 64, so the bucket floor is
 * below any value in it by less than 1/64 of that value.
 */
import type { LatencyPercentiles } from './usage.js';

const BITS = 7;
const SUB = 1 << (BITS - 1);

const LOW_WORD = 2 ** 32;

/** The significant bits of a non-negative safe integer (0 for 0), without writing it in base 2. */
function bitLength(n: number): number {
  if (n < LOW_WORD) return 32 - Math.clz32(n);
  return 64 - Math.clz32(Math.floor(n / LOW_WORD));
}

/** The bucket of a latency (a non-negative safe integer of microseconds); buckets order as their latencies. */
export function latencyBucket(us: number): number {
  const shift = Math.max(0, bitLength(us) - BITS);
  return shift * SUB + Math.floor(us / 2 ** shift);
}

/** The smallest latency of a bucket: what a percentile that falls in it reports. */
export function bucketFloor(bucket: number): number {
  if (bucket < 2 * SUB) return bucket;
  const shift = Math.floor(bucket / SUB) - 1;
  return (bucket - shift * SUB) * 2 ** shift;
}

/**
 * Counts one latency of `bucket` into `counts`, a histogram held densely (the count of bucket n at
 * index n; zeros up to the highest bucket counted): how the rollups store a histogram in one row.
 */
export function countBucket(counts: number[], bucket: number): void {
  while (counts.length <= bucket) counts.push(0);
  counts[bucket]! += 1;
}

/**
 * How many buckets a stored histogram row holds: bucket n is at index n mod 64 of row floor(n / 64),
 * and from 64 µs on a row is one octave of latencies (its buckets share one width). A day's
 * histogram spans 10–15 rows of 512 bytes, of which a batch updates the few its latencies fell in.
 * One array of every bucket (7 KB under load) was compressed by TOAST at each update: 7.4 ms an
 * update, against 1.0–1.3 ms for all 13 rows of the same counts (docs/benchmarks.md, session 28).
 * Stored rows depend on it (and so on BITS): changing either needs a migration of the read models.
 */
export const OCTAVE_BUCKETS = SUB;

/** A row of a stored histogram: its octave and the counts of that octave's OCTAVE_BUCKETS buckets. */
export interface OctaveRow {
  octave: number;
  buckets: number[];
}

/** The rows of a dense histogram (countBucket's) holding any count, each of OCTAVE_BUCKETS counts, in octave order. */
export function octavesOf(counts: readonly number[]): OctaveRow[] {
  const rows: OctaveRow[] = [];
  for (let start = 0; start < counts.length; start += OCTAVE_BUCKETS) {
    const buckets = Array.from({ length: OCTAVE_BUCKETS }, (_, i) => counts[start + i] ?? 0);
    if (buckets.some((count) => count > 0)) rows.push({ octave: start / OCTAVE_BUCKETS, buckets });
  }
  return rows;
}

/** latencyBucket as a SQL expression over the bigint expression `us` (exact integer arithmetic, no floating log). */
export function latencyBucketSql(us: string): string {
  const shift = `(65 - position('1' in (${us})::bit(64)::text) - ${BITS})`;
  return `(case when (${us}) < ${2 * SUB} then (${us}) else ${shift} * ${SUB} + ((${us}) >> ${shift}) end)`;
}

/** Nearest-rank p50, p95, p99 (rank ⌈p·n⌉, as percentile_disc) of a histogram of bucket → count, as bucket floors. */
export function histogramPercentiles(histogram: ReadonlyMap<number, number>): LatencyPercentiles | undefined {
  const buckets = [...histogram].filter(([, count]) => count > 0).sort(([a], [b]) => a - b);
  const total = buckets.reduce((sum, [, count]) => sum + count, 0);
  if (total === 0) return undefined;
  const at = (p: number): number => {
    const rank = Math.max(1, Math.ceil(p * total));
    let seen = 0;
    for (const [bucket, count] of buckets) {
      seen += count;
      if (seen >= rank) return bucketFloor(bucket);
    }
    return bucketFloor(buckets.at(-1)![0]);
  };
  return [at(0.5), at(0.95), at(0.99)];
}
