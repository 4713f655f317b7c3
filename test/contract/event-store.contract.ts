import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError, type EventStore, type NewEvent, type RecordedEvent } from '../../src/store/port.js';
import type { PostgresEventStore } from '../../src/store/postgres.js';

export interface ContractOptions {
  skipReason?: string;
  /** The adapter offers `transaction()` (PostgreSQL): enables the late-commit case. */
  supportsTransactions?: boolean;
}

function event(type = 'Tested.v1', data: Uint8Array = Buffer.from(`{"n":${Math.random()}}`)): NewEvent {
  return { id: randomUUID(), type, data, metadata: Buffer.from('{"actor":"contract"}') };
}

async function refusal(promise: Promise<unknown>): Promise<StoreError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  return error as StoreError;
}

async function take(iterator: AsyncIterator<RecordedEvent>, count: number, timeoutMs = 10_000): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < count) {
    const next = await Promise.race([
      iterator.next(),
      new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()))),
    ]);
    if (next === 'timeout') throw new Error(`subscription delivered ${out.length} of ${count} events in ${timeoutMs} ms`);
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}

/** The one suite every EventStore adapter must pass (ARCHITECTURE.md §4). */
export function eventStoreContract(name: string, make: () => Promise<EventStore>, options: ContractOptions = {}): void {
  const title = options.skipReason ? `event store contract: ${name} (skipped: ${options.skipReason})` : `event store contract: ${name}`;
  describe.skipIf(Boolean(options.skipReason))(title, () => {
    let store: EventStore;
    const run = `c${randomBytes(4).toString('hex')}`;
    let streamCounter = 0;
    const newStream = (): string => `${run}-s${++streamCounter}`;

    beforeAll(async () => {
      store = await make();
    });
    afterAll(async () => {
      await store?.close();
    });

    describe('expected revision', () => {
      it('no_stream creates a stream; a second no_stream is refused with the actual revision', async () => {
        const stream = newStream();
        const first = await store.append(stream, [event(), event()], 'no_stream');
        expect(first.nextExpectedRevision).toBe(1);
        const error = await refusal(store.append(stream, [event()], 'no_stream'));
        expect(error.code).toBe('WRONG_EXPECTED_REVISION');
        expect(error.details).toEqual({ stream, expected: 'no_stream', actual: 1 });
      });

      it('exists is refused on a missing stream and accepted on an existing one', async () => {
        const stream = newStream();
        const error = await refusal(store.append(stream, [event()], 'exists'));
        expect(error.details).toEqual({ stream, expected: 'exists', actual: 'no_stream' });
        expect(await store.readStream(stream)).toEqual([]);
        await store.append(stream, [event()], 'any');
        expect((await store.append(stream, [event()], 'exists')).nextExpectedRevision).toBe(1);
      });

      it('an exact revision must equal the last revision; stale and future ones are refused', async () => {
        const stream = newStream();
        await store.append(stream, [event()], 'no_stream');
        expect((await store.append(stream, [event()], 0)).nextExpectedRevision).toBe(1);
        const stale = await refusal(store.append(stream, [event()], 0));
        expect(stale.details).toEqual({ stream, expected: 0, actual: 1 });
        const future = await refusal(store.append(stream, [event()], 5));
        expect(future.details).toEqual({ stream, expected: 5, actual: 1 });
        const missing = await refusal(store.append(newStream(), [event()], 0));
        expect(missing.details.actual).toBe('no_stream');
      });

      it('any appends whatever the stream holds', async () => {
        const stream = newStream();
        expect((await store.append(stream, [event()], 'any')).nextExpectedRevision).toBe(0);
        expect((await store.append(stream, [event(), event()], 'any')).nextExpectedRevision).toBe(2);
        expect((await store.readStream(stream)).map((e) => e.revision)).toEqual([0, 1, 2]);
      });

      it('reads a stream a page at a time: from a revision, at most maxCount', async () => {
        const stream = newStream();
        await store.append(stream, [event(), event(), event(), event(), event()], 'no_stream');
        expect((await store.readStream(stream, 0, 2)).map((e) => e.revision)).toEqual([0, 1]);
        expect((await store.readStream(stream, 2, 2)).map((e) => e.revision)).toEqual([2, 3]);
        expect((await store.readStream(stream, 4, 2)).map((e) => e.revision)).toEqual([4]);
        expect(await store.readStream(stream, 5, 2)).toEqual([]);
        expect((await store.readStream(stream, 1)).map((e) => e.revision)).toEqual([1, 2, 3, 4]);
      });
    });

    describe('idempotence and atomicity', () => {
      it('retrying the same events returns the first result and appends nothing', async () => {
        const stream = newStream();
        const batch = [event(), event()];
        const first = await store.append(stream, batch, 'no_stream');
        expect(first.duplicate).toBe(false);
        // The category's position before the append (where an adapter tells it) belongs to the first append only.
        const firstResult = { nextExpectedRevision: first.nextExpectedRevision, position: first.position, duplicate: true };
        const retry = await store.append(stream, batch, 'no_stream');
        expect(retry).toEqual(firstResult);
        const again = await store.append(stream, batch, 'any');
        expect(again).toEqual(firstResult);
        expect((await store.readStream(stream)).map((e) => e.id)).toEqual(batch.map((e) => e.id));
      });

      it('a refused batch appends none of its events', async () => {
        const stream = newStream();
        await store.append(stream, [event()], 'no_stream');
        await refusal(store.append(stream, [event(), event(), event()], 7));
        expect(await store.readStream(stream)).toHaveLength(1);
      });

      it('a batch gets consecutive revisions and increasing positions', async () => {
        const stream = newStream();
        const result = await store.append(stream, [event(), event(), event()], 'no_stream');
        const read = await store.readStream(stream);
        expect(read.map((e) => e.revision)).toEqual([0, 1, 2]);
        expect(read[2]?.position).toBe(result.position);
        expect(read[0]!.position < read[1]!.position && read[1]!.position < read[2]!.position).toBe(true);
      });
    });

    it('returns payload and metadata bytes exactly as written', async () => {
      const stream = newStream();
      const payloads = [
        Buffer.from('{"b": 1,  "a":[1.50, "\\u00e9"]}\n'),
        Buffer.from('{"emoji":"🔐","nul":"\\u0000"}'),
        randomBytes(4096),
        Buffer.alloc(0),
        new Uint8Array(randomBytes(100).buffer, 7, 50),
      ];
      const written = payloads.map((data, i) => ({ ...event('Bytes.v1', data), metadata: i === 1 ? Buffer.alloc(0) : randomBytes(64).subarray(i) }));
      await store.append(stream, written, 'no_stream');
      const read = await store.readStream(stream);
      expect(read.map((e) => Buffer.from(e.data).toString('hex'))).toEqual(written.map((e) => Buffer.from(e.data).toString('hex')));
      expect(read.map((e) => Buffer.from(e.metadata).toString('hex'))).toEqual(written.map((e) => Buffer.from(e.metadata).toString('hex')));
      expect(read.map((e) => [e.id, e.type])).toEqual(written.map((e) => [e.id, e.type]));
    });

    it('readStream starts at a revision; readAll filters by stream prefix', async () => {
      const stream = newStream();
      await store.append(stream, [event(), event(), event()], 'no_stream');
      expect((await store.readStream(stream, 1)).map((e) => e.revision)).toEqual([1, 2]);
      const prefix = `${run}-only-`;
      await store.append(`${prefix}a`, [event()], 'no_stream');
      await store.append(`${prefix}b`, [event()], 'no_stream');
      const filtered = await store.readAll(-1n, { streamPrefixes: [prefix] });
      expect(filtered.map((e) => e.stream)).toEqual([`${prefix}a`, `${prefix}b`]);
      expect(await store.readAll(filtered[1]!.position, { streamPrefixes: [prefix] })).toEqual([]);
    });

    it('8 concurrent writers: positions strictly increase in read order, and are dense where the adapter promises it', async () => {
      const prefix = `${run}-conc-`;
      const writers = Array.from({ length: 8 }, (_, w) =>
        (async () => {
          for (let i = 0; i < 25; i++) await store.append(`${prefix}${w % 3}`, [event(), event()], 'any');
        })(),
      );
      await Promise.all(writers);
      const all = await store.readAll(-1n, { streamPrefixes: [prefix], limit: 10_000 });
      expect(all).toHaveLength(400);
      for (let i = 1; i < all.length; i++) expect(all[i]!.position > all[i - 1]!.position).toBe(true);
      if (store.densePositions) {
        const everything = await store.readAll(all[0]!.position - 1n, { limit: 100_000 });
        const positions = everything.map((e) => e.position);
        positions.forEach((p, i) => expect(p).toBe(all[0]!.position + BigInt(i)));
      }
      for (let s = 0; s < 3; s++) {
        const revisions = (await store.readStream(`${prefix}${s}`)).map((e) => e.revision);
        expect(revisions).toEqual(revisions.map((_, i) => i));
      }
    });

    it('catch-up, then live, then resume from a checkpoint after a restart', async () => {
      const prefix = `${run}-sub-`;
      await store.append(`${prefix}x`, [event(), event(), event()], 'no_stream');
      const subscription = store.subscribe(-1n, { streamPrefixes: [prefix] });
      const iterator = subscription[Symbol.asyncIterator]();
      const caughtUp = await take(iterator, 3);
      expect(caughtUp.map((e) => e.revision)).toEqual([0, 1, 2]);
      const live = [event(), event()];
      await store.append(`${prefix}y`, live, 'no_stream');
      const liveRead = await take(iterator, 2);
      expect(liveRead.map((e) => e.id)).toEqual(live.map((e) => e.id));
      await subscription.close();

      const checkpoint = caughtUp[2]!.position;
      await store.close();
      store = await make();
      const later = event();
      await store.append(`${prefix}z`, [later], 'no_stream');
      const resumed = store.subscribe(checkpoint, { streamPrefixes: [prefix] });
      const resumedRead = await take(resumed[Symbol.asyncIterator](), 3);
      expect(resumedRead.map((e) => e.id)).toEqual([...live.map((e) => e.id), later.id]);
      await resumed.close();
    });

    describe('categories', () => {
      // Each of these has a category of its own (the name up to the first dash).
      const mine = `${run}mine-`;
      const other = `${run}other-`;
      /** Lets a subscription finish the read in flight and go idle. */
      const idle = () => new Promise((resolve) => setTimeout(resolve, 300));

      it('readAll filters in the store: interleaved categories, pages counted in matching events only', async () => {
        const written: string[] = [];
        for (let i = 0; i < 6; i++) {
          const own = event();
          written.push(own.id);
          await store.append(`${mine}page`, [own], 'any');
          await store.append(`${other}page`, [event(), event()], 'any');
        }
        const first = await store.readAll(-1n, { streamPrefixes: [`${mine}page`], limit: 4 });
        expect(first.map((e) => e.id)).toEqual(written.slice(0, 4));
        const rest = await store.readAll(first.at(-1)!.position, { streamPrefixes: [`${mine}page`], limit: 4 });
        expect(rest.map((e) => e.id)).toEqual(written.slice(4));
      });

      it('a subscription is not woken by appends to other categories: they cost it no request', async () => {
        const first = event();
        await store.append(`${mine}w1`, [first], 'no_stream');
        const subscription = store.subscribe(-1n, { streamPrefixes: [`${mine}w`] });
        const iterator = subscription[Symbol.asyncIterator]();
        expect((await take(iterator, 1)).map((e) => e.id)).toEqual([first.id]);
        const next = take(iterator, 1);
        await idle();
        const asleep = subscription.reads;
        for (let i = 0; i < 40; i++) await store.append(`${other}${i % 4}`, [event(), event()], 'any');
        const wanted = event();
        await store.append(`${mine}w2`, [wanted], 'no_stream');
        expect((await next).map((e) => e.id)).toEqual([wanted.id]);
        // At most the one request that brought its own event (none for a server that pushes).
        expect(subscription.reads - asleep).toBeLessThanOrEqual(1);
        await subscription.close();
      });

      it('countAfter counts the events readAll would return, from any position; events of other categories after the last of its own count nothing', async () => {
        const start = await store.headPosition();
        const own: RecordedEvent[] = [];
        for (let i = 0; i < 5; i++) {
          await store.append(`${mine}count${i % 2}`, [event()], 'any');
          await store.append(`${other}count`, [event(), event()], 'any');
          own.push(...(await store.readAll(own.at(-1)?.position ?? start, { streamPrefixes: [`${mine}count`] })));
        }
        await store.append(`${run}nocat-count`, [event()], 'any');
        expect(own).toHaveLength(5);
        expect(await store.countAfter(start, { streamPrefixes: [`${mine}count`] })).toBe(5);
        expect(await store.countAfter(start, { streamPrefixes: [`${mine}count1`] })).toBe(2);
        expect(await store.countAfter(own[2]!.position, { streamPrefixes: [mine] })).toBe(2);
        expect(await store.countAfter(own[4]!.position, { streamPrefixes: [mine] })).toBe(0);
        expect(await store.countAfter(start, { streamPrefixes: [other] })).toBe(10);
        expect(await store.countAfter(start, { streamPrefixes: [mine, other] })).toBe(15);
        expect(await store.countAfter(start, { streamPrefixes: [`${run}nocat`] })).toBe(1);
        expect(await store.countAfter(start)).toBe(16);
        expect(await store.countAfter(await store.headPosition())).toBe(0);
      });

      it('a subscription without a filter, or with a prefix that names no category, is woken by any category', async () => {
        const head = await store.headPosition();
        const everything = store.subscribe(head);
        const uncategorized = store.subscribe(head, { streamPrefixes: [`${run}nocat`] });
        const wanted = event();
        await store.append(`${run}nocat-1`, [wanted], 'no_stream');
        expect((await take(uncategorized[Symbol.asyncIterator](), 1)).map((e) => e.id)).toEqual([wanted.id]);
        expect((await take(everything[Symbol.asyncIterator](), 1)).map((e) => e.id)).toEqual([wanted.id]);
        await Promise.all([everything.close(), uncategorized.close()]);
      });
    });

    it.skipIf(!options.supportsTransactions)('late commit: an event whose transaction commits last is never skipped by a checkpointed reader', async () => {
      const pgStore = store as PostgresEventStore;
      const prefix = `${run}-late-`;
      const before = await store.headPosition();
      let releaseT1!: () => void;
      const t1Holding = new Promise<void>((resolve) => (releaseT1 = resolve));
      let t1Appended!: () => void;
      const t1HasAppended = new Promise<void>((resolve) => (t1Appended = resolve));
      const t1Event = event();
      const t1 = pgStore.transaction(async (tx) => {
        await tx.append(`${prefix}t1`, [t1Event], 'no_stream');
        t1Appended();
        await t1Holding;
      });
      await t1HasAppended;
      const t2Event = event();
      let t2Done = false;
      const t2 = store.append(`${prefix}t2`, [t2Event], 'no_stream').then((r) => {
        t2Done = true;
        return r;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const visibleWhileT1Open = await store.readAll(before, { streamPrefixes: [prefix] });
      expect(visibleWhileT1Open).toEqual([]);
      expect(t2Done).toBe(false);
      releaseT1();
      await t1;
      const t2Result = await t2;
      const all = await store.readAll(before, { streamPrefixes: [prefix] });
      expect(all.map((e) => e.id)).toEqual([t1Event.id, t2Event.id]);
      expect(all[1]!.position).toBe(t2Result.position);
      expect(all[0]!.position < t2Result.position).toBe(true);
    });
  });
}
