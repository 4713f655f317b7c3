import type { RecordedEvent, Subscription } from './port.js';

export interface WakeableSource {
  after: bigint;
  /** Reads the next batch strictly after `position`; an empty batch means caught up. */
  read(position: bigint): Promise<RecordedEvent[]>;
  /** Registers a callback for "new events may exist"; returns the unregister function. */
  onWake(wake: () => void): () => void;
  fallbackPollMs: number;
}

/** Catch-up then live: reads batches until empty, then sleeps until woken (or the fallback poll), and repeats. */
export function wakeableSubscription(source: WakeableSource): Subscription {
  let closed = false;
  let woken = false;
  let interrupt: (() => void) | undefined;
  const off = source.onWake(() => {
    woken = true;
    interrupt?.();
  });

  function sleep(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, source.fallbackPollMs);
      function done(): void {
        clearTimeout(timer);
        interrupt = undefined;
        resolve();
      }
      interrupt = done;
    });
  }

  async function* run(): AsyncGenerator<RecordedEvent> {
    let position = source.after;
    try {
      while (!closed) {
        woken = false;
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
    async close() {
      closed = true;
      interrupt?.();
      await iterator.return(undefined);
    },
  };
}
