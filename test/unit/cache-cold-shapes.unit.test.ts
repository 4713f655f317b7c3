import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { ResultCaches } from '../../proxy/cache/caches.js';
import { COLD_BELOW, ColdShapes, SAMPLE_EVERY, WARM_FROM, WINDOW } from '../../proxy/cache/cold-shapes.js';
import { lookupKey, SessionCache, type CacheLookup } from '../../proxy/cache/session-cache.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { allowedUnder, openPolicy } from '../support/allowed-decision.js';

beforeAll(loadParser);

/** Draws that never pick a statement of a cold shape for a lookup. */
const NEVER_DRAWN = (): number => 0.5;

function lookups(shapes: ColdShapes<object>, shape: object, count: number, hit: (index: number) => boolean = () => false): void {
  for (let index = 0; index < count; index++) shapes.looked(shape, hit(index));
}

describe('cold statement shapes', () => {
  it('go cold after a window of lookups with fewer hits than one in COLD_BELOW, and only then', () => {
    const shapes = new ColdShapes<object>(NEVER_DRAWN);
    const shape = {};
    expect(shapes.skips(shape)).toBe(false);
    lookups(shapes, shape, WINDOW - 1);
    expect(shapes.skips(shape)).toBe(false);
    lookups(shapes, shape, 1);
    expect(shapes.skips(shape)).toBe(true);
    expect(shapes.skips({})).toBe(false);
  });

  it('stay warm with one hit in COLD_BELOW lookups, and go cold with one hit fewer', () => {
    const warm = new ColdShapes<object>(NEVER_DRAWN);
    const shape = {};
    const hitsNeeded = WINDOW / COLD_BELOW;
    lookups(warm, shape, WINDOW, (index) => index < hitsNeeded);
    expect(warm.skips(shape)).toBe(false);
    lookups(warm, shape, WINDOW, (index) => index < hitsNeeded - 1);
    expect(warm.skips(shape)).toBe(true);
  });

  it('look up a cold shape’s statements one in SAMPLE_EVERY, at random', () => {
    let draw = 0;
    const draws = [0.01, 0.5, 0.99, 1 / SAMPLE_EVERY - 1e-9, 1 / SAMPLE_EVERY];
    const shapes = new ColdShapes<object>(() => draws[draw++ % draws.length]!);
    const shape = {};
    lookups(shapes, shape, WINDOW);
    expect(draws.map(() => shapes.skips(shape))).toEqual([false, true, true, false, true]);
  });

  it('warm again when a cold shape’s sampled lookups hit one in WARM_FROM, and stay cold below that', () => {
    const shapes = new ColdShapes<object>(NEVER_DRAWN);
    const shape = {};
    const samples = WINDOW / SAMPLE_EVERY;
    lookups(shapes, shape, WINDOW);
    lookups(shapes, shape, samples, (index) => index < samples / WARM_FROM - 1);
    expect(shapes.skips(shape)).toBe(true);
    lookups(shapes, shape, samples, (index) => index < samples / WARM_FROM);
    expect(shapes.skips(shape)).toBe(false);
  });

  it('never turn a shape cold whose every window hits at least one in COLD_BELOW (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: WINDOW / COLD_BELOW, max: WINDOW }), { minLength: 1, maxLength: 6 }), fc.nat(), (hitsPerWindow, seed) => {
        const shapes = new ColdShapes<object>(NEVER_DRAWN);
        const shape = {};
        for (const hits of hitsPerWindow) {
          // The window's hits anywhere in it.
          const offset = seed % (WINDOW - hits + 1);
          lookups(shapes, shape, WINDOW, (index) => index >= offset && index < offset + hits);
          if (shapes.skips(shape)) return false;
        }
        return true;
      }),
      { numRuns: 200 },
    );
  });
});

const policy = openPolicy('pol_cold', { allow_catalog: true });

