import { StoreError, type AppendResult, type EventStore, type NewEvent } from '../store/port.js';

/** Events per append at most: larger appends hold the store's append lock longer without adding throughput. */
export const MAX_EVENTS_PER_APPEND = 1_000;

/** The events of one append, exactly as they landed, and its result. */
export interface Landed<E extends NewEvent> {
  readonly events: readonly E[];
  readonly result: AppendResult;
}

interface Waiter<E extends NewEvent> {
  readonly event: E;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Groups appends into one append per stream, so ingest commits many records per transaction: those
 * that arrive together, and those that arrive while the stream's previous append is in flight (one
 * at a time per stream, so under load the batches grow instead of the appends queueing on the
 * store's lock). Each caller's promise settles when the batch holding its event committed.
 * A batch that mixes a redelivered event with new ones is refused by the store as a whole
 * (EVENT_ID_CONFLICT); it is then appended one event at a time, each idempotent on its own.
 * The events may carry more than the store keeps (E), which `committed` gets back.
 */
export class AppendBatcher<E extends NewEvent = NewEvent> {
  private readonly pending = new Map<string, Waiter<E>[]>();
  private readonly appending = new Set<string>();
  /** When each stream's last append started (performance.now()), and the timers of streams waiting out their linger. */
  private readonly started = new Map<string, number>();
  private readonly lingering = new Map<string, NodeJS.Timeout>();
  private scheduled = false;

  constructor(
    private readonly store: EventStore,
    /**
     * Called after a stream's batch committed, with the stream's size before and after, and the
     * events when they landed at exactly the revisions between (not after a one-by-one retry),
     * with the result of their one append.
     */
    private readonly committed: (stream: string, sizeBefore: number, sizeAfter: number, landed?: Landed<E>) => Promise<void>,
    /**
     * A stream's appends start at least this far apart, unless a full append waits: under load an
     * append then carries what arrived in that time, and the store's cost per transaction (its
     * round trip, lock, commit and wake-ups, and the projection's batch that follows each) is
     * shared by many events. An append to a stream idle for that long starts at once.
     */
    private readonly lingerMs = 0,
    /** Told when each append starts and when it settled (after `committed`), whatever its outcome. */
    private readonly underWay?: { started(): void; settled(): void },
  ) {}

  append(stream: string, event: E): Promise<void> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(stream) ?? [];
      waiters.push({ event, resolve, reject });
      this.pending.set(stream, waiters);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    for (const stream of this.pending.keys()) if (!this.appending.has(stream)) this.start(stream);
  }

  /**
   * Appends the stream's oldest pending events, at most MAX_EVENTS_PER_APPEND, then the rest and
   * what arrived meanwhile. Each append settles its own callers as it commits, so a backlog drains
   * (and is acknowledged, and handed on) append by append rather than all at once at its end.
   */
  private start(stream: string): void {
    const waiters = this.pending.get(stream);
    if (!waiters) return;
    const wait = (this.started.get(stream) ?? -Infinity) + this.lingerMs - performance.now();
    if (wait > 0 && waiters.length < MAX_EVENTS_PER_APPEND) {
      if (!this.lingering.has(stream)) {
        const timer = setTimeout(() => {
          this.lingering.delete(stream);
          if (!this.appending.has(stream)) this.start(stream);
        }, wait);
        this.lingering.set(stream, timer);
      }
      return;
    }
    clearTimeout(this.lingering.get(stream));
    this.lingering.delete(stream);
    this.started.set(stream, performance.now());
    const taken = waiters.length > MAX_EVENTS_PER_APPEND ? waiters.splice(0, MAX_EVENTS_PER_APPEND) : waiters;
    if (taken === waiters) this.pending.delete(stream);
    this.appending.add(stream);
    void this.flushStream(stream, taken).finally(() => {
      this.appending.delete(stream);
      this.start(stream);
    });
  }

  private async flushStream(stream: string, waiters: Waiter<E>[]): Promise<void> {
    // A record delivered twice into one batch is one event.
    const events = [...new Map(waiters.map((w) => [w.event.id, w.event])).values()];
    this.underWay?.started();
    try {
      await this.appendChunk(stream, events);
      for (const waiter of waiters) waiter.resolve();
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
    } finally {
      this.underWay?.settled();
    }
  }

  private async appendChunk(stream: string, events: E[]): Promise<void> {
    const result = await this.store.append(stream, events, 'any').then(
      (appended) => ({ ...appended, added: events.length, landed: { events, result: appended } as Landed<E> | undefined }),
      async (error: unknown) => {
        if (!(error instanceof StoreError && error.code === 'EVENT_ID_CONFLICT')) throw error;
        // One at a time, each idempotent on its own. The stream's size comes from the last event that
        // was added: a duplicate reports the revision it had, which may be far below the stream's end.
        let added = 0;
        let last: AppendResult | undefined;
        for (const event of events) {
          const appended = await this.store.append(stream, [event], 'any');
          if (appended.duplicate) continue;
          added += 1;
          last = appended;
        }
        return last ? { ...last, added, landed: undefined } : { nextExpectedRevision: -1, position: -1n, duplicate: true, added: 0, landed: undefined };
      },
    );
    const after = result.nextExpectedRevision + 1;
    if (!result.duplicate) await this.committed(stream, after - result.added, after, result.landed);
  }
}
