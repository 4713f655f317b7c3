/**
 * The in-process decision bus of the embedded default (`pgward serve`): an in-memory log with
 * the semantics of the NATS adapter. Each durable consumer has a cursor into the log and a map of
 * its delivered, unacknowledged messages; a failed message counts against maxInFlight until it is
 * acknowledged, as with JetStream's max_ack_pending.
 */
import { consumeSettings, MessageTooLargeError, type BusMessage, type ConsumeOptions, type Consumer, type ConsumerBacklog, type DecisionBus, type Delivery } from './port.js';

const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
/** Messages every durable has acknowledged are dropped from the log in batches of this size. */
const COMPACT_BATCH = 1_024;

export interface MemoryBusOptions {
  /** Publishing an id again within this window stores nothing. */
  readonly duplicateWindowMs?: number;
  /** Messages held at most; beyond it publish refuses (MemoryBusFullError) rather than grow without bound. */
  readonly maxRetained?: number;
  /** Bytes of message data held at most, likewise: a message may carry a batch of many decisions. */
  readonly maxRetainedBytes?: number;
  /** The largest message data taken (DecisionBus.maxMessageBytes): a larger one is refused, as NATS refuses one above max_payload. */
  readonly maxMessageBytes?: number;
}

const DEFAULT_MAX_RETAINED = 100_000;
const DEFAULT_MAX_RETAINED_BYTES = 256 * 1024 * 1024;
/** NATS's default max_payload: a publisher batches alike on either bus. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;
const MAX_DEDUP_IDS = 100_000;

interface Unacked {
  attempt: number;
  running: boolean;
  /** When a failed message may be offered again (performance.now() time). */
  readyAt: number;
}

interface Durable {
  /** Log offset of the first message never delivered. */
  next: number;
  /** Delivered and not yet acknowledged, by log offset. */
  readonly unacked: Map<number, Unacked>;
  /** Messages acknowledged so far. */
  acknowledged: number;
}

interface LiveConsumer {
  pump(): void;
  stop(): Promise<void>;
}

type Handler = (delivery: Delivery) => Promise<void>;

/** A message in the log, and when it was published (performance.now()). */
interface Held extends BusMessage {
  readonly at: number;
}

export class MemoryBusClosedError extends Error {
  override readonly name = 'MemoryBusClosedError';
  constructor() {
    super('the in-process decision bus is closed');
  }
}

export class MemoryBusFullError extends Error {
  override readonly name = 'MemoryBusFullError';
  constructor(held: string) {
    super(`the in-process decision bus holds ${held} of unconsumed messages; publish refused`);
  }
}