describe('a session’s lookups of a cold shape', () => {
  const sql = 'select abalance from pgbench_accounts where aid = $1';
  let decision: ReturnType<typeof allowedUnder>;
  beforeAll(() => void (decision = allowedUnder(policy, sql, 'extended')));

  function sessionOn(random: () => number) {
    const counts = { hit: 0, stale: 0, miss: 0, bypass: 0, skipped: 0 };
    const caches = new ResultCaches(
      () => ({ enabled: true, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 0 }),
      { lookup: (outcome) => void counts[outcome]++, skipped: () => void counts.skipped++, evicted: () => undefined, bytes: () => undefined },
      undefined,
      undefined,
      random,
    );
    const session = new SessionCache(caches);
    const lookup = (key: number, rule?: CacheLookup['rule'], protocol: CacheLookup['protocol'] = 'extended'): CacheLookup => ({
      sql,
      decision,
      databaseId: 'db_1',
      upstream: 'pg://127.0.0.1:5432/bench',
      policy,
      catalogVersion: 'v1',
      sessionValues: undefined,
      protocol,
      wire: { paramTypes: [], paramFormats: [0], params: [Buffer.from(String(key))], resultFormats: [0] },
      inTransaction: false,
      pinned: false,
      rule,
    });
    return { caches, session, counts, lookup, store: caches.storeOf('db_1')! };
  }

  it('skips the lookup of reads whose keys never repeat once a window missed, counting each as a bypass and a cold skip', () => {
    const { session, counts, lookup, store } = sessionOn(NEVER_DRAWN);
    for (let key = 0; key < WINDOW; key++) expect(session.plan(lookup(key)).outcome).toBe('miss');
    expect(store.size).toBe(0);
    for (let key = WINDOW; key < WINDOW + 100; key++) expect(session.plan(lookup(key))).toEqual({ outcome: 'bypass', cold: true });
    expect(counts).toEqual({ hit: 0, stale: 0, miss: WINDOW, bypass: 100, skipped: 100 });
  });

  it('keeps looking up a shape that hits, the simple protocol’s, and one whose rule of its own caches it', () => {
    const { session, counts, lookup, store } = sessionOn(NEVER_DRAWN);
    expect(session.plan(lookup(1)).outcome).toBe('miss');
    store.store(lookupKey(lookup(1)), { reply: Buffer.from('r'), rows: 1, tables: ['public.pgbench_accounts'] }, store.generation);
    for (let index = 0; index < 3 * WINDOW; index++) session.plan(lookup(index % COLD_BELOW === 0 ? 1 : 1_000 + index));
    expect(counts.skipped).toBe(0);
    expect(counts.hit).toBe(3 * (WINDOW / COLD_BELOW));

    // The simple protocol's shapes are not tallied (a text with literals is a decision of its own each time).
    const simple = sessionOn(NEVER_DRAWN);
    for (let key = 0; key < 3 * WINDOW; key++) expect(simple.session.plan(lookup(key, undefined, 'simple')).outcome).toBe('miss');
    expect(simple.counts.skipped).toBe(0);

    const ruled = sessionOn(NEVER_DRAWN);
    const rule = { bypass: false, timing: { ttlMs: 5_000 } } as const;
    for (let key = 0; key < 3 * WINDOW; key++) expect(ruled.session.plan(lookup(key, rule)).outcome).toBe('miss');
    expect(ruled.counts.skipped).toBe(0);
  });

  it('is one tally for every session of the database under the policy, and none for another policy’s decision on the same text', () => {
    const { caches, session, counts, lookup } = sessionOn(NEVER_DRAWN);
    for (let key = 0; key < WINDOW; key++) session.plan(lookup(key));
    const another = new SessionCache(caches);
    expect(another.plan(lookup(WINDOW))).toEqual({ outcome: 'bypass', cold: true });
    const otherPolicy = openPolicy('pol_cold_other', { allow_catalog: true });
    const theirs = { ...lookup(WINDOW + 1), decision: allowedUnder(otherPolicy, sql, 'extended'), policy: otherPolicy };
    expect(another.plan(theirs).outcome).toBe('miss');
    expect(counts.skipped).toBe(1);
  });

  it('notices a cold shape whose keys start to repeat: its drawn lookups keep results, hit, and warm it', () => {
    let drawn = false;
    const { session, counts, lookup, store } = sessionOn(() => (drawn ? 0 : 0.5));
    for (let key = 0; key < WINDOW; key++) session.plan(lookup(key));
    expect(session.plan(lookup(7)).outcome).toBe('bypass');
    drawn = true;
    const first = session.plan(lookup(7));
    expect(first.outcome).toBe('miss');
    store.store(lookupKey(lookup(7)), { reply: Buffer.from('r'), rows: 1, tables: ['public.pgbench_accounts'] }, store.generation);
    // Every drawn lookup of the repeating key now hits; a sampled window of them warms the shape.
    for (let index = 1; index < WINDOW / SAMPLE_EVERY; index++) expect(session.plan(lookup(7)).outcome).toBe('hit');
    drawn = false;
    expect(session.plan(lookup(7)).outcome).toBe('hit');
    expect(counts.skipped).toBe(1);
  });
});
