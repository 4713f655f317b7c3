/**
 * The appends one writer of this process committed to the streams of one category, handed to a
 * subscription of exactly those streams in the same process (`pgward serve`'s pipeline worker:
 * ingest's audit appends, for the audit projection), which would otherwise read back from the
 * store the events it was just handed the bytes of.
 *
 * A batch is handed on only when the store told where the category stood before the append
 * (AppendResult.categoryBefore): the subscription takes it only when it has consumed the category
 * exactly up to there, so the batch holds its next events, whoever else appends to the category.
 * Anything else (an append of another process between, a batch dropped for room, a catch-up from
 * an older checkpoint) is read from the store as before.
 *
 * A subscription that wakes while one of the writer's appends is under way (the store's
 * notification may arrive before the append's reply) waits for that append to be handed on
 * before it reads the store.
 */
import type { AppendResult, NewEvent, RecordedEvent, SubscriptionFeed } from './port.js';

/** About three seconds of audit events at 10,000 a second; the oldest batches are dropped first. */
const DEFAULT_CAPACITY = 32_768;
/**
 * How long a subscription at the head waits for the appends under way before it reads the store:
 * bounded, since an appender may itself wait for the subscription (PreparedEntries.room).
 */
const WAIT_MS = 50;

/** A writer's side of the feeds of a category: what its appends tell them. */
export interface CommittedWriter {
  /** An append to the category is under way; `settled` follows it, whatever its outcome, after `committed`. */
  started(): void;
  settled(): void;
  /**
   * `events`, appended to `stream` in one append that committed with `result`, the first at
   * revision `firstRevision`. Positions must be dense (the PostgreSQL store's); a result without
   * categoryBefore hands nothing on.
   */
  committed(stream: string, firstRevision: number, events: readonly CarriedEvent[], result: AppendResult): void;
}

/**
 * A writer's event, with what it may carry for the readers of its process beyond what the store
 * keeps: the decision ingest encoded it from (projections/audit.ts, AuditEventPayload). A recorded
 * event keeps `decision`; nothing else the store does not keep.
 */
export type CarriedEvent = NewEvent & { readonly decision?: unknown };

/**
 * The events of an append as the store recorded them, or undefined when a reader could not place
 * them (see CommittedWriter.committed). Each written out member by member: a spread with members
 * added costs V8 some microseconds an object (docs/benchmarks.md, branch `pipecpu3`).
 */
export function recordedBatch(streamPrefix: string, stream: string, firstRevision: number, events: readonly CarriedEvent[], result: AppendResult): RecordedEvent[] | undefined {
  if (result.categoryBefore === undefined || result.duplicate || events.length === 0 || !stream.startsWith(streamPrefix)) return undefined;
  const first = result.position - BigInt(events.length - 1);
  return events.map(
    (event, i): RecordedEvent & CarriedEvent => ({
      id: event.id,
      type: event.type,
      data: event.data,
      metadata: event.metadata,
      decision: event.decision,
      stream,
      revision: firstRevision + i,
      position: first + BigInt(i),
    }),
  );
}

export class CommittedFeed implements SubscriptionFeed, CommittedWriter {
  /** Batches by the category's position before them. */
  private readonly batches = new Map<bigint, readonly RecordedEvent[]>();
  private held = 0;
  private underWay = 0;
  private waiting: (() => void)[] = [];
  private readonly wakes = new Set<(head: bigint) => void>();

  constructor(
    /** The streams of the category, as the subscription names them (e.g. `audit-`). */
    readonly streamPrefix: string,
    private readonly capacity = DEFAULT_CAPACITY,
  ) {}

  /** Events held, not taken yet. */
  get size(): number {
    return this.held;
  }

  started(): void {
    this.underWay += 1;
  }

  settled(): void {
    this.underWay -= 1;
    this.release();
  }

  committed(stream: string, firstRevision: number, events: readonly CarriedEvent[], result: AppendResult): void {
    const batch = recordedBatch(this.streamPrefix, stream, firstRevision, events, result);
    if (batch) this.hold(result.categoryBefore!, batch);
  }

  /** A batch recorded after `before`, the category's position before it (the batch is not changed: feeds of one writer share it). */
  hold(before: bigint, batch: readonly RecordedEvent[]): void {
    this.batches.set(before, batch);
    this.held += batch.length;
    for (const [position, dropped] of this.batches) {
      if (this.held <= this.capacity) break;
      this.batches.delete(position);
      this.held -= dropped.length;
    }
    this.release();
    const head = batch[batch.length - 1]!.position;
    for (const wake of this.wakes) wake(head);
  }

  /**
   * The batch that follows `position`. Missing, and none held beyond it (the subscription is at the
   * head, not catching up), it waits for the appends under way, for at most WAIT_MS: each
   * commit's notification may arrive before its append's reply.
   */
  async next(position: bigint): Promise<readonly RecordedEvent[] | undefined> {
    this.forget(position);
    const deadline = performance.now() + WAIT_MS;
    while (this.batches.size === 0 && this.underWay > 0) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
    }
    const batch = this.batches.get(position);
    if (!batch) return undefined;
    this.batches.delete(position);
    this.held -= batch.length;
    return batch;
  }

  onWake(wake: (head: bigint) => void): () => void {
    this.wakes.add(wake);
    return () => this.wakes.delete(wake);
  }

  /** Batches that begin before `position` were read from the store already (or can no longer follow). */
  private forget(position: bigint): void {
    for (const [before, batch] of this.batches) {
      if (before >= position) continue;
      this.batches.delete(before);
      this.held -= batch.length;
    }
  }

  private release(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}
