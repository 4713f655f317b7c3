import { describe, expect, it } from 'vitest';
import { CommittedFeed } from '../../src/store/committed-feed.js';
import type { AppendResult, NewEvent, RecordedEvent } from '../../src/store/port.js';
import { wakeableSubscription } from '../../src/store/subscription.js';

const events = (n: number, tag = 'e'): NewEvent[] => Array.from({ length: n }, (_, i) => ({ id: `${tag}${i}`, type: 'T.v1', data: new Uint8Array([i]), metadata: new Uint8Array() }));
/** The result of an append of `n` events whose last landed at `last`, the category's newest event before it being `before`. */
const result = (n: number, last: bigint, before: bigint): AppendResult => ({ nextExpectedRevision: n - 1, position: last, duplicate: false, categoryBefore: before });
const positions = (batch: readonly RecordedEvent[] | undefined) => batch?.map((e) => [e.revision, e.position]);

describe('CommittedFeed', () => {
  it('hands a batch to a reader whose position is where the category stood before it, with revisions and positions', async () => {
    const feed = new CommittedFeed('audit-');
    feed.committed('audit-p1', 4, events(3), result(3, 12n, 9n));
    expect(positions(await feed.next(9n))).toEqual([[4, 10n], [5, 11n], [6, 12n]]);
    expect(feed.size).toBe(0);
  });

  it('keeps the events’ members and the decision each carries, and nothing else the store does not keep', async () => {
    const feed = new CommittedFeed('audit-');
    const carried = events(2).map((event, i) => ({ ...event, decision: { n: i }, extra: i }));
    feed.committed('audit-p1', 0, carried, result(2, 2n, 0n));
    expect(await feed.next(0n)).toStrictEqual(carried.map(({ extra: _, ...event }, i) => ({ ...event, stream: 'audit-p1', revision: i, position: BigInt(i + 1) })));
  });

  it('holds nothing it cannot place: a duplicate, a result without the category’s position, another category', () => {
    const feed = new CommittedFeed('audit-');
    feed.committed('audit-p1', 0, events(2), { ...result(2, 5n, 3n), duplicate: true });
    feed.committed('audit-p1', 0, events(2), { nextExpectedRevision: 1, position: 5n, duplicate: false });
    feed.committed('auditcp-p1', 0, events(2), result(2, 5n, 3n));
    expect(feed.size).toBe(0);
  });

  it('gives nothing when another writer’s event lies between the reader and the batch, and forgets batches the reader passed', async () => {
    const feed = new CommittedFeed('audit-');
    feed.committed('audit-p1', 0, events(2), result(2, 12n, 10n));
    // The reader stands at 9: event 10 is not ingest's, so the store must be read (no wait: nothing is under way).
    expect(await feed.next(9n)).toBeUndefined();
    expect(feed.size).toBe(2);
    // It read up to 12 from the store: the batch is behind it.
    expect(await feed.next(12n)).toBeUndefined();
    expect(feed.size).toBe(0);
  });

  it('a reader at the head waits for the append under way, and takes it', async () => {
    const feed = new CommittedFeed('audit-');
    feed.started();
    const next = feed.next(9n);
    feed.committed('audit-p1', 0, events(1), result(1, 10n, 9n));
    feed.settled();
    expect(positions(await next)).toEqual([[0, 10n]]);
  });

  it('the wait is bounded, and ends when the append settled without a batch', async () => {
    const feed = new CommittedFeed('audit-');
    feed.started();
    const started = performance.now();
    expect(await feed.next(9n)).toBeUndefined();
    expect(performance.now() - started).toBeGreaterThanOrEqual(40);
    const settling = feed.next(9n);
    feed.settled();
    expect(await settling).toBeUndefined();
  });

  it('a reader behind the feed (catching up) does not wait for appends under way', async () => {
    const feed = new CommittedFeed('audit-');
    feed.committed('audit-p1', 0, events(1), result(1, 30n, 29n));
    feed.started();
    const started = performance.now();
    expect(await feed.next(5n)).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(20);
  });

  it('drops the oldest batches past its capacity', async () => {
    const feed = new CommittedFeed('audit-', 4);
    feed.committed('audit-p1', 0, events(2, 'a'), result(2, 2n, 0n));
    feed.committed('audit-p1', 2, events(2, 'b'), result(2, 4n, 2n));
    feed.committed('audit-p1', 4, events(2, 'c'), result(2, 6n, 4n));
    expect(feed.size).toBe(4);
    expect(await feed.next(0n)).toBeUndefined();
    expect(positions(await feed.next(2n))).toEqual([[2, 3n], [3, 4n]]);
  });
});

describe('wakeableSubscription with a feed', () => {
  function setUp() {
    const feed = new CommittedFeed('audit-');
    const stored: RecordedEvent[] = [];
    let notify: ((payload?: string) => void) | undefined;
    let reads = 0;
    const subscription = wakeableSubscription({
      after: -1n,
      read: async (position) => {
        reads += 1;
        return stored.filter((e) => e.position > position);
      },
      onWake: (wake) => {
        notify = wake;
        return () => (notify = undefined);
      },
      feed,
    });
    return { feed, stored, notify: (payload?: string) => notify?.(payload), reads: () => reads, iterator: subscription[Symbol.asyncIterator](), subscription };
  }
  const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

  it('takes the feed’s batches without reading, ignores the notifications of what it took, and reads for a notification beyond', async () => {
    const { feed, stored, notify, reads, iterator, subscription } = setUp();
    const first = iterator.next();
    await tick();
    expect(reads()).toBe(1);
    feed.committed('audit-p1', 0, events(2), result(2, 1n, -1n));
    expect((await first).value?.position).toBe(0n);
    expect((await iterator.next()).value?.position).toBe(1n);
    const third = iterator.next();
    notify('1');
    await tick();
    expect(reads()).toBe(1);
    // Another writer's event, announced by the store.
    stored.push({ ...events(1, 'x')[0]!, stream: 'audit-p2', revision: 0, position: 2n });
    notify('2');
    expect((await third).value?.position).toBe(2n);
    expect(reads()).toBe(2);
    await subscription.close();
  });

  it('a notification of the batch it is still taking from the feed wakes nothing: no read after the batch', async () => {
    const { feed, notify, reads, iterator, subscription } = setUp();
    const first = iterator.next();
    await tick();
    expect(reads()).toBe(1);
    feed.committed('audit-p1', 0, events(3), result(3, 2n, -1n));
    expect((await first).value?.position).toBe(0n);
    // The store's notification of that append arrives while the batch's first event is being consumed.
    notify('2');
    expect((await iterator.next()).value?.position).toBe(1n);
    expect((await iterator.next()).value?.position).toBe(2n);
    const fourth = iterator.next();
    await tick();
    expect(reads()).toBe(1);
    feed.committed('audit-p1', 3, events(1, 'y'), result(1, 3n, 2n));
    expect((await fourth).value?.position).toBe(3n);
    expect(reads()).toBe(1);
    await subscription.close();
  });
});
