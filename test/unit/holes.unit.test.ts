import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HoleTracker, missingRuns } from '../../src/ingest/holes.js';

const project = 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa';

describe('sequence holes', () => {
  it('opens a hole on a jump and reports it only after the grace period', () => {
    const tracker = new HoleTracker(1000);
    tracker.saw('p', 1, 1n, project, 0);
    tracker.saw('p', 1, 5n, project, 0);
    expect(tracker.due(999)).toEqual([]);
    expect(tracker.due(1000)).toEqual([{ proxyId: 'p', bootEpoch: 1, from: 2n, to: 4n, projectId: project }]);
    expect(tracker.due(5000)).toEqual([]);
  });

  it('closes the parts of a hole that late records fill', () => {
    const tracker = new HoleTracker(10);
    tracker.saw('p', 1, 1n, project, 0);
    tracker.saw('p', 1, 6n, project, 0);
    tracker.saw('p', 1, 3n, project, 0);
    tracker.saw('p', 1, 2n, project, 0);
    expect(tracker.due(10).map((h) => [h.from, h.to])).toEqual([[4n, 5n]]);
  });

  it('lets the proxy’s own gap marker explain a hole, before or after it opens', () => {
    const tracker = new HoleTracker(10);
    tracker.saw('p', 1, 1n, project, 0);
    tracker.saw('p', 1, 4n, project, 0);
    tracker.explain('p', 1, 2n, 3n);
    tracker.explain('p', 1, 5n, 9n);
    tracker.saw('p', 1, 10n, project, 0);
    expect(tracker.due(100)).toEqual([]);
  });

  it('keeps proxies and boot epochs apart, and starts a sequence at the first record seen', () => {
    const tracker = new HoleTracker(0);
    tracker.saw('p', 1, 7n, project, 0);
    tracker.saw('p', 2, 1n, project, 0);
    tracker.saw('q', 1, 100n, project, 0);
    tracker.saw('p', 1, 8n, project, 0);
    expect(tracker.due(0)).toEqual([]);
  });

  it('splits a range into the maximal runs a set of present numbers lacks (property)', () => {
    expect(missingRuns({ from: 6n, to: 12n }, new Set([6n, 7n, 9n, 12n]))).toEqual([{ from: 8n, to: 8n }, { from: 10n, to: 11n }]);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 0, max: 40 }), fc.array(fc.integer({ min: 0, max: 45 })), (start, length, offsets) => {
        const range = { from: BigInt(start), to: BigInt(start + length) };
        const present = new Set(offsets.map((offset) => BigInt(start + offset)));
        const runs = missingRuns(range, present);
        const covered = runs.flatMap((run) => Array.from({ length: Number(run.to - run.from) + 1 }, (_, i) => run.from + BigInt(i)));
        const missing = Array.from({ length: length + 1 }, (_, i) => BigInt(start + i)).filter((seq) => !present.has(seq));
        expect(covered).toEqual(missing);
        // Maximal: two runs never touch.
        runs.slice(1).forEach((run, i) => expect(run.from > runs[i]!.to + 1n).toBe(true));
      }),
    );
  });
});
