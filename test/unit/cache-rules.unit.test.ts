import { beforeAll, describe, expect, it } from 'vitest';
import { cacheControls, NO_OVERRIDE, type CacheControlsCommand, type CacheControlsState } from '../../commands/cache/cache-controls.js';
import { DomainError } from '../../commands/domain-error.js';
import type { CacheControlsRow } from '../../projections/cache-controls.js';
import { shapeRollup } from '../../projections/cache-shapes.js';
import { purgeOnRequest, ResultCaches } from '../../proxy/cache/caches.js';
import { shapeRuleOf } from '../../proxy/cache/rules.js';
import { ResultStore } from '../../proxy/cache/store.js';
import { statementIdentity } from '../../proxy/policy/identity.js';
import { loadParser } from '../../proxy/policy/parser.js';
import type { AuditEntryContent } from '../../src/audit/entry.js';
import { latencyBucket } from '../../src/audit/latency-buckets.js';
import { queryTypeOf, recommend } from '../../src/cache/recommendation.js';

beforeAll(loadParser);

describe('the recommendation formula', () => {
  const read = { queryType: 'read' as const, refreshes: 5 };
  it('scores 0.4·frequency + 0.3·latency + 0.3·stability into great, good, fair, poor', () => {
    expect(recommend({ ...read, callCount: 1000, avgLatencyMs: 50, stabilityRate: 1 })).toEqual({ score: 1, recommendation: 'great' });
    expect(recommend({ ...read, callCount: 1000, avgLatencyMs: 0, stabilityRate: 1 }).recommendation).toBe('good');
    expect(recommend({ ...read, callCount: 10, avgLatencyMs: 5, stabilityRate: 1 }).recommendation).toBe('fair');
    expect(recommend({ ...read, callCount: 10, avgLatencyMs: 0, stabilityRate: 0 }).recommendation).toBe('poor');
    expect(recommend({ ...read, callCount: 100, avgLatencyMs: 25, stabilityRate: 0.5 }).score).toBeCloseTo(0.4 * (2 / 3) + 0.3 * 0.5 + 0.3 * 0.5, 10);
  });

  it('is poor for anything but a read, a single call, or a shape never refreshed', () => {
    const best = { callCount: 10_000, avgLatencyMs: 500, stabilityRate: 1 };
    expect(recommend({ ...best, queryType: 'write', refreshes: 5 }).recommendation).toBe('poor');
    expect(recommend({ ...best, queryType: 'read', refreshes: 0 }).recommendation).toBe('poor');
    expect(recommend({ ...best, queryType: 'read', refreshes: 5, callCount: 1 }).recommendation).toBe('poor');
    expect(['select', 'update', 'copy', 'set', ''].map(queryTypeOf)).toEqual(['read', 'write', 'write', 'other', 'other']);
  });
});

const entry = (cache_status: AuditEntryContent['cache_status'], rows: number, at: number, more: Partial<AuditEntryContent> = {}) =>
  ({ project_id: 'prj_1', credential_id: 'agt_1', query_hash: 'ab'.repeat(8), normalized_sql: 'select $1', statement_kind: 'select', event: 'query', cache_status, rows_returned: rows, bytes_out: rows * 10, latency_us: 1000, ts: new Date(at * 1000).toISOString(), ...more }) as AuditEntryContent;

describe('the shapes the audit projection rolls up', () => {
  it('counts refreshes (runs upstream after the first) and those that returned the run before’s rows and bytes; hits are no runs', () => {
    const shapes = shapeRollup([entry('miss', 3, 1), entry('hit', 3, 2), entry('miss', 3, 3), entry('bypass', 4, 4), entry('stale', 4, 5), entry('miss', 4, 6, { latency_us: 3 })]);
    expect(shapes).toHaveLength(1);
    expect(shapes[0]).toMatchObject({ calls: 6, runs: 4, refreshes: 3, same_results: 2, first_rows: 3, first_bytes: 30, last_rows: 4, last_bytes: 40, timed: 6, latency_us: 5003, bytes_out: 210 });
    // The histogram held densely: five latencies in the bucket of 1,000 µs, one in that of 3 µs, zeros between.
    const buckets = shapes[0]!.latency_buckets;
    expect(buckets).toHaveLength(latencyBucket(1000) + 1);
    expect(buckets.flatMap((count, bucket) => (count === 0 ? [] : [[bucket, count]]))).toEqual([[3, 1], [latencyBucket(1000), 5]]);
  });

  it('keeps credentials and projects apart, and passes over refusals and entries without a hash', () => {
    const shapes = shapeRollup([
      entry('miss', 1, 1), entry('miss', 1, 2, { credential_id: 'agt_2' }), entry('miss', 1, 3, { project_id: 'prj_2' }),
      entry('none', 0, 4, { event: 'blocked' }), entry('miss', 1, 5, { query_hash: '' }),
    ]);
    expect(shapes.map((row) => [row.project_id, row.credential, row.calls, row.refreshes])).toEqual([['prj_1', 'agt_1', 1, 0], ['prj_1', 'agt_2', 1, 0], ['prj_2', 'agt_1', 1, 0]]);
  });
});

