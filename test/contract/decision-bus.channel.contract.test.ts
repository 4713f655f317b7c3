/**
 * The in-process bus served to a worker over a channel (src/bus/channel.ts) passes the bus contract,
 * and a worker's exit loses and doubles nothing: what it had not answered goes to the next consumer
 * of its durable. The channel runs over a real MessageChannel (structured clone, as the IPC
 * channel's advanced serialization).
 */
import { MessageChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { busOver, serveBusOver } from '../../src/bus/channel.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { DecisionBus, Delivery } from '../../src/bus/port.js';
import { Channel } from '../../src/workers/channel.js';
import { endpoint } from './message-port-endpoint.js';
import { decisionBusContract, waitUntil } from './decision-bus.contract.js';

interface Worker {
  readonly bus: DecisionBus;
  /** The worker's end of the channel is gone, as when its process exits. */
  exit(): Promise<void>;
}

function connectWorker(memory: DecisionBus): Worker {
  const { port1, port2 } = new MessageChannel();
  const supervisorSide = new Channel(endpoint(port1));
  const workerSide = new Channel(endpoint(port2));
  const bridge = serveBusOver(memory, supervisorSide);
  return {
    bus: busOver(workerSide),
    async exit() {
      workerSide.close('exited');
      port2.close();
      await bridge.detach();
      port1.close();
    },
  };
}

decisionBusContract('memory, over a worker channel', async () => {
  const memory = createMemoryBus();
  const worker = connectWorker(memory);
  return {
    ...worker.bus,
    async close() {
      await worker.bus.close();
      await worker.exit();
      await memory.close();
    },
  };
});

describe('the in-process bus when a worker exits', () => {
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0)) await close();
  });

  it('offers every delivery the worker had not answered to the restarted worker, and nothing it had acknowledged', async () => {
    const memory = createMemoryBus();
    closing.push(() => memory.close());
    const first = connectWorker(memory);
    const ids = Array.from({ length: 20 }, (_, i) => `decision-${i}`);
    for (const id of ids) await memory.publish({ id, data: new TextEncoder().encode(id) });

    const acknowledged: string[] = [];
    const held: Delivery[] = [];
    await first.bus.consume({ durable: 'ingest', maxInFlight: 8, retryDelayMs: 0 }, async (delivery) => {
      // The first five commit; the next ones hang, as appends in flight when the process dies.
      if (acknowledged.length < 5) return void acknowledged.push(delivery.id);
      held.push(delivery);
      await new Promise(() => undefined);
    });
    await waitUntil('five acknowledged and eight in flight', () => acknowledged.length === 5 && held.length === 8);
    await first.exit();

    const second = connectWorker(memory);
    closing.push(() => second.exit());
    const redelivered: { id: string; attempt: number; text: string }[] = [];
    const consumer = await second.bus.consume({ durable: 'ingest', maxInFlight: 8, retryDelayMs: 0 }, async (delivery) => {
      redelivered.push({ id: delivery.id, attempt: delivery.attempt, text: new TextDecoder().decode(delivery.data) });
    });
    await waitUntil('the other fifteen', () => redelivered.length === 15);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await consumer.stop();

    expect(acknowledged).toEqual(ids.slice(0, 5));
    expect(redelivered.map((d) => d.id).sort()).toEqual(ids.slice(5).sort());
    expect(redelivered.filter((d) => d.attempt === 2).map((d) => d.id).sort()).toEqual(held.map((d) => d.id).sort());
    expect(redelivered.every((d) => d.text === d.id)).toBe(true);
  });

  it('refuses a publish from a worker whose channel is closed, rather than dropping it silently', async () => {
    const memory = createMemoryBus();
    closing.push(() => memory.close());
    const worker = connectWorker(memory);
    await worker.exit();
    await expect(worker.bus.publish({ id: 'late', data: new Uint8Array([1]) })).rejects.toThrow(/closed: exited/);
  });
});
