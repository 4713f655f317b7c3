import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createMemoryBus, MemoryBusFullError } from '../../src/bus/memory.js';
import { connectNatsBus, NatsBusError } from '../../src/bus/nats.js';
import { decisionBusContract, waitUntil } from './decision-bus.contract.js';

decisionBusContract('memory', async () => createMemoryBus());

const natsUrl = process.env.NATS_URL ?? '';
const runId = randomBytes(4).toString('hex');
let busesMade = 0;
const streams: string[] = [];

decisionBusContract(
  'nats',
  async () => {
    busesMade += 1;
    const stream = `PGWARD_CONTRACT_${runId}_${busesMade}`;
    const bus = await connectNatsBus({ url: natsUrl, stream, subject: `pgward.contract.${runId}.${busesMade}` });
    streams.push(stream);
    return bus;
  },
  natsUrl === '' ? 'NATS_URL is not set' : undefined,
);

afterAll(async () => {
  if (streams.length === 0) return;
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    await Promise.all(streams.map((stream) => jsm.streams.delete(stream)));
  } finally {
    await nc.close();
  }
});

describe('memory bus', () => {
  it('leaves no retry timer behind after close', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const bus = createMemoryBus();
      await bus.publish({ id: 'fails', data: new Uint8Array([1]) });
      let failures = 0;
      await bus.consume({ durable: 'timers', retryDelayMs: 60_000 }, async () => {
        failures += 1;
        throw new Error('handler failed');
      });
      await new Promise((resolve) => setImmediate(resolve));

      expect(failures).toBe(1);
      expect(vi.getTimerCount()).toBe(1);
      await bus.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('memory bus log compaction', () => {
  it('resumes a durable correctly after acknowledged messages were dropped from the log', async () => {
    const bus = createMemoryBus();
    const encoder = new TextEncoder();
    const ids = Array.from({ length: 2_500 }, (_, i) => `c-${i}`);
    for (const id of ids) await bus.publish({ id, data: encoder.encode(id) });

    const firstRun: string[] = [];
    const first = await bus.consume({ durable: 'compact', maxInFlight: 8 }, async (d) => {
      firstRun.push(d.id);
    });
    await waitUntil('2,500 deliveries', () => firstRun.length === ids.length);
    await first.stop();
    await bus.publish({ id: 'late-1', data: encoder.encode('late-1') });
    await bus.publish({ id: 'late-2', data: encoder.encode('late-2') });

    const secondRun: { id: string; text: string }[] = [];
    await bus.consume({ durable: 'compact' }, async (d) => {
      secondRun.push({ id: d.id, text: new TextDecoder().decode(d.data) });
    });
    await waitUntil('the late messages', () => secondRun.length === 2);
    await bus.close();

    expect(firstRun).toEqual(ids);
    expect(secondRun).toEqual([
      { id: 'late-1', text: 'late-1' },
      { id: 'late-2', text: 'late-2' },
    ]);
  });
  it('starts a durable created later at the oldest message still held, not at an emptied slot', async () => {
    const bus = createMemoryBus();
    const encoder = new TextEncoder();
    const seen: Record<string, string[]> = { first: [], second: [] };
    await bus.consume({ durable: 'first' }, async (d) => {
      seen.first!.push(d.id);
    });
    for (const id of ['a', 'b', 'c']) await bus.publish({ id, data: encoder.encode(id) });
    await waitUntil('the first durable acknowledging a, b and c', () => seen.first!.length === 3);

    await bus.consume({ durable: 'second' }, async (d) => {
      seen.second!.push(d.id);
    });
    await bus.publish({ id: 'd', data: encoder.encode('d') });
    await waitUntil('d reaching both durables', () => seen.first!.length === 4 && seen.second!.length === 1);
    await bus.close();

    expect(seen).toEqual({ first: ['a', 'b', 'c', 'd'], second: ['d'] });
  });
});

describe('connectNatsBus', () => {
  it('names the URL, without its password, when it cannot connect', async () => {
    const error: unknown = await connectNatsBus({ url: 'nats://agent:s3cret@127.0.0.1:1' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(NatsBusError);
    expect(error).toMatchObject({ code: 'CONNECT_FAILED' });
    expect(String(error)).toMatch(/cannot connect to NATS at nats:\/\/\*\*\*@127\.0\.0\.1:1\b/);
    expect(String(error)).not.toContain('s3cret');
  });
});

describe('in-process bus bounds', () => {
  it('refuses to publish beyond maxRetained unconsumed messages instead of growing without bound', async () => {
    const bus = createMemoryBus({ maxRetained: 3 });
    for (let i = 0; i < 3; i++) await bus.publish({ id: `m${i}`, data: Buffer.from([i]) });
    await expect(bus.publish({ id: 'm3', data: Buffer.from([3]) })).rejects.toBeInstanceOf(MemoryBusFullError);
    await bus.close();
  });

  it('bounds the bytes held too, and frees a message once every durable acknowledged it', async () => {
    const bus = createMemoryBus({ maxRetainedBytes: 10 });
    const seen: string[] = [];
    const consumer = await bus.consume({ durable: 'ingest', maxInFlight: 4 }, async (delivery) => void seen.push(delivery.id));
    await bus.publish({ id: 'a', data: Buffer.alloc(6) });
    await waitUntil('the first delivery', () => seen.length === 1);
    await new Promise((resolve) => setImmediate(resolve));
    // 'a' was acknowledged, so its 6 bytes no longer count: 6 + 4 fit, and then nothing more does until 'b' and 'c' are consumed.
    await consumer.stop();
    await bus.publish({ id: 'b', data: Buffer.alloc(6) });
    await bus.publish({ id: 'c', data: Buffer.alloc(4) });
    await expect(bus.publish({ id: 'd', data: Buffer.alloc(1) })).rejects.toThrow(/holds 10 bytes of unconsumed messages/);
    await bus.consume({ durable: 'ingest', maxInFlight: 4 }, async (delivery) => void seen.push(delivery.id));
    await waitUntil('b and c', () => seen.length === 3);
    // Acknowledged on the microtasks after the handler returned.
    await new Promise((resolve) => setImmediate(resolve));
    await bus.publish({ id: 'd', data: Buffer.alloc(10) });
    await waitUntil('d', () => seen.length === 4);
    expect(seen).toEqual(['a', 'b', 'c', 'd']);
    await bus.close();
  });
});
