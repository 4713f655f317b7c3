import type { ProxyStore, RecordedEvent, Subscription } from '../../src/store/port.js';

export interface LiveViewSpec<R> {
  /** Streams the view folds. */
  readonly streamPrefix: string;
  /** The row an event concerns, or undefined to skip it. */
  keyOf(event: RecordedEvent): string | undefined;
  /** A read model's own pure evolve step. */
  evolve(row: R | undefined, event: RecordedEvent): R | null;
  /** Whether a row is kept in memory; one that is not is still heard by `onChange`, then forgotten (a later event starts it from nothing). Absent: every row. */
  keep?(row: R): boolean;
}

/**
 * An in-memory read model the proxy consults on its hot path: rows folded from the event store
 * with the read model's own evolve, caught up at start and then followed live. `onChange` hears
 * every change after catch-up, so sessions can react within moments (kill-switch, rotation).
 */
export class LiveView<R> {
  private readonly rows = new Map<string, R>();
  private subscription: Subscription | undefined;
  private position = -1n;
  private readonly listeners = new Set<(key: string, before: R | undefined, after: R | undefined) => void>();

  constructor(
    private readonly store: Omit<ProxyStore, 'append'>,
    private readonly spec: LiveViewSpec<R>,
  ) {}

  /** The streams this view folds. */
  get streamPrefix(): string {
    return this.spec.streamPrefix;
  }

  /** Resolves once every event that existed at the call is folded; the view then stays live until stop(). */
  async start(): Promise<void> {
    const prefixes = [this.spec.streamPrefix];
    for (let batch = await this.store.readAll(this.position, { streamPrefixes: prefixes }); batch.length > 0; batch = await this.store.readAll(this.position, { streamPrefixes: prefixes })) {
      for (const event of batch) this.apply(event);
    }
    const subscription = this.store.subscribe(this.position, { streamPrefixes: prefixes });
    this.subscription = subscription;
    void (async () => {
      for await (const event of subscription) this.apply(event);
    })();
  }

  private apply(event: RecordedEvent): void {
    if (event.position <= this.position) return;
    this.position = event.position;
    const key = this.spec.keyOf(event);
    if (key === undefined) return;
    const before = this.rows.get(key);
    const after = this.spec.evolve(before, event) ?? undefined;
    if (after === undefined || (this.spec.keep && !this.spec.keep(after))) this.rows.delete(key);
    else this.rows.set(key, after);
    for (const listener of this.listeners) listener(key, before, after);
  }

  get(key: string): R | undefined {
    return this.rows.get(key);
  }

  /** How many rows the view holds now. */
  get size(): number {
    return this.rows.size;
  }

  /** Every row the view holds now. */
  values(): IterableIterator<R> {
    return this.rows.values();
  }

  /**
   * The row, folding its stream directly when the view has not seen it yet: a credential
   * registered a moment ago must authenticate at once. The fold is not cached; the live
   * subscription brings the row in order.
   */
  async getOrRead(key: string, stream: string): Promise<R | undefined> {
    const known = this.rows.get(key);
    if (known !== undefined) return known;
    const events = await this.store.readStream(stream);
    return events.reduce<R | undefined>((row, event) => (this.spec.keyOf(event) === key ? (this.spec.evolve(row, event) ?? undefined) : row), undefined);
  }

  onChange(listener: (key: string, before: R | undefined, after: R | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async stop(): Promise<void> {
    await this.subscription?.close();
  }
}
