import { describe, expect, it } from 'vitest';
import type { ConsumerBacklog } from '../../src/bus/port.js';
import { IngestProgress } from '../../src/enroll/ingest-progress.js';

describe('what the control plane tells enrolled proxies of its ingest', () => {
  it('tells every asker that ingest progresses while it acknowledged something within the stall time, and a stall after it', () => {
    const progress = new IngestProgress(async () => undefined, 1_000);
    const behind = (acknowledged: number): ConsumerBacklog => ({ pending: 40, acknowledged, oldestAgeMs: 1_549 });
    // Two proxies ask in turn; ingest acknowledges every 100 ms: each sees progress, neither takes it from the other.
    const told = [0, 25, 100, 125, 200, 225].map((at) => progress.told(behind(1 + Math.floor(at / 100)), at));
    expect(told.every((answer) => answer.progressing)).toBe(true);
    expect(told[0]).toEqual({ behind_ms: 1_500, pending: true, progressing: true });
    // Nothing acknowledged for a second: a stall, whoever asks.
    expect(progress.told(behind(3), 1_150).progressing).toBe(true);
    expect(progress.told(behind(3), 1_250).progressing).toBe(false);
    // Nothing waiting is never a stall; no consumer says so.
    expect(progress.told({ pending: 0, acknowledged: 3, oldestAgeMs: 0 }, 5_000)).toEqual({ behind_ms: 0, pending: false, progressing: true });
    expect(progress.told(undefined, 5_000)).toEqual({ behind_ms: null, pending: false, progressing: true });
  });

  it('reads the backlog once for the askers within the reuse time, and does not keep a failed read', async () => {
    let reads = 0;
    let failing = true;
    const progress = new IngestProgress(async () => {
      reads += 1;
      if (failing) throw new Error('bus down');
      return { pending: 1, acknowledged: reads, oldestAgeMs: 120 };
    }, 1_000, 50);
    await expect(progress.answer(0)).rejects.toThrow('bus down');
    failing = false;
    expect(await progress.answer(10)).toEqual({ behind_ms: 100, pending: true, progressing: true });
    await progress.answer(40);
    expect(reads).toBe(2);
    await progress.answer(70);
    expect(reads).toBe(3);
  });
});
