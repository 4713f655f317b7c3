/**
 * The DecisionBus contract. Every adapter runs it; `make` must return a bus on its own, empty
 * stream (or a fresh in-process log) each time it is called.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Consumer, DecisionBus, Delivery } from '../../src/bus/port.js';

interface Seen {
  readonly id: string;
  readonly data: Uint8Array;
  readonly attempt: number;
}

const encoder = new TextEncoder();

function seen(delivery: Delivery): Seen {
  return { id: delivery.id, data: Uint8Array.from(delivery.data), attempt: delivery.attempt };
}

function trace(deliveries: readonly Seen[]): string[] {
  return deliveries.map((d) => `${d.id}/${d.attempt}`);
}

/** Polls `condition` until it holds; fails after `timeoutMs`. */
export async function waitUntil(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function gate(): { promise: Promise<void>; open: () => void; fail: (error: Error) => void } {
  let open!: () => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

export function decisionBusContract(name: string, make: () => Promise<DecisionBus>, skipReason?: string): void {
  const title = `decision bus contract: ${name}${skipReason === undefined ? '' : ` (skipped: ${skipReason})`}`;

  describe.skipIf(skipReason !== undefined)(title, () => {
    const runId = randomBytes(4).toString('hex');
    let durables = 0;
    const buses: DecisionBus[] = [];

    const durable = (): string => `contract-${runId}-${++durables}`;
    const open = async (): Promise<DecisionBus> => {
      const bus = await make();
      buses.push(bus);
      return bus;
    };

    afterEach(async () => {
      await Promise.all(buses.splice(0).map((bus) => bus.close()));
    });

    it('delivers the exact bytes and id of a published message', async () => {
      const bus = await open();
      const data = Uint8Array.from([0, 255, 1, 254, 10, 13, 0, 128, ...randomBytes(64)]);
      await bus.publish({ id: 'exact-1', data });

      const deliveries: Seen[] = [];
      const consumer = await bus.consume({ durable: durable() }, async (d) => {
        deliveries.push(seen(d));
      });
      await waitUntil('one delivery', () => deliveries.length === 1);
      await consumer.stop();

      expect(deliveries).toEqual([{ id: 'exact-1', data, attempt: 1 }]);
    });

    it('stores a duplicate id once and keeps the first bytes', async () => {
      const bus = await open();
      await bus.publish({ id: 'dup', data: encoder.encode('first') });
      await bus.publish({ id: 'dup', data: encoder.encode('second') });
      await bus.publish({ id: 'after', data: encoder.encode('after') });

      const deliveries: Seen[] = [];
      const consumer = await bus.consume({ durable: durable(), maxInFlight: 1 }, async (d) => {
        deliveries.push(seen(d));
      });
      await waitUntil('the message after the duplicate', () => deliveries.some((d) => d.id === 'after'));
      await consumer.stop();

      expect(deliveries).toEqual([
        { id: 'dup', data: encoder.encode('first'), attempt: 1 },
        { id: 'after', data: encoder.encode('after'), attempt: 1 },
      ]);
    });

    it('offers a message whose handler threw again with attempt 2 and loses nothing', async () => {
      const bus = await open();
      for (const id of ['a', 'b', 'c']) await bus.publish({ id, data: encoder.encode(id) });

      const deliveries: Seen[] = [];
      const done = new Set<string>();
      const consumer = await bus.consume({ durable: durable(), maxInFlight: 1, retryDelayMs: 20 }, async (d) => {
        deliveries.push(seen(d));
        if (d.id === 'b' && d.attempt === 1) throw new Error('handler failed');
        done.add(d.id);
      });
      await waitUntil('a, b and c handled', () => done.size === 3);
      await consumer.stop();

      expect(trace(deliveries)).toEqual(['a/1', 'b/1', 'b/2', 'c/1']);
      expect(deliveries[2]?.data).toEqual(encoder.encode('b'));
    });

    it('does not acknowledge a message before its handler finished', async () => {
      const bus = await open();
      const name = durable();
      await bus.publish({ id: 'slow', data: encoder.encode('slow') });

      const work = gate();
      let started = false;
      let finished = false;
      const first = await bus.consume({ durable: name, retryDelayMs: 20 }, async () => {
        started = true;
        try {
          await work.promise;
        } finally {
          finished = true;
        }
      });
      await waitUntil('the handler to start', () => started);
      const stopping = first.stop();
      work.fail(new Error('the work did not commit'));
      await stopping;
      expect(finished).toBe(true);

      const deliveries: Seen[] = [];
      const second = await bus.consume({ durable: name }, async (d) => {
        deliveries.push(seen(d));
      });
      await waitUntil('the redelivery', () => deliveries.length === 1);
      await second.stop();

      expect(deliveries).toEqual([{ id: 'slow', data: encoder.encode('slow'), attempt: 2 }]);
    });

    it('stops only after the handlers in flight have finished', async () => {
      const bus = await open();
      for (const id of ['w1', 'w2', 'w3']) await bus.publish({ id, data: encoder.encode(id) });

      let started = 0;
      let finished = 0;
      const consumer = await bus.consume({ durable: durable(), maxInFlight: 4 }, async () => {
        started += 1;
        await new Promise((resolve) => setTimeout(resolve, 100));
        finished += 1;
      });
      await waitUntil('a handler to start', () => started > 0);
      await consumer.stop();

      expect(finished).toBe(started);
    });

    it('delivers first attempts in publish order to a consumer with maxInFlight 1', async () => {
      const bus = await open();
      const ids = Array.from({ length: 50 }, (_, i) => `ordered-${i}`);
      const deliveries: Seen[] = [];
      const consumer = await bus.consume({ durable: durable(), maxInFlight: 1 }, async (d) => {
        deliveries.push(seen(d));
      });
      for (const id of ids) await bus.publish({ id, data: encoder.encode(id) });

      await waitUntil('50 deliveries', () => deliveries.length === ids.length);
      await consumer.stop();

      expect(deliveries.map((d) => d.id)).toEqual(ids);
      expect(deliveries.every((d) => d.attempt === 1)).toBe(true);
    });

    it('delivers each of 1,000 concurrently published messages, at most maxInFlight at once', async () => {
      const bus = await open();
      const ids = Array.from({ length: 1_000 }, (_, i) => `bulk-${String(i).padStart(4, '0')}`);
      await Promise.all(ids.map((id) => bus.publish({ id, data: encoder.encode(id) })));

      const deliveries: Seen[] = [];
      let active = 0;
      let maxActive = 0;
      const consumer = await bus.consume({ durable: durable(), maxInFlight: 32 }, async (d) => {
        active += 1;
        maxActive = Math.max(maxActive, active);
        deliveries.push(seen(d));
        await new Promise((resolve) => setImmediate(resolve));
        active -= 1;
      });
      await waitUntil('1,000 distinct deliveries', () => new Set(deliveries.map((d) => d.id)).size === ids.length, 20_000);
      await consumer.stop();

      expect(deliveries.map((d) => d.id).sort()).toEqual(ids);
      expect(deliveries.every((d) => new TextDecoder().decode(d.data) === d.id && d.attempt === 1)).toBe(true);
      expect(maxActive).toBeLessThanOrEqual(32);
    });

    it('resumes a durable with only the unacknowledged and the new messages', async () => {
      const bus = await open();
      const name = durable();
      for (const id of ['m1', 'm2', 'm3']) await bus.publish({ id, data: encoder.encode(id) });

      const firstRun: Seen[] = [];
      const failM3 = gate();
      const first: Consumer = await bus.consume({ durable: name, maxInFlight: 1, retryDelayMs: 20 }, async (d) => {
        firstRun.push(seen(d));
        if (d.id === 'm3') await failM3.promise;
      });
      await waitUntil('m3 in the first run', () => firstRun.some((d) => d.id === 'm3'));
      const stopping = first.stop();
      failM3.fail(new Error('m3 failed'));
      await stopping;

      for (const id of ['m4', 'm5']) await bus.publish({ id, data: encoder.encode(id) });
      const secondRun: Seen[] = [];
      const second = await bus.consume({ durable: name, maxInFlight: 1 }, async (d) => {
        secondRun.push(seen(d));
      });
      await waitUntil('m5 in the second run', () => secondRun.some((d) => d.id === 'm5'));
      await second.stop();

      expect(trace(firstRun)).toEqual(['m1/1', 'm2/1', 'm3/1']);
      expect(trace(secondRun)).toEqual(['m3/2', 'm4/1', 'm5/1']);
    });

    it('refuses a maxInFlight below 1', async () => {
      const bus = await open();
      await expect(bus.consume({ durable: durable(), maxInFlight: 0 }, async () => undefined)).rejects.toThrow(
        RangeError,
      );
    });

    it('takes a message of exactly maxMessageBytes and refuses one byte more, storing nothing of it', async () => {
      const bus = await open();
      expect(bus.maxMessageBytes).toBeGreaterThanOrEqual(64 * 1024);
      const full = randomBytes(bus.maxMessageBytes);
      await bus.publish({ id: 'full', data: full });
      await expect(bus.publish({ id: 'over', data: randomBytes(bus.maxMessageBytes + 1) })).rejects.toThrow(/exceed/i);
      await bus.publish({ id: 'after', data: encoder.encode('after') });

      const deliveries: Seen[] = [];
      const consumer = await bus.consume({ durable: durable(), maxInFlight: 4 }, async (d) => {
        deliveries.push(seen(d));
      });
      await waitUntil('two deliveries', () => deliveries.length === 2);
      await consumer.stop();
      expect(trace(deliveries)).toEqual(['full/1', 'after/1']);
      expect(Buffer.from(deliveries[0]!.data).equals(full)).toBe(true);
    });

    it('reports a durable backlog: none before it exists, then its pending messages, the age of the oldest, and a count that grows only with acknowledgements', async () => {
      const bus = await open();
      const name = durable();
      expect(await bus.backlog(name)).toBeUndefined();
      for (const id of ['b1', 'b2', 'b3', 'b4', 'b5']) await bus.publish({ id, data: encoder.encode(id) });
      const held = gate();
      const taken: string[] = [];
      const consumer = await bus.consume({ durable: name, maxInFlight: 2 }, async (d) => {
        taken.push(d.id);
        if (d.id === 'b1' || d.id === 'b2') await held.promise;
        if (d.id === 'b3' && d.attempt === 1) throw new Error('once');
      });
      await waitUntil('two deliveries in flight', () => taken.length === 2);
      // Two delivered and under way, three never delivered: all five pending, none acknowledged.
      const start = (await bus.backlog(name))!;
      expect(start.pending).toBe(5);
      // b1 still waits, and ages.
      const young = (await bus.backlog(name))!.oldestAgeMs;
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect((await bus.backlog(name))!.oldestAgeMs).toBeGreaterThanOrEqual(young + 50);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await bus.backlog(name))!.acknowledged).toBe(start.acknowledged);
      held.open();
      await waitUntil('every message taken, b3 twice', () => taken.length === 6);
      let after = (await bus.backlog(name))!;
      for (const deadline = Date.now() + 10_000; after.pending > 0 && Date.now() < deadline; after = (await bus.backlog(name))!) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(after).toMatchObject({ pending: 0, oldestAgeMs: 0 });
      expect(after.acknowledged).toBeGreaterThan(start.acknowledged);
      await bus.publish({ id: 'b6', data: encoder.encode('b6') });
      await waitUntil('b6 taken', () => taken.includes('b6'));
      await consumer.stop();
      await bus.publish({ id: 'b7', data: encoder.encode('b7') });
      const one = (await bus.backlog(name))!;
      expect(one.pending).toBe(1);
      expect(one.oldestAgeMs).toBeLessThan(5_000);
      expect(await bus.backlog(durable())).toBeUndefined();
    });

    it('refuses to publish after close', async () => {
      const bus = await open();
      await bus.close();
      await expect(bus.publish({ id: 'late', data: encoder.encode('late') })).rejects.toThrow(/closed/i);
    });
  });
}
