import type { EventStore, Subscription } from '../../src/store/port.js';

/**
 * A real store whose reads are counted: readAll and readStream calls, plus every request its
 * subscriptions made (Subscription.reads). Everything else passes through untouched (the
 * adapters are plain objects of closures, so spreading keeps them working).
 */
export function countingStore(store: EventStore): { store: EventStore; reads(): number } {
  let direct = 0;
  const subscriptions: Subscription[] = [];
  const counted: EventStore = {
    ...store,
    readStream: (stream, fromRevision, maxCount) => {
      direct += 1;
      return store.readStream(stream, fromRevision, maxCount);
    },
    readAll: (after, options) => {
      direct += 1;
      return store.readAll(after, options);
    },
    subscribe: (after, options) => {
      const subscription = store.subscribe(after, options);
      subscriptions.push(subscription);
      return subscription;
    },
  };
  return { store: counted, reads: () => subscriptions.reduce((sum, subscription) => sum + subscription.reads, direct) };
}