describe('a database’s cache controls (command)', () => {
  const run = (state: CacheControlsState, command: CacheControlsCommand) => cacheControls.decide(state, command, '2026-01-01T00:00:00.000Z');
  const set = (change: object, ifVersion?: number): CacheControlsCommand => ({ kind: 'set_rule', projectId: 'prj_1', databaseId: 'db_1', queryHash: 'ab'.repeat(8), change, ...(ifVersion === undefined ? {} : { ifVersion }) });

  it('sets a shape’s override whole, refuses a stale If-Match, and changes nothing when it already is so', () => {
    const first = run(cacheControls.initial, set({ cache_enabled: false }, 0));
    expect(first).toEqual([{ definition: expect.objectContaining({ type: 'CacheRuleSet.v1' }), data: { project_id: 'prj_1', database_id: 'db_1', query_hash: 'ab'.repeat(8), cache_enabled: false, cache_ttl_seconds: null, cache_swr_seconds: null } }]);
    const state: CacheControlsState = { rules: new Map([['ab'.repeat(8), { ...NO_OVERRIDE, cache_enabled: false, version: 1 }]]) };
    expect(run(state, set({ cache_ttl_seconds: 5 }, 0))).toBeInstanceOf(DomainError);
    expect(run(state, set({ cache_enabled: false }, 1))).toEqual([]);
    expect(run(state, set({ cache_ttl_seconds: 5 }, 1))).toMatchObject([{ data: { cache_enabled: false, cache_ttl_seconds: 5, cache_swr_seconds: null } }]);
    expect(run(state, { kind: 'purge', projectId: 'prj_1', databaseId: 'db_1' })).toMatchObject([{ data: { project_id: 'prj_1', database_id: 'db_1' } }]);
  });
});

describe('the proxy’s use of the controls', () => {
  const sql = 'select total from orders where id = 7';
  const controls = (rule: Partial<CacheControlsRow['rules'][string]> | undefined, purges = 0): CacheControlsRow => ({
    database_id: 'db_1', project_id: 'prj_1', purges, purged_at: null,
    rules: rule ? { [statementIdentity(sql).query_hash]: { cache_enabled: null, cache_ttl_seconds: null, cache_swr_seconds: null, version: 1, updated_at: '2026-01-01T00:00:00.000Z', ...rule } } : {},
  });

  it('a shape’s rule: bypass when disabled or with a ttl of 0, its own times otherwise, nothing for other shapes', () => {
    expect(shapeRuleOf(undefined, sql)).toBeUndefined();
    expect(shapeRuleOf(controls(undefined, 3), sql)).toBeUndefined();
    expect(shapeRuleOf(controls({ cache_enabled: false }), sql)).toEqual({ bypass: true });
    expect(shapeRuleOf(controls({ cache_ttl_seconds: 0 }), sql)).toEqual({ bypass: true });
    expect(shapeRuleOf(controls({ cache_ttl_seconds: 5, cache_swr_seconds: 0 }), sql)).toEqual({ bypass: false, timing: { ttlMs: 5000, swrMs: 0 } });
    // Another literal is the same shape; another statement is not.
    expect(shapeRuleOf(controls({ cache_enabled: false }), 'select total from orders where id = 8')).toEqual({ bypass: true });
    expect(shapeRuleOf(controls({ cache_enabled: false }), 'select id from orders')).toBeUndefined();
  });

  it('an entry stored with its own times lives by them; the others by the store’s', () => {
    let now = 0;
    const store = new ResultStore({ maxEntries: 10, maxBytes: 1_000_000, ttlMs: 60_000, swrMs: 0 }, { evicted: () => undefined, bytes: () => undefined }, () => now);
    const result = { reply: Buffer.from('x'), rows: 1, tables: [] };
    store.store('short', result, store.generation, { ttlMs: 1_000, swrMs: 0 });
    store.store('long', result, store.generation);
    now = 999;
    expect([store.lookup('short').outcome, store.lookup('long').outcome]).toEqual(['hit', 'hit']);
    now = 1_000;
    expect([store.lookup('short').outcome, store.lookup('long').outcome]).toEqual(['miss', 'hit']);
  });

  it('a purge the view folds drops the database’s entries and keeps no result started before it', () => {
    const config = { enabled: true, ttl_seconds: 60, max_entries: 10, swr_seconds: 0 };
    const caches = new ResultCaches(() => config, { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined });
    let listener: ((key: string, before: { purges: number } | undefined, after: { purges: number } | undefined) => void) | undefined;
    purgeOnRequest({ onChange: (heard) => (listener = heard) }, caches);
    const store = caches.storeOf('db_1')!;
    const result = { reply: Buffer.from('x'), rows: 1, tables: ['public.orders'] };
    store.store('a', result, store.generation);
    const started = store.generation;
    listener!('db_1', { purges: 1 }, { purges: 1 });
    expect(store.size).toBe(1);
    listener!('db_1', { purges: 1 }, { purges: 2 });
    expect(store.size).toBe(0);
    expect(store.store('b', result, started)).toBe(false);
  });
});
