import type { RecordedEvent, Subscription } from './port.js';

export interface WakeableSource {
  after: bigint;
  /** Reads the next batch strictly after `position`; an empty batch means caught up. */
  read(position: bigint): Promise<RecordedEvent[]>;
  /**
   * Registers a callback for "new events of this subscription's categories may exist"; returns
   * the unregister function. The source must also call it whenever such a wake-up may have been
   * lost (see NotificationListener), since a caught-up subscription reads only when woken.
   */
  onWake(wake: () => void): () => void;
}

/**
 * Catch-up then live: reads batches until empty, then sleeps until woken, and repeats. There is
 * no polling: a subscription whose categories do not move makes no round trip at all.
 */
export function wakeableSubscription(source: WakeableSource): Subscription {
  let closed = false;
  let woken = false;
  let reads = 0;
  let interrupt: (() => void) | undefined;
  const off = source.onWake(() => {
    woken = true;
    interrupt?.();
  });

  const sleep = (): Promise<void> =>
    new Promise((resolve) => {
      interrupt = () => {
        interrupt = undefined;
        resolve();
      };
    });

  async function* run(): AsyncGenerator<RecordedEvent> {
    let position = source.after;
    try {
      while (!closed) {
        woken = false;
        reads += 1;
        const batch = await source.read(position);
        for (const event of batch) {
          if (closed) return;
          yield event;
          position = event.position;
        }
        if (batch.length === 0 && !woken && !closed) await sleep();
      }
    } finally {
      off();
    }
  }

  const iterator = run();
  return {
    [Symbol.asyncIterator]: () => iterator,
    get reads() {
      return reads;
    },
    async close() {
      closed = true;
      interrupt?.();
      await iterator.return(undefined);
    },
  };
}
