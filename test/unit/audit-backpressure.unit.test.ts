import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AuditBackPressure, heavyCredentials, initialBackPressure, nextBackPressure, nextHeld, nextRates, type BackPressureState } from '../../proxy/audit-backpressure.js';
import type { ConsumerBacklog } from '../../src/bus/port.js';

const LIMITS = { highMs: 1_000, lowMs: 500, stallMs: 1_000, allMs: 2_000, maxHoldMs: 5_000, lightPerSecond: 50 };

/** A sample: the oldest unacknowledged message's age (ms), messages pending, acknowledged so far. */
type Sample = readonly [oldestAgeMs: number, pending: number, acknowledged: number];

/** The states a run of samples 50 ms apart goes through. */
function run(samples: readonly (Sample | undefined)[]): BackPressureState[] {
  const states: BackPressureState[] = [];
  let state = initialBackPressure(0);
  samples.forEach((sample, i) => {
    state = nextBackPressure(state, sample && { oldestAgeMs: sample[0], pending: sample[1], acknowledged: sample[2] }, (i + 1) * 50, LIMITS);
    states.push(state);
  });
  return states;
}

const congested = (states: readonly BackPressureState[]): boolean[] => states.map((state) => state.congested);

describe('audit back-pressure', () => {
  it('engages once the oldest unacknowledged decision is the high mark old, and holds until it is no older than the low mark', () => {
    const samples: Sample[] = [[200, 3, 1], [999, 9, 2], [1_000, 9, 3], [1_400, 12, 4], [501, 6, 5], [500, 6, 6], [900, 8, 7], [999, 9, 8], [1_000, 9, 9]];
    expect(congested(run(samples))).toEqual([false, false, true, true, true, false, false, false, true]);
  });

  it('counts age, not messages: many pending messages of recent decisions exert none', () => {
    expect(congested(run([[300, 500, 1], [400, 5_000, 2]]))).toEqual([false, false]);
  });

  it('exerts none while the consumer acknowledges nothing for the stall time, and again once it does', () => {
    // Acknowledged stuck at 5 from the 2nd sample: the 21st sample (1,000 ms later) lets go; an acknowledgement re-engages.
    const samples: Sample[] = [[2_000, 40, 4], ...Array.from({ length: 21 }, (): Sample => [2_000, 41, 5]), [2_000, 41, 6]];
    const states = congested(run(samples));
    expect(states.slice(0, 20).every(Boolean)).toBe(true);
    expect(states[21]).toBe(false);
    expect(states[22]).toBe(true);
  });

  it('exerts none without a consumer, or when its backlog cannot be read', () => {
    expect(congested(run([[2_000, 40, 1], undefined, [2_000, 40, 1]]))).toEqual([true, false, true]);
    expect(congested(run([undefined, undefined]))).toEqual([false, false]);
  });

  it('never holds while the oldest is no older than the low mark, and engages only at the high mark', () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.tuple(fc.nat(3_000), fc.nat(100), fc.nat(5)), { nil: undefined }), { maxLength: 200 }), (raw) => {
        // Acknowledged counts only grow, as every bus reports them.
        let acknowledged = 0;
        const samples = raw.map((sample): Sample | undefined => sample && [sample[0], sample[1], (acknowledged += sample[2])]);
        const states = run(samples);
        states.forEach((state, i) => {
          const sample = samples[i];
          if (sample === undefined || sample[0] <= LIMITS.lowMs) expect(state.congested).toBe(false);
          if (state.congested && !(states[i - 1]?.congested ?? false)) expect(sample![0]).toBeGreaterThanOrEqual(LIMITS.highMs);
        });
      }),
    );
  });

  it('holds everyone once the oldest reaches allMs within a hold, until the hold ends', () => {
    const samples: Sample[] = [[1_000, 9, 1], [1_999, 9, 2], [2_000, 9, 3], [600, 5, 4], [500, 4, 5], [1_000, 9, 6]];
    expect(run(samples).map((state) => [state.congested, state.everyone])).toEqual([
      [true, false],
      [true, false],
      [true, true],
      [true, true],
      [false, false],
      [true, false],
    ]);
  });

  it('holds everyone once a hold lasted maxHoldMs, so the held get their turn once ingest drained', () => {
    // 100 samples 50 ms apart at 1.5 s: the 100th is 5 s after the hold began.
    const states = run(Array.from({ length: 101 }, (_, i): Sample => [1_500, 9, i + 1]));
    expect(states.findIndex((state) => state.everyone)).toBe(100);
    expect(states.every((state) => state.congested)).toBe(true);
  });
});

