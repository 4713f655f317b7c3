import { StoreError, type AppendResult, type EventStore, type NewEvent } from '../store/port.js';

/** Events per append at most: larger appends hold the store's append lock longer without adding throughput. */
export const MAX_EVENTS_PER_APPEND = 1_000;

/** The events of one append, exactly as they landed, and its result. */
export interface Landed<E extends NewEvent> {
  readonly events: readonly E[];
  readonly result: AppendResult;
}

/** Callers' events waiting for their stream's append: those of one call settle together. */
interface Waiter<E extends NewEvent> {
  readonly events: readonly E[];
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

interface Pending<E extends NewEvent> {
  readonly waiters: Waiter<E>[];
  /** The events of the waiters. */
  events: number;
}

/** The first `count` events of `waiter` and the rest, each a waiter of its own: the caller's promise settles once both did. */
function split<E extends NewEvent>(waiter: Waiter<E>, count: number): [Waiter<E>, Waiter<E>] {
  let left = 2;
  const resolve = (): void => {
    left -= 1;
    if (left === 0) waiter.resolve();
  };
  return [
    { events: waiter.events.slice(0, count), resolve, reject: waiter.reject },
    { events: waiter.events.slice(count), resolve, reject: waiter.reject },
  ];
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
  private readonly pending = new Map<string, Pending<E>>();
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
    return this.appendAll(stream, [event]);
  }

  /** append of each of `events`, in order, settling once all of them committed: one promise for a bus message's decisions of a stream. */
  appendAll(stream: string, events: readonly E[]): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      let pending = this.pending.get(stream);
      if (!pending) this.pending.set(stream, (pending = { waiters: [], events: 0 }));
      pending.waiters.push({ events, resolve, reject });
      pending.events += events.length;
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
    const pending = this.pending.get(stream);
    if (!pending) return;
    const wait = (this.started.get(stream) ?? -Infinity) + this.lingerMs - performance.now();
    if (wait > 0 && pending.events < MAX_EVENTS_PER_APPEND) {
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
    const taken = this.take(stream, pending);
    this.appending.add(stream);
    void this.flushStream(stream, taken).finally(() => {
      this.appending.delete(stream);
      this.start(stream);
    });
  }

  /** The stream's oldest waiters holding at most MAX_EVENTS_PER_APPEND events, the last one split when it holds more than fit. */
  private take(stream: string, pending: Pending<E>): Waiter<E>[] {
    if (pending.events <= MAX_EVENTS_PER_APPEND) {
      this.pending.delete(stream);
      return pending.waiters;
    }
    const { waiters } = pending;
    let count = 0;
    let n = 0;
    while (count + waiters[n]!.events.length <= MAX_EVENTS_PER_APPEND) count += waiters[n++]!.events.length;
    if (count < MAX_EVENTS_PER_APPEND) {
      const [head, tail] = split(waiters[n]!, MAX_EVENTS_PER_APPEND - count);
      waiters[n] = tail;
      waiters.splice(n, 0, head);
      n += 1;
    }
    pending.events -= MAX_EVENTS_PER_APPEND;
    return waiters.splice(0, n);
  }

  private async flushStream(stream: string, waiters: Waiter<E>[]): Promise<void> {
    // A record delivered twice into one batch is one event: in the place of its first delivery, as its last.
    const byId = new Map<string, E>();
    for (const waiter of waiters) for (const event of waiter.events) byId.set(event.id, event);
    const events = [...byId.values()];
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
