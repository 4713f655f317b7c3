/**
 * The event store port. Every adapter (PostgreSQL, EventStoreDB) implements it and passes
 * test/contract/event-store.contract.ts. Revisions are 0-based; positions are global and
 * strictly increasing in commit order.
 */

/** What a writer expects of the stream before its append. A number is the revision of the stream's last event. */
export type ExpectedRevision = 'any' | 'no_stream' | 'exists' | number;

/** An event about to be appended. `data` and `metadata` are stored and returned byte for byte. */
export interface NewEvent {
  readonly id: string;
  readonly type: string;
  readonly data: Uint8Array;
  readonly metadata: Uint8Array;
}

export interface RecordedEvent extends NewEvent {
  readonly stream: string;
  readonly revision: number;
  readonly position: bigint;
}

export interface AppendResult {
  /** Revision of the stream's last event after the append. */
  readonly nextExpectedRevision: number;
  /** Global position of the last event of the batch. */
  readonly position: bigint;
  /** Every event id of the batch was already in the stream: this was a retry and nothing was appended. */
  readonly duplicate: boolean;
  /**
   * The position of the newest event of the stream's category (src/store/categories.ts) before
   * this append, -1n when it had none, when the adapter knows it: a reader of the category that
   * has consumed it up to there knows the appended events are its next ones. Absent for a
   * duplicate, a stream without a category, and on adapters that cannot tell (EventStoreDB).
   */
  readonly categoryBefore?: bigint;
}

export interface ReadAllOptions {
  /**
   * Only events whose stream starts with one of these prefixes, filtered by the store. On a
   * subscription they also choose what wakes it: only appends to streams of the prefixes'
   * categories (src/store/categories.ts) do.
   */
  readonly streamPrefixes?: readonly string[];
  readonly limit?: number;
}

/**
 * Events a writer of the same process has just committed, handed to a subscription of their
 * streams so that it need not read them back from the store (src/store/committed-feed.ts).
 */
export interface SubscriptionFeed {
  /**
   * The subscription's next events after `position` (the last it consumed), when the feed holds
   * exactly those; undefined when the store must be read.
   */
  next(position: bigint): Promise<readonly RecordedEvent[] | undefined>;
  /** Calls `wake` with the position of the last event of each batch the feed receives; returns the unregister function. */
  onWake(wake: (head: bigint) => void): () => void;
}

export interface SubscribeOptions extends Omit<ReadAllOptions, 'limit'> {
  /** Takes events from the feed where it holds them (adapters whose subscriptions read: PostgreSQL); the store is read for the rest. */
  readonly feed?: SubscriptionFeed;
}

export interface Subscription extends AsyncIterable<RecordedEvent> {
  /**
   * Requests this subscription has made to the store so far: each read of a polling adapter
   * (catch-up and every wake-up), each (re)subscribe of a push adapter. Appends to streams it
   * does not read must not add to it; events taken from a feed are no request.
   */
  readonly reads: number;
  close(): Promise<void>;
}

/** The two forms of decisions' event ids: see EventStore.decisionIdForm. */
export type DecisionIdForm = 'sequential' | 'hashed';

export interface EventStore {
  readonly kind: 'postgres' | 'eventstoredb';
  /** Whether global positions are dense (no holes between consecutive events). */
  readonly densePositions: boolean;
  append(stream: string, events: readonly NewEvent[], expected: ExpectedRevision): Promise<AppendResult>;
  /** Events of one stream in revision order, from `fromRevision` (inclusive), at most `maxCount` (all unless given). Empty for a missing stream. */
  readStream(stream: string, fromRevision?: number, maxCount?: number): Promise<RecordedEvent[]>;
  /** Events with a position strictly greater than `after`, in position order. */
  readAll(after: bigint, options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /** Catch-up from `after`, then live. Ends when closed. */
  subscribe(after: bigint, options?: SubscribeOptions): Subscription;
  /**
   * Of `ids`, those a stored event has. Optional: an adapter that cannot look events up by id
   * (EventStoreDB indexes none) leaves it out, and callers do without.
   */
  storedEventIds?(ids: readonly string[]): Promise<Set<string>>;
  /**
   * The form of the event ids ingest gives the proxies' decisions in this store
   * (src/ingest/decision-event.ts), fixed when the store was made: `sequential` in a store made by
   * a release that knows that form, `hashed` in one an earlier release made (whose ingest knows only
   * that form), so that every ingest of the store gives a decision the same id, redelivered or not.
   * Optional: an adapter without it keeps the hashed form.
   */
  decisionIdForm?(): Promise<DecisionIdForm>;
  /**
   * How many events with a position strictly greater than `after` `readAll` would return
   * without a limit: for a reader at checkpoint `after`, the events it has still to read.
   */
  countAfter(after: bigint, options?: Omit<ReadAllOptions, 'limit'>): Promise<number>;
  /** Position of the newest event, or -1n when the store is empty. */
  headPosition(): Promise<bigint>;
  close(): Promise<void>;
}

/**
 * What a proxy needs of the event store: its live views read and follow it, and it appends the few
 * events a proxy writes. The state database's store serves it, and so does an enrolled data
 * plane's channel to its control plane (src/enroll/remote-store.ts).
 */
export type ProxyStore = Pick<EventStore, 'readAll' | 'subscribe' | 'readStream' | 'append'>;

export type StoreErrorCode = 'WRONG_EXPECTED_REVISION' | 'EVENT_ID_CONFLICT' | 'STORE_UNAVAILABLE';

/** The one error shape every adapter raises for a refused append, whatever the backend said. */
export class StoreError extends Error {
  override readonly name = 'StoreError';
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    readonly details: { stream?: string; expected?: ExpectedRevision; actual?: number | 'no_stream' } = {},
  ) {
    super(message);
  }
}

export function wrongExpectedRevision(stream: string, expected: ExpectedRevision, actual: number | 'no_stream'): StoreError {
  return new StoreError(
    'WRONG_EXPECTED_REVISION',
    `stream ${stream}: expected ${String(expected)}, found ${String(actual)}`,
    { stream, expected, actual },
  );
}

/** Decides whether a stream whose last revision is `actual` (-1 when absent) satisfies `expected`. */
export function satisfies(expected: ExpectedRevision, actual: number): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return actual === -1;
  if (expected === 'exists') return actual >= 0;
  return expected === actual;
}
