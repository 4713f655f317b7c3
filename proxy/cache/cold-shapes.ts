/**
 * Which statement shapes of one database's cache have stopped paying for their lookups. A lookup
 * that misses costs the proxy a key and a probe on every statement (about 6.5 µs, docs/benchmarks.md session 24),
 * and a shape whose keys never repeat, such as point reads spread over a large table, misses on
 * nearly every one. A shape whose hits fall under one in COLD_BELOW of a window of lookups goes
 * cold: its statements then run past the cache unlooked, except a random one in SAMPLE_EVERY, which
 * is looked up (and its result kept) as before, so that a shape whose keys start to repeat is
 * noticed. A cold shape whose sampled lookups hit at least one in WARM_FROM goes warm again. The
 * two thresholds differ so that a shape hovering near either does not flip at every window.
 * Skipping a lookup is always safe: the statement runs upstream, as a miss would.
 */

/** Lookups a verdict is made on: a warm shape's, or a cold shape's sampled ones. */
export const WINDOW = 1_024;
/** A warm shape whose hits were fewer than one in this many of a window's lookups goes cold. */
export const COLD_BELOW = 64;
/** A cold shape's statements: one in this many (at random) is looked up. */
export const SAMPLE_EVERY = 16;
/** A cold shape whose sampled lookups hit at least one in this many goes warm. */
export const WARM_FROM = 16;
/** A cold shape's verdict is made on this many sampled lookups (about WINDOW statements). */
const COLD_WINDOW = WINDOW / SAMPLE_EVERY;

interface Tally {
  cold: boolean;
  lookups: number;
  hits: number;
}

/** Keyed by a shape's identity (the policy's decision for its text, which every session running it shares), held weakly. */
export class ColdShapes<Shape extends object> {
  private readonly tallies = new WeakMap<Shape, Tally>();

  constructor(private readonly random: () => number = Math.random) {}

  /** Whether this statement of `shape` runs past the cache without a lookup. */
  skips(shape: Shape): boolean {
    const tally = this.tallies.get(shape);
    return tally !== undefined && tally.cold && this.random() * SAMPLE_EVERY >= 1;
  }

  /** A lookup of `shape` was made: `hit` when it answered from the cache (fresh or stale). */
  looked(shape: Shape, hit: boolean): void {
    let tally = this.tallies.get(shape);
    if (!tally) this.tallies.set(shape, (tally = { cold: false, lookups: 0, hits: 0 }));
    tally.lookups++;
    if (hit) tally.hits++;
    if (tally.lookups < (tally.cold ? COLD_WINDOW : WINDOW)) return;
    tally.cold = tally.cold ? tally.hits * WARM_FROM < tally.lookups : tally.hits * COLD_BELOW < tally.lookups;
    tally.lookups = 0;
    tally.hits = 0;
  }
}
