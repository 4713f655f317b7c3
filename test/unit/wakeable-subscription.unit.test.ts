import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RecordedEvent } from '../../src/store/port.js';
import { wakeableSubscription } from '../../src/store/subscription.js';

const at = (position: number): RecordedEvent => ({ id: String(position), type: 'T.v1', data: new Uint8Array(), metadata: new Uint8Array(), stream: 's-1', revision: position, position: BigInt(position) });

/** An in-memory log read two events at a time (as of the read's start), and its wake-up callback. */
function log() {
  const events: RecordedEvent[] = [];
  let wake: (() => void) | undefined;
  let pause: Promise<void> | undefined;
  return {
    events,
    wake: () => wake?.(),
    holdReads(until: Promise<void>) {
      pause = until;
    },
    source: {
      after: -1n,
      read: async (position: bigint) => {
        const found = events.filter((e) => e.position > position).slice(0, 2);
        await pause;
        return found;
      },
      onWake: (callback: () => void) => {
        wake = callback;
        return () => (wake = undefined);
      },
    },
  };
}

const quiet = () => new Promise((resolve) => setTimeout(resolve, 150));

describe('wakeableSubscription', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('catches up, then makes no request until woken, however long it waits', async () => {
    vi.useFakeTimers();
    const store = log();
    store.events.push(at(0), at(1), at(2));
    const subscription = wakeableSubscription(store.source);
    const iterator = subscription[Symbol.asyncIterator]();
    for (const position of [0n, 1n, 2n]) expect((await iterator.next()).value?.position).toBe(position);
    const next = iterator.next();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(subscription.reads).toBe(3);
    store.events.push(at(3));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(subscription.reads).toBe(3);
    store.wake();
    expect((await next).value?.position).toBe(3n);
    expect(subscription.reads).toBe(4);
    await subscription.close();
  });

  it('a wake-up during a read is not lost: it reads once more before sleeping', async () => {
    const store = log();
    const subscription = wakeableSubscription(store.source);
    const iterator = subscription[Symbol.asyncIterator]();
    let release!: () => void;
    store.holdReads(new Promise((resolve) => (release = resolve)));
    const next = iterator.next();
    await quiet();
    store.events.push(at(0));
    store.wake();
    store.holdReads(Promise.resolve());
    release();
    expect((await next).value?.position).toBe(0n);
    expect(subscription.reads).toBe(2);
    await subscription.close();
  });
});