export function createMemoryBus(options: MemoryBusOptions = {}): DecisionBus {
  const duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
  const maxRetained = options.maxRetained ?? DEFAULT_MAX_RETAINED;
  const maxRetainedBytes = options.maxRetainedBytes ?? DEFAULT_MAX_RETAINED_BYTES;
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  /** Offsets below `released` were acknowledged by every durable: their slots are empty, awaiting the next splice. */
  const log: (Held | undefined)[] = [];
  let base = 0;
  let released = 0;
  let retainedBytes = 0;
  const dedupUntil = new Map<string, number>();
  const durables = new Map<string, Durable>();
  const consumers = new Set<LiveConsumer>();
  let closed = false;

  function wakeAll(): void {
    for (const consumer of consumers) consumer.pump();
  }

  function compact(force = false): void {
    // With no durable yet, every message is still owed to the first one.
    let floor = durables.size === 0 ? base : base + log.length;
    for (const durable of durables.values()) {
      floor = Math.min(floor, durable.next);
      for (const offset of durable.unacked.keys()) floor = Math.min(floor, offset);
    }
    // The data goes at once, so a busy proxy's batches never pile up for the garbage collector; the slots go in batches.
    for (; released < floor; released++) {
      retainedBytes -= log[released - base]!.data.length;
      log[released - base] = undefined;
    }
    if (floor - base >= COMPACT_BATCH || (force && floor > base)) {
      log.splice(0, floor - base);
      base = floor;
    }
  }

  function startConsumer(durable: Durable, maxInFlight: number, retryDelayMs: number, handler: Handler): LiveConsumer {
    const running = new Set<Promise<void>>();
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;

    function take(now: number): number | undefined {
      let ready: number | undefined;
      for (const [offset, entry] of durable.unacked) {
        if (!entry.running && entry.readyAt <= now && (ready === undefined || offset < ready)) ready = offset;
      }
      if (ready !== undefined || durable.unacked.size >= maxInFlight || durable.next >= base + log.length) {
        return ready;
      }
      durable.unacked.set(durable.next, { attempt: 0, running: false, readyAt: now });
      return durable.next++;
    }

    function deliver(offset: number, entry: Unacked, message: BusMessage): void {
      entry.running = true;
      entry.attempt += 1;
      const delivery: Delivery = { id: message.id, data: message.data.slice(), attempt: entry.attempt };
      // The handler starts on a microtask so a publish from inside it cannot re-enter pump().
      const work: Promise<void> = Promise.resolve()
        .then(() => handler(delivery))
        .then(
          () => {
            durable.unacked.delete(offset);
            durable.acknowledged += 1;
            compact();
          },
          () => {
            entry.running = false;
            entry.readyAt = performance.now() + retryDelayMs;
          },
        )
        .then(() => {
          running.delete(work);
          wakeAll();
        });
      running.add(work);
    }

    function armRetryTimer(now: number): void {
      clearTimeout(timer);
      let earliest = Infinity;
      for (const entry of durable.unacked.values()) {
        if (!entry.running && entry.readyAt > now) earliest = Math.min(earliest, entry.readyAt);
      }
      timer = earliest === Infinity ? undefined : setTimeout(pump, earliest - now);
    }

    function pump(): void {
      if (stopped) return;
      const now = performance.now();
      while (running.size < maxInFlight) {
        const offset = take(now);
        if (offset === undefined) break;
        const entry = durable.unacked.get(offset);
        const message = log[offset - base];
        if (entry === undefined || message === undefined) break;
        deliver(offset, entry, message);
      }
      armRetryTimer(now);
    }

    const live: LiveConsumer = {
      pump,
      async stop() {
        stopped = true;
        clearTimeout(timer);
        consumers.delete(live);
        await Promise.all(running);
      },
    };
    return live;
  }

  return {
    kind: 'memory',
    maxMessageBytes,

    async publish(message: BusMessage): Promise<void> {
      if (closed) throw new MemoryBusClosedError();
      if (message.data.length > maxMessageBytes) throw new MessageTooLargeError(message.data.length, maxMessageBytes);
      const now = performance.now();
      for (const [id, until] of dedupUntil) {
        if (until > now) break;
        dedupUntil.delete(id);
      }
      if (dedupUntil.has(message.id)) return;
      // The window is also bounded in ids: a busy proxy would otherwise keep two minutes of them.
      if (dedupUntil.size >= MAX_DEDUP_IDS) dedupUntil.delete(dedupUntil.keys().next().value!);
      if (log.length >= maxRetained) compact(true);
      if (log.length >= maxRetained) throw new MemoryBusFullError(`${maxRetained} messages`);
      if (retainedBytes + message.data.length > maxRetainedBytes) throw new MemoryBusFullError(`${retainedBytes} bytes`);
      dedupUntil.set(message.id, now + duplicateWindowMs);
      retainedBytes += message.data.length;
      log.push({ id: message.id, data: message.data.slice(), at: now });
      wakeAll();
    },

    async consume(options: ConsumeOptions, handler: Handler): Promise<Consumer> {
      if (closed) throw new MemoryBusClosedError();
      const { maxInFlight, retryDelayMs } = consumeSettings(options);
      let durable = durables.get(options.durable);
      if (durable === undefined) {
        // A durable created after others acknowledged messages starts at the oldest message still
        // held (every one some durable has not acknowledged), past the slots already emptied.
        durable = { next: released, unacked: new Map(), acknowledged: 0 };
        durables.set(options.durable, durable);
      }
      const consumer = startConsumer(durable, maxInFlight, retryDelayMs, handler);
      consumers.add(consumer);
      consumer.pump();
      return { stop: () => consumer.stop() };
    },

    async backlog(name: string): Promise<ConsumerBacklog | undefined> {
      const durable = durables.get(name);
      if (durable === undefined) return undefined;
      const end = base + log.length;
      let oldest = durable.next;
      for (const offset of durable.unacked.keys()) oldest = Math.min(oldest, offset);
      const oldestAgeMs = oldest < end ? performance.now() - log[oldest - base]!.at : 0;
      return { pending: end - durable.next + durable.unacked.size, acknowledged: durable.acknowledged, oldestAgeMs };
    },

    async close(): Promise<void> {
      closed = true;
      await Promise.all([...consumers].map((consumer) => consumer.stop()));
    },
  };
}

