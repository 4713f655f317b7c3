/**
 * Invalidations shared between the caches of a deployment over the fan-out (ResultCaches.share):
 * a write one cache saw drops the entries that read it in the others (the proxy's, the MCP's),
 * every table when the write's reach is unknown; a cache does not apply its own note twice, and a
 * note it cannot read changes nothing.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryFanout } from '../../src/bus/fanout.js';
import { ResultCaches } from '../../proxy/cache/caches.js';
import type { CachedResult } from '../../proxy/cache/store.js';

const CONFIG = { enabled: true, ttl_seconds: 60, max_entries: 100, swr_seconds: 0 };
const NO_METRICS = { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined };
const result = (tables: readonly string[]): CachedResult => ({ reply: Buffer.from('row'), rows: 1, tables });
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

function cacheWith(entries: Record<string, readonly string[]>): ResultCaches {
  const caches = new ResultCaches(() => CONFIG, NO_METRICS);
  const store = caches.storeOf('db1')!;
  for (const [key, tables] of Object.entries(entries)) store.store(key, result(tables), store.generation);
  return caches;
}

const outcomes = (caches: ResultCaches, keys: readonly string[]): string[] => keys.map((key) => caches.existing('db1')!.lookup(key).outcome);

describe('invalidations shared over the fan-out', () => {
  it('a write one cache saw drops the entries that read its tables in the other, and in its own', async () => {
    const fanout = createMemoryFanout();
    const proxy = cacheWith({ orders: ['public.orders'], customers: ['public.customers'] });
    const mcp = cacheWith({ orders: ['public.orders'], customers: ['public.customers'] });
    proxy.share(fanout);
    mcp.share(fanout);
    proxy.invalidate('db1', ['public.orders']);
    expect(outcomes(proxy, ['orders', 'customers'])).toEqual(['miss', 'hit']);
    await settle();
    expect(outcomes(mcp, ['orders', 'customers'])).toEqual(['miss', 'hit']);
  });

  it('a write of unknown reach (DDL) drops every entry of the database elsewhere, and a result started before it is not stored', async () => {
    const fanout = createMemoryFanout();
    const proxy = cacheWith({});
    const mcp = cacheWith({ orders: ['public.orders'], customers: ['public.customers'] });
    proxy.share(fanout);
    mcp.share(fanout);
    const started = mcp.existing('db1')!.generation;
    proxy.invalidate('db1', undefined);
    await settle();
    expect(outcomes(mcp, ['orders', 'customers'])).toEqual(['miss', 'miss']);
    expect(mcp.existing('db1')!.store('late', result(['public.orders']), started)).toBe(false);
  });

  it('a cache does not apply its own note again; after stop, notes neither go nor come', async () => {
    const fanout = createMemoryFanout();
    const proxy = cacheWith({});
    const mcp = cacheWith({ orders: ['public.orders'] });
    proxy.share(fanout);
    const stop = mcp.share(fanout);
    const generation = proxy.existing('db1')!.generation;
    proxy.invalidate('db1', ['public.orders']);
    await settle();
    expect(proxy.existing('db1')!.generation).toBe(generation + 1);
    mcp.existing('db1')!.store('orders', result(['public.orders']), mcp.existing('db1')!.generation);
    stop();
    proxy.invalidate('db1', ['public.orders']);
    await settle();
    expect(outcomes(mcp, ['orders'])).toEqual(['hit']);
  });

  it('ignores a note it cannot read', async () => {
    const fanout = createMemoryFanout();
    const mcp = cacheWith({ orders: ['public.orders'] });
    mcp.share(fanout);
    for (const note of ['not json', '{"databaseId":"db1"}', '{"origin":"x","databaseId":"db1","tables":"public.orders"}']) fanout.publish(new TextEncoder().encode(note));
    await settle();
    expect(outcomes(mcp, ['orders'])).toEqual(['hit']);
  });
});
