import { describe, expect, it } from 'vitest';
import { HoleTracker } from '../../src/ingest/holes.js';

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
});
