import type { RecordedEvent, Subscription, SubscriptionFeed } from './port.js';

export interface WakeableSource {
  after: bigint;
  /** Reads the next batch strictly after `position`; an empty batch means caught up. */
  read(position: bigint): Promise<RecordedEvent[]>;
  /**
   * Registers a callback for "new events of this subscription's categories may exist"; returns
   * the unregister function. The source must also call it whenever such a wake-up may have been
   * lost (see NotificationListener), since a caught-up subscription reads only when woken. The
   * callback takes the notification's payload: the position of the newest event it announces.
   */
  onWake(wake: (payload?: string) => void): () => void;
  /** Events committed in this process, taken instead of a read where the feed holds them. */
  feed?: SubscriptionFeed;
}

const POSITION = /^[0-9]{1,19}$/;

/**
 * Catch-up then live: reads batches until empty, then sleeps until woken, and repeats. There is
 * no polling: a subscription whose categories do not move makes no round trip at all. A wake-up
 * that announces an event the subscription has read already, or one at or before the newest its
 * feed announced, wakes nothing (the notification of an append it took, or is taking, from its
 * feed). After a batch taken from the feed it sleeps too, unless woken meanwhile: an append in the
 * store that the feed does not hold announces itself.
 */
export function wakeableSubscription(source: WakeableSource): Subscription {
  let closed = false;
  let woken = false;
  let reads = 0;
  let position = source.after;
  /** The newest event the feed announced: one of this subscription's, so reading reaches it. */
  let fedHead = -1n;
  let interrupt: (() => void) | undefined;
  const offStore = source.onWake((payload) => {
    // An event at or before the feed's newest is read or taken anyway before the subscription sleeps
    // (it sleeps only once it has reached fedHead); the store's notification of an append that the
    // feed handed on often arrives while its batch is still being consumed.
    if (payload !== undefined && POSITION.test(payload) && BigInt(payload) <= (fedHead > position ? fedHead : position)) return;
    woken = true;
    interrupt?.();
  });
  const offFeed = source.feed?.onWake((head) => {
    if (head <= fedHead) return;
    fedHead = head;
    if (head > position) interrupt?.();
  });

  const sleep = (): Promise<void> =>
    new Promise((resolve) => {
      interrupt = () => {
        interrupt = undefined;
        resolve();
      };
    });

  async function* run(): AsyncGenerator<RecordedEvent> {
    try {
      while (!closed) {
        woken = false;
        const fed = await source.feed?.next(position);
        if (!fed) reads += 1;
        const batch = fed ?? (await source.read(position));
        for (const event of batch) {
          if (closed) return;
          yield event;
          position = event.position;
        }
        if ((batch.length === 0 || fed) && !woken && fedHead <= position && !closed) await sleep();
      }
    } finally {
      offStore();
      offFeed?.();
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