describe('whose clients the back-pressure holds', () => {
  it('holds a flooder alone among light agents', () => {
    expect(heavyCredentials(new Map([['flooder', 9_000], ['steady', 10], ['idle', 0.5]]), 50)).toEqual(['flooder']);
  });

  it('holds agents at like rates together, and none under the floor', () => {
    expect(heavyCredentials(new Map([['a', 4_000], ['b', 4_000], ['c', 10]]), 50)).toEqual(['a', 'b']);
    // Three equal rates whose sum rounds above three times each.
    const rate = 858.8227924392806;
    expect((rate + rate + rate) / 3).toBeGreaterThan(rate);
    expect(heavyCredentials(new Map([['a', rate], ['b', rate], ['c', rate]]), 50)).toEqual(['a', 'b', 'c']);
    expect(heavyCredentials(new Map([['a', 40], ['b', 30]]), 50)).toEqual([]);
    expect(heavyCredentials(new Map(), 50)).toEqual([]);
  });

  it('holds the busiest credential above the floor, and never one below the mean or the floor', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), fc.double({ min: 0, max: 1e5, noNaN: true })), fc.double({ min: 0, max: 1e3, noNaN: true }), (raw, floor) => {
        const rates = new Map(Object.entries(raw));
        const held = heavyCredentials(rates, floor);
        const positive = [...rates.values()].filter((rate) => rate > 0);
        const mean = positive.reduce((sum, rate) => sum + rate, 0) / positive.length;
        for (const credentialId of held) expect(rates.get(credentialId)! >= mean * (1 - 1e-9) && rates.get(credentialId)! >= floor).toBe(true);
        const busiest = Math.max(0, ...positive);
        if (busiest > 0 && busiest >= floor) expect(held).toContain([...rates].find(([, rate]) => rate === busiest)![0]);
      }),
    );
  });

  it('keeps the held within a hold, each counted at the rate it was held at, and lets all go when it ends', () => {
    const rates = new Map([['flooder', 5_000], ...Array.from({ length: 10 }, (_, i): [string, number] => [`moderate${i}`, 60])]);
    const held = nextHeld(new Map(), rates, true, false, 50);
    expect([...held.keys()]).toEqual(['flooder']);
    // Held, the flooder's rate falls to nothing; measured at that, the mean (55) would let the ten moderate agents join.
    const later = new Map([...rates, ['flooder', 0]]);
    expect(heavyCredentials(later, 50)).toHaveLength(10);
    expect(nextHeld(held, later, true, false, 50)).toBe(held);
    // A new flooder joins; the hold's end lets every one go.
    const joined = nextHeld(held, new Map([...later, ['second', 9_000]]), true, false, 50);
    expect([...joined.keys()]).toEqual(['flooder', 'second']);
    expect(nextHeld(joined, later, false, false, 50).size).toBe(0);
    // Everyone held: every key at or above the floor joins, an address's refused logins among them.
    const everyone = nextHeld(joined, new Map([...later, ['address:203.0.113.9', 400], ['address:198.51.100.1', 3]]), true, true, 50);
    expect(everyone.has('address:203.0.113.9')).toBe(true);
    expect(everyone.has('address:198.51.100.1')).toBe(false);
  });

  it('rates a credential by its decisions a second over about the last second, and forgets one gone quiet', () => {
    let rates = new Map<string, number>();
    // 10 decisions every 50 ms for 5 s: 200 a second.
    for (let i = 0; i < 100; i++) rates = nextRates(rates, new Map([['a', 10]]), 50);
    expect(rates.get('a')).toBeGreaterThan(198);
    expect(rates.get('a')).toBeLessThanOrEqual(200);
    // 10 decisions over a measured 100 ms are 100 a second, not 200.
    let slow = new Map<string, number>();
    for (let i = 0; i < 100; i++) slow = nextRates(slow, new Map([['a', 10]]), 100);
    expect(slow.get('a')).toBeCloseTo(100, 0);
    // A second of nothing keeps about a third; a minute forgets it.
    for (let i = 0; i < 20; i++) rates = nextRates(rates, new Map(), 50);
    expect(rates.get('a')).toBeGreaterThan(60);
    expect(rates.get('a')).toBeLessThan(80);
    for (let i = 0; i < 1_200; i++) rates = nextRates(rates, new Map(), 50);
    expect(rates.has('a')).toBe(false);
  });
});

