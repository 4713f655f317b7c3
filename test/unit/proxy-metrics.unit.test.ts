import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { cacheMetricsOf } from '../../proxy/cache/caches.js';
import { createProxyMetrics } from '../../proxy/metrics.js';
import { TallyHistogram } from '../../src/tally-histogram.js';

const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5];

function registry(): Registry {
  const made = new Registry();
  made.setDefaultLabels({ role: 'proxy' });
  return made;
}

/** Bounds themselves, values between and beyond them, negatives and zero. */
const observation = fc.oneof(fc.constantFrom(...BUCKETS, 0, -1, 7), fc.double({ min: -10, max: 10, noNaN: true }));

describe('TallyHistogram', () => {
  it('is exposed exactly as a prom-client Histogram fed the same observations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 300 }), fc.boolean(), async (values, resetHalfway) => {
        const ours = registry();
        const theirs = registry();
        const tally = new TallyHistogram({ name: 'h_seconds', help: 'latency', buckets: BUCKETS, registers: [ours] });
        const reference = new Histogram({ name: 'h_seconds', help: 'latency', buckets: BUCKETS, registers: [theirs] });
        values.forEach((value, index) => {
          if (resetHalfway && index === Math.floor(values.length / 2)) {
            tally.reset();
            reference.reset();
          }
          tally.observe(value);
          reference.observe(value);
        });
        expect(await ours.metrics()).toBe(await theirs.metrics());
        expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a value that is not a finite number, as prom-client does, and counts nothing', async () => {
    const ours = registry();
    const tally = new TallyHistogram({ name: 'h_seconds', help: 'latency', buckets: BUCKETS, registers: [ours] });
    expect(() => tally.observe(Number.NaN)).toThrow(TypeError);
    expect(() => tally.observe(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(await ours.metrics()).toContain('h_seconds_count{role="proxy"} 0');
  });
});

describe('proxy metrics', () => {
  it('adds the statement and byte tallies to their counters at each scrape, exactly once', async () => {
    const made = registry();
    const metrics = createProxyMetrics(made);
    metrics.statementsOf('query').inc();
    metrics.statementsOf('query').inc();
    metrics.statementsOf('blocked').inc();
    metrics.bytesOut.inc(1_000);
    metrics.bytesOut.inc(24);
    metrics.latency.observe(0.0003);
    const first = await made.metrics();
    expect(first).toContain('pgward_proxy_statements_total{event="query",role="proxy"} 2');
    expect(first).toContain('pgward_proxy_statements_total{event="blocked",role="proxy"} 1');
    expect(first).toContain('pgward_proxy_bytes_out_total{role="proxy"} 1024');
    expect(first).toContain('pgward_proxy_statement_seconds_bucket{le="0.0005",role="proxy"} 1');
    expect(first).toContain('pgward_proxy_statement_seconds_count{role="proxy"} 1');

    metrics.statementsOf('query').inc();
    const second = await made.metrics();
    expect(second).toContain('pgward_proxy_statements_total{event="query",role="proxy"} 3');
    expect(second).toContain('pgward_proxy_statements_total{event="blocked",role="proxy"} 1');
    expect(second).toContain('pgward_proxy_bytes_out_total{role="proxy"} 1024');
    expect(await made.metrics()).toBe(second);
  });

  it('totals equal the increments for any interleaving of increments and scrapes', async () => {
    const step = fc.oneof(fc.record({ event: fc.constantFrom('query', 'masked', 'blocked', 'error') }), fc.record({ bytes: fc.nat(10_000) }), fc.constant('scrape' as const));
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60 }), async (steps) => {
        const made = registry();
        const metrics = createProxyMetrics(made);
        const expected = new Map<string, number>();
        let bytes = 0;
        for (const s of steps) {
          if (s === 'scrape') await made.metrics();
          else if ('event' in s) {
            metrics.statementsOf(s.event).inc();
            expected.set(s.event, (expected.get(s.event) ?? 0) + 1);
          } else {
            metrics.bytesOut.inc(s.bytes);
            bytes += s.bytes;
          }
        }
        const text = await made.metrics();
        for (const [event, count] of expected) expect(text).toContain(`pgward_proxy_statements_total{event="${event}",role="proxy"} ${count}\n`);
        expect(text).toContain(`pgward_proxy_bytes_out_total{role="proxy"} ${bytes}\n`);
      }),
      { numRuns: 100 },
    );
  });

  it('adds the result cache’s lookups, cold skips, evictions and bytes to their metrics at each scrape', async () => {
    const made = registry();
    const cache = cacheMetricsOf(createProxyMetrics(made));
    for (const outcome of ['hit', 'hit', 'miss', 'bypass', 'hit'] as const) cache.lookup(outcome);
    cache.skipped();
    cache.evicted(2);
    cache.bytes(700);
    cache.bytes(-200);
    const first = await made.metrics();
    expect(first).toContain('pgward_proxy_cache_lookups_total{outcome="hit",role="proxy"} 3\n');
    expect(first).toContain('pgward_proxy_cache_lookups_total{outcome="miss",role="proxy"} 1\n');
    expect(first).toContain('pgward_proxy_cache_lookups_total{outcome="bypass",role="proxy"} 1\n');
    expect(first).not.toContain('outcome="stale"');
    expect(first).toContain('pgward_proxy_cache_cold_skips_total{role="proxy"} 1\n');
    expect(first).toContain('pgward_proxy_cache_evictions_total{role="proxy"} 2\n');
    expect(first).toContain('pgward_proxy_cache_bytes{role="proxy"} 500\n');

    cache.lookup('stale');
    cache.bytes(-500);
    const second = await made.metrics();
    expect(second).toContain('pgward_proxy_cache_lookups_total{outcome="hit",role="proxy"} 3\n');
    expect(second).toContain('pgward_proxy_cache_lookups_total{outcome="stale",role="proxy"} 1\n');
    expect(second).toContain('pgward_proxy_cache_evictions_total{role="proxy"} 2\n');
    expect(second).toContain('pgward_proxy_cache_bytes{role="proxy"} 0\n');
  });
});
