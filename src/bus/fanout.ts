/**
 * The fan-out port: a message published reaches every subscriber of every process sharing the
 * fan-out, at most once and best effort (nothing is kept for a subscriber that was away or a
 * link that was down). The decision bus is a durable work queue, each message to one consumer;
 * this is its broadcast counterpart, for notes every process acts on (cache invalidation). A
 * subscriber also gets what its own process published. Every adapter (in-process, NATS core
 * pub/sub, a worker's IPC channel) passes test/contract/fanout.contract.ts.
 */
export interface Fanout {
  publish(data: Uint8Array): void;
  /** Calls `listener` with each message published from now on; the returned function stops it. */
  subscribe(listener: (data: Uint8Array) => void): () => void;
  close(): Promise<void>;
}

/** The subscribers of one fan-out in this process, and how a message reaches them: what each adapter shares. */
export function subscribers(): Pick<Fanout, 'subscribe'> & { deliver(data: Uint8Array): void; clear(): void } {
  const listeners = new Set<(data: Uint8Array) => void>();
  return {
    deliver(data) {
      for (const listener of [...listeners]) listener(data);
    },
    subscribe(listener) {
      // Wrapped: one function subscribed twice is two subscribers.
      const own = (data: Uint8Array): void => listener(data);
      listeners.add(own);
      return () => listeners.delete(own);
    },
    clear: () => listeners.clear(),
  };
}

/** The in-process fan-out: every subscriber of this process, in the order they subscribed. */
export function createMemoryFanout(): Fanout {
  const local = subscribers();
  return {
    // Delivered on a later turn, as over any link: a publisher never runs a subscriber's work inline.
    publish: (data) => queueMicrotask(() => local.deliver(data)),
    subscribe: local.subscribe,
    close: async () => local.clear(),
  };
}
