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
  /**
   * Resolves once what this side published before has left it for the shared medium (the NATS
   * server has it; the supervisor relayed it; in process: delivered), or after FLUSH_WAIT_MS: a
   * writer awaits it before answering, so its client's next read elsewhere meets the invalidation.
   */
  flushed(): Promise<void>;
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

/** How long `flushed` waits for a link that does not answer (best effort, as the fan-out is). */
export const FLUSH_WAIT_MS = 1_000;

/** `work`, or nothing after FLUSH_WAIT_MS; never rejects. */
export function boundedFlush(work: () => Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([work().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, FLUSH_WAIT_MS)))]).then(() => clearTimeout(timer));
}

/** The in-process fan-out: every subscriber of this process, in the order they subscribed. */
export function createMemoryFanout(): Fanout {
  const local = subscribers();
  return {
    // Delivered on a later turn, as over any link: a publisher never runs a subscriber's work inline.
    publish: (data) => queueMicrotask(() => local.deliver(data)),
    // Microtasks run in order: the deliveries queued before this one have run when it resolves.
    flushed: () => new Promise((resolve) => queueMicrotask(resolve)),
    subscribe: local.subscribe,
    close: async () => local.clear(),
  };
}