/** A backlog whose oldest decision is `age` ms old, acknowledging one more message at each ask (a consumer making progress). */
function scripted(age: () => number): { backlog: () => Promise<ConsumerBacklog>; asked: () => number } {
  let acknowledged = 0;
  return { backlog: async () => ({ pending: age() > 0 ? 10 : 0, acknowledged: ++acknowledged, oldestAgeMs: age() }), asked: () => acknowledged };
}

describe('the back-pressure sampler', () => {
  it('holds the flooder and not a light agent, tells its observer, and lets waiting callers go when the hold ends or it stops', async () => {
    let age = 0;
    const backlog = scripted(() => age);
    const changes: string[] = [];
    const sampler = new AuditBackPressure(backlog.backlog, { changed: (change, held) => changes.push(`${change}:${held.credentials.join(',')}:${held.everyone}`) }, LIMITS, 5);
    sampler.start();
    try {
      const flood = setInterval(() => {
        for (let i = 0; i < 50; i++) sampler.used('flooder');
        sampler.used('light');
      }, 5);
      await new Promise((resolve) => setTimeout(resolve, 100));
      age = 1_200;
      await expect.poll(() => sampler.holds('flooder'), { timeout: 2_000, interval: 5 }).toBe(true);
      clearInterval(flood);
      expect(sampler.holds('light')).toBe(false);
      expect(sampler.holds(undefined)).toBe(false);
      let cleared = false;
      const waiting = sampler.clear('flooder').then(() => (cleared = true));
      await sampler.clear('light');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(cleared).toBe(false);
      age = 2_000;
      await expect.poll(() => sampler.holds('light'), { timeout: 2_000, interval: 5 }).toBe(true);
      age = 400;
      await waiting;
      expect(sampler.holds('flooder')).toBe(false);
      expect(changes).toEqual(['engaged:flooder:false', 'widened:flooder:true', 'released::false']);
      age = 1_200;
      sampler.used('flooder');
      await expect.poll(() => sampler.holds('flooder'), { timeout: 2_000, interval: 5 }).toBe(true);
      const stopped = sampler.clear('flooder');
      sampler.stop();
      await stopped;
    } finally {
      sampler.stop();
    }
  });

  it('lets a hold go when the backlog cannot be read within the stall time', async () => {
    let hang = false;
    let acknowledged = 0;
    const sampler = new AuditBackPressure(() => (hang ? new Promise<ConsumerBacklog>(() => undefined) : Promise.resolve({ pending: 9, acknowledged: ++acknowledged, oldestAgeMs: 2_500 })), {}, { ...LIMITS, stallMs: 100 }, 5);
    sampler.start();
    try {
      sampler.used('agt_a');
      await expect.poll(() => sampler.holds('agt_a'), { timeout: 1_000, interval: 5 }).toBe(true);
      hang = true;
      await expect.poll(() => sampler.holds('agt_a'), { timeout: 1_000, interval: 5 }).toBe(false);
    } finally {
      sampler.stop();
    }
  });

  it('an idle sampler asked whether a credential is held samples first', async () => {
    const backlog = scripted(() => 2_500);
    const sampler = new AuditBackPressure(backlog.backlog, {}, LIMITS, 60_000);
    sampler.start();
    let cleared = false;
    const waiting = sampler.clear('agt_a').then(() => (cleared = true));
    await expect.poll(() => backlog.asked(), { timeout: 1_000, interval: 5 }).toBe(1);
    expect(sampler.holds('agt_a')).toBe(true);
    expect(cleared).toBe(false);
    sampler.stop();
    await waiting;
  });

  it('asks no backlog while nothing is made, and asks again once a decision is', async () => {
    let asked = 0;
    // Sampled only when woken: the interval is longer than the test.
    const sampler = new AuditBackPressure(async () => {
      asked += 1;
      return { pending: 0, acknowledged: 0, oldestAgeMs: 0 };
    }, {}, undefined, 60_000);
    sampler.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(asked).toBe(0);
      sampler.used('agt_a');
      await expect.poll(() => asked, { timeout: 1_000, interval: 5 }).toBeGreaterThan(0);
    } finally {
      sampler.stop();
    }
  });
});
