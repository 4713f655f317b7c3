/**
 * What the control plane tells enrolled proxies of its ingest (GET /v1/data-plane/audit-backlog):
 * one backlog read serves every proxy that asks within `reuseMs`, and whether ingest progresses is
 * told from time (it acknowledged something within `stallMs`, or nothing waits), the same to every
 * asker: compared with the previous ask instead, one proxy's ask would take the news of progress
 * from the next, which would see a stall and let its clients go.
 */
import type { ConsumerBacklog } from '../bus/port.js';
import type { AuditBacklogAnswer } from './wire.js';

export class IngestProgress {
  private acknowledged = -1;
  private movedAt = Number.NEGATIVE_INFINITY;
  private last: { readonly at: number; readonly answer: Promise<AuditBacklogAnswer> } | undefined;

  constructor(
    private readonly backlog: () => Promise<ConsumerBacklog | undefined>,
    private readonly stallMs = 1_000,
    private readonly reuseMs = 50,
  ) {}

  answer(nowMs: number): Promise<AuditBacklogAnswer> {
    if (this.last && nowMs - this.last.at < this.reuseMs) return this.last.answer;
    const answer = this.backlog().then((backlog) => this.told(backlog, nowMs));
    this.last = { at: nowMs, answer };
    // A failed read is not kept for the next asker.
    answer.catch(() => {
      if (this.last?.answer === answer) this.last = undefined;
    });
    return answer;
  }

  /** The answer for one backlog read at `nowMs`: the oldest's age to 100 ms, and no counts. */
  told(backlog: ConsumerBacklog | undefined, nowMs: number): AuditBacklogAnswer {
    if (!backlog) return { behind_ms: null, pending: false, progressing: true };
    if (backlog.acknowledged !== this.acknowledged) {
      this.acknowledged = backlog.acknowledged;
      this.movedAt = nowMs;
    }
    return { behind_ms: Math.round(backlog.oldestAgeMs / 100) * 100, pending: backlog.pending > 0, progressing: backlog.pending === 0 || nowMs - this.movedAt < this.stallMs };
  }
}
