import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { NO_CACHE_HINT, uncacheable } from '../../proxy/cache/cacheable.js';
import { ResultCaches } from '../../proxy/cache/caches.js';
import { cachedReply, Capture, paramTypesOf, SessionCache, writtenTables } from '../../proxy/cache/session-cache.js';
import { entryBytes, ResultStore, type CachedResult, type StoreLimits } from '../../proxy/cache/store.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { allowedUnder, openPolicy } from '../support/allowed-decision.js';
import { encodeCommandComplete, encodeErrorResponse, encodeReadyForQuery, BackendScanner } from '../../proxy/protocol/backend.js';

beforeAll(loadParser);

const result = (tables: readonly string[], size = 10): CachedResult => ({ reply: Buffer.alloc(size, 1), rows: 1, tables });
const LIMITS: StoreLimits = { maxEntries: 3, maxBytes: 1_000_000, ttlMs: 1_000, swrMs: 500 };

function storeAt(limits: Partial<StoreLimits> = {}) {
  let now = 0;
  const counts = { evicted: 0, bytes: 0 };
  const store = new ResultStore({ ...LIMITS, ...limits }, { evicted: (n) => (counts.evicted += n), bytes: (delta) => (counts.bytes += delta) }, () => now);
  return { store, counts, at: (ms: number) => void (now = ms) };
}

describe('the result store', () => {
  it('evicts the least recently used entry beyond max_entries', () => {
    const { store, counts } = storeAt();
    for (const key of ['a', 'b', 'c']) store.store(key, result([]), store.generation);
    expect(store.lookup('a').outcome).toBe('hit');
    store.store('d', result([]), store.generation);
    expect(store.lookup('b').outcome).toBe('miss');
    expect(['a', 'c', 'd'].map((key) => store.lookup(key).outcome)).toEqual(['hit', 'hit', 'hit']);
    expect(counts.evicted).toBe(1);
    expect(store.size).toBe(3);
  });

  it('holds no more memory after hit upon hit on a store that never fills', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { store } = storeAt({ maxEntries: 10_000, ttlMs: 60_000 });
    for (let index = 0; index < 100; index++) store.store(`key ${index}`, result(['public.orders']), store.generation);
    const hits = (count: number) => {
      let found = 0;
      for (let index = 0; index < count; index++) if (store.lookup(`key ${index % 100}`).outcome === 'hit') found++;
      expect(found).toBe(count);
    };
    hits(50_000);
    gc();
    const before = process.memoryUsage().heapUsed;
    hits(400_000);
    gc();
    // Each hit used to leave a Map slot that a kept iterator held on to: about 60 bytes a hit, 24 MB here.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(4_000_000);
  });

  it('evicts for the byte bound, and refuses an entry larger than it', () => {
    const one = entryBytes('a', result([], 100));
    const { store, counts } = storeAt({ maxBytes: one * 2 + 1 });
    store.store('a', result([], 100), 0);
    store.store('b', result([], 100), 0);
    store.store('c', result([], 100), 0);
    expect(store.size).toBe(2);
    expect(store.lookup('a').outcome).toBe('miss');
    expect(store.store('big', result([], one * 3), 0)).toBe(false);
    expect(store.bytes).toBe(one * 2);
    expect(counts.bytes).toBe(one * 2);
  });

  it('serves fresh entries for ttl, then stale ones while exactly one refresh runs, then none', () => {
    const { store, at } = storeAt();
    store.store('k', result([]), 0);
    at(999);
    expect(store.lookup('k').outcome).toBe('hit');
    at(1_000);
    // The first caller past the ttl refreshes; everyone else gets the stale entry meanwhile.
    expect(store.lookup('k').outcome).toBe('miss');
    expect(store.lookup('k').outcome).toBe('stale');
    expect(store.lookup('k').outcome).toBe('stale');
    // A refresh that failed hands the refresh to the next caller.
    store.abandon('k');
    expect(store.lookup('k').outcome).toBe('miss');
    expect(store.lookup('k').outcome).toBe('stale');
    store.store('k', result([]), store.generation);
    expect(store.lookup('k').outcome).toBe('hit');
    at(2_000 + 1_500);
    expect(store.lookup('k').outcome).toBe('miss');
    expect(store.size).toBe(0);
  });

  it('keeps exactly the least recently used order over many evictions, lookups and invalidations (fast-check against a model)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('store' as const), key: fc.integer({ min: 0, max: 12 }) }),
      fc.record({ kind: fc.constant('lookup' as const), key: fc.integer({ min: 0, max: 12 }) }),
      fc.record({ kind: fc.constant('invalidate' as const), key: fc.integer({ min: 0, max: 12 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const { store } = storeAt({ maxEntries: 4 });
        // The model: keys from least to most recently used.
        let model: string[] = [];
        for (const { kind, key } of ops) {
          const name = `k${key}`;
          const table = `public.t${key % 3}`;
          if (kind === 'store') {
            store.store(name, result([table]), store.generation);
            model = [...model.filter((k) => k !== name), name].slice(-4);
          } else if (kind === 'lookup') {
            expect(store.lookup(name).outcome).toBe(model.includes(name) ? 'hit' : 'miss');
            if (model.includes(name)) model = [...model.filter((k) => k !== name), name];
          } else {
            store.invalidate([table]);
            model = model.filter((k) => Number(k.slice(1)) % 3 !== key % 3);
          }
          expect(store.size).toBe(model.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('admits every miss while it has room; once full, a key at its second miss only, and a refresh always', () => {
    const { store, at } = storeAt({ maxEntries: 2 });
    expect(store.admits('a')).toBe(true);
    store.store('a', result([]), 0);
    store.store('b', result([]), 0);
    // Full: a key seen once is not captured (no copy, no eviction); seen again, it is.
    expect(store.admits('c')).toBe(false);
    expect(store.admits('d')).toBe(false);
    expect(store.admits('c')).toBe(true);
    expect(store.admits('d')).toBe(true);
    expect(store.admits('c')).toBe(false);
    // A stale entry's refresh is admitted at once.
    at(1_000);
    expect(store.lookup('a').outcome).toBe('miss');
    expect(store.admits('a')).toBe(true);
    store.invalidate(undefined);
    expect(store.admits('e')).toBe(true);
  });

  it('drops the entries that read a written table, and keeps no result started before a write', () => {
    const { store } = storeAt({ maxEntries: 10 });
    store.store('orders', result(['public.orders']), 0);
    store.store('join', result(['public.orders', 'public.customers']), 0);
    store.store('customers', result(['public.customers']), 0);
    const started = store.generation;
    store.invalidate(['public.orders']);
    expect(['orders', 'join', 'customers'].map((key) => store.lookup(key).outcome)).toEqual(['miss', 'miss', 'hit']);
    expect(store.store('orders', result(['public.orders']), started)).toBe(false);
    expect(store.store('orders', result(['public.orders']), store.generation)).toBe(true);
    store.invalidate(undefined);
    expect(store.size).toBe(0);
  });
});

describe('the caches of a proxy', () => {
  const metrics = { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined };

  it('follow each database’s cache_config as it is now: off, no entries, no time, unparsable or unknown turn it off and drop its entries', () => {
    const on = { enabled: true, ttl_seconds: 60, max_entries: 10, swr_seconds: 30 };
    let config: unknown = on;
    const caches = new ResultCaches(() => config, metrics);
    const store = caches.storeOf('db_1')!;
    store.store('k', result([]), 0);
    config = { ...on };
    expect(caches.storeOf('db_1')).toBe(store);
    config = { ...on, max_entries: 1 };
    store.store('j', result([]), 0);
    expect(caches.storeOf('db_1')!.size).toBe(1);
    for (const off of [{ ...on, enabled: false }, { ...on, max_entries: 0 }, { ...on, ttl_seconds: 0 }, {}, null, undefined]) {
      config = on;
      caches.storeOf('db_1')!.store('k', result([]), 0);
      config = off;
      expect(caches.storeOf('db_1')).toBeUndefined();
      expect(caches.existing('db_1')).toBeUndefined();
    }
  });
});

const policy = openPolicy('pol_cache', { allow_catalog: true });
const allowed = (sql: string) => allowedUnder(policy, sql);

const OUTSIDE = { inTransaction: false, pinned: false };

describe('what is cacheable', () => {
  it.each([
    'select * from orders where id = 1',
    'select count(*), now(), current_date from orders',
    'select lower(customer), sum(total) from orders group by 1',
    'with recent as (select * from orders) select * from recent',
  ])('a read of stable and immutable functions outside a transaction: %s', (sql) => {
    expect(uncacheable(sql, allowed(sql), OUTSIDE)).toBeUndefined();
  });

  it.each([
    ['insert into orders values (1)', 'not_a_read'],
    ['update orders set total = 1', 'not_a_read'],
    ['with moved as (delete from orders returning *) select * from moved', 'not_a_read'],
    ['select * from orders for update', 'not_a_read'],
    ['create table t (id int)', 'not_a_read'],
    ['set statement_timeout = 1000', 'not_a_read'],
    ['declare c cursor for select * from orders', 'not_a_read'],
    ['fetch 10 from c', 'not_a_read'],
    ['begin', 'not_a_read'],
    ['select 1; select 2', 'not_a_read'],
    ['select random() from orders', 'function'],
    ['select gen_random_uuid()', 'function'],
    ['select clock_timestamp()', 'function'],
    ['select pg_is_in_recovery()', 'function'],
    ['select current_user', 'function'],
    ['select session_user, id from orders', 'function'],
    ['select current_schema', 'function'],
    ['select format_type(23, null)', 'function'],
    ['select * from orders tablesample system (10)', 'function'],
    ['/* pgward:no-cache */ select * from orders', 'hint'],
    ['select * from orders /*pgward:NO-CACHE*/', 'hint'],
  ])('never %s (%s)', (sql, why) => {
    expect(uncacheable(sql, allowed(sql), OUTSIDE)).toBe(why);
  });

  it('from the verdict the policy engine made with its own parse (a text is not parsed again)', () => {
    const sql = 'select * from orders where id = 1';
    expect(allowed(sql).stableCalls).toBe(true);
    expect(allowed('select random() from orders').stableCalls).toBe(false);
    expect(uncacheable(sql, { ...allowed(sql), stableCalls: false }, OUTSIDE)).toBe('function');
    expect(uncacheable('select random() from orders', { ...allowed('select random() from orders'), stableCalls: true }, OUTSIDE)).toBeUndefined();
  });

  it('not in a transaction, nor on a connection carrying session state', () => {
    const sql = 'select * from orders';
    expect(uncacheable(sql, allowed(sql), { inTransaction: true, pinned: false })).toBe('in_transaction');
    expect(uncacheable(sql, allowed(sql), { inTransaction: false, pinned: true })).toBe('session_state');
    expect(NO_CACHE_HINT.test('select 1 -- pgward:no-cache')).toBe(false);
  });

  it.each([
    ['update orders set total = 1', ['public.orders']],
    ['delete from customers where id = 1', ['public.customers']],
    ['truncate orders', ['public.orders']],
    ['insert into orders select * from orders', ['public.orders']],
    ['copy orders from stdin', ['public.orders']],
    ['alter table orders add column x int', undefined],
    ['drop table customers', undefined],
    ['select * from orders', null],
    ['set statement_timeout = 1000', null],
  ])('a write invalidates what it may change: %s', (sql, tables) => {
    expect(writtenTables(allowed(sql))).toEqual(tables);
  });
});

describe('a session’s writes', () => {
  it('invalidate as they are decided and again as their transaction ends, so a read between write and commit is not kept', () => {
    const caches = new ResultCaches(() => ({ enabled: true, ttl_seconds: 60, max_entries: 10, swr_seconds: 0 }), { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined });
    const store = caches.storeOf('db_1')!;
    const session = new SessionCache(caches);
    session.decided('db_1', allowed('update orders set total = 1'), 'cred_1');
    // Another session reads before the commit, and stores what it read.
    store.store('read', result(['public.orders']), store.generation);
    session.ready('T');
    expect(store.lookup('read').outcome).toBe('hit');
    session.ready('I');
    expect(store.lookup('read').outcome).toBe('miss');
  });
});

describe('a capture', () => {
  const scan = (bytes: Buffer) => new BackendScanner().scan(bytes);
  const rowDescription = Buffer.from([0x54, 0, 0, 0, 6, 0, 0]);
  const dataRow = Buffer.from([0x44, 0, 0, 0, 6, 0, 0]);
  const unexpected = (): void => {
    throw new Error('a simple-protocol result is kept or dropped at its own ReadyForQuery');
  };

  it('stores a whole result, and nothing of one that failed or was suspended', () => {
    const { store } = storeAt();
    const capture = new Capture(store, 'k', ['public.orders'], store.generation, 1_000, unexpected);
    for (const bytes of [rowDescription, dataRow, dataRow, encodeCommandComplete('SELECT 2'), encodeReadyForQuery('I')]) capture.tap(scan(bytes)[0]!, bytes);
    capture.settled(true);
    const found = store.lookup('k');
    expect(found.outcome === 'hit' && found.result).toEqual({ reply: Buffer.concat([rowDescription, dataRow, dataRow, encodeCommandComplete('SELECT 2')]), rows: 2, tables: ['public.orders'] });
    for (const ending of [encodeErrorResponse({ severity: 'ERROR', code: '22012', message: 'division by zero' }), Buffer.from([0x73, 0, 0, 0, 4])]) {
      const other = new Capture(store, 'bad', [], store.generation, 1_000, unexpected);
      other.tap(scan(dataRow)[0]!, dataRow);
      other.tap(scan(ending)[0]!, ending);
      other.settled(true);
      expect(store.lookup('bad').outcome).toBe('miss');
    }
    const large = new Capture(store, 'large', [], store.generation, 10, unexpected);
    large.tap(scan(dataRow)[0]!, dataRow);
    large.tap(scan(dataRow)[0]!, dataRow);
    large.settled(true);
    expect(store.lookup('large').outcome).toBe('miss');
  });

  it('keeps nothing read inside a transaction: its own ReadyForQuery (simple), or its batch’s (extended), must say idle', () => {
    const { store } = storeAt();
    const inTransaction = new Capture(store, 't', [], store.generation, 1_000, unexpected);
    for (const bytes of [rowDescription, dataRow, encodeCommandComplete('SELECT 1'), encodeReadyForQuery('T')]) inTransaction.tap(scan(bytes)[0]!, bytes);
    inTransaction.settled(true);
    expect(store.lookup('t').outcome).toBe('miss');
    const caches = new ResultCaches(() => ({ enabled: true, ttl_seconds: 60, max_entries: 10, swr_seconds: 0 }), { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined });
    const session = new SessionCache(caches);
    const sql = 'select * from orders';
    for (const [status, kept] of [['T', 'miss'], ['E', 'miss'], ['I', 'hit']] as const) {
      const plan = session.plan({ sql, decision: allowed(sql), databaseId: 'db_1', upstream: 'up_1', policy, catalogVersion: 'v1', sessionValues: undefined, protocol: 'extended', wire: { params: [Buffer.from(status)] }, ...OUTSIDE });
      if (plan.outcome !== 'miss') throw new Error(`expected a miss, got ${plan.outcome}`);
      for (const bytes of [dataRow, encodeCommandComplete('SELECT 1')]) plan.capture!.tap(scan(bytes)[0]!, bytes);
      plan.capture!.settled(true);
      session.ready(status);
      const again = session.plan({ sql, decision: allowed(sql), databaseId: 'db_1', upstream: 'up_1', policy, catalogVersion: 'v1', sessionValues: undefined, protocol: 'extended', wire: { params: [Buffer.from(status)] }, ...OUTSIDE });
      expect(again.outcome, status).toBe(kept);
    }
  });

  it('keeps a result as one buffer of its replies, copied from the chunks they came in, which a hit writes as it is', () => {
    const { store } = storeAt();
    const chunk = Buffer.concat([rowDescription, dataRow, encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I')]);
    const capture = new Capture(store, 'k', [], store.generation, 1_000, unexpected);
    let at = 0;
    for (const message of scan(chunk)) {
      capture.tap(message, chunk.subarray(at, message.end));
      at = message.end;
    }
    capture.settled(true);
    const replies = chunk.subarray(0, chunk.length - 6);
    const kept = Buffer.from(replies);
    // The connection's next read may reuse nothing of the chunk: the entry owns its bytes.
    chunk.fill(0);
    const found = store.lookup('k');
    if (found.outcome !== 'hit') throw new Error(`expected a hit, got ${found.outcome}`);
    expect(found.result.reply).toEqual(kept);
    expect(cachedReply(found.result, undefined)).toBe(found.result.reply);
    const idle = cachedReply(found.result, 'I');
    expect(idle).toEqual(Buffer.concat([kept, encodeReadyForQuery('I')]));
    expect(cachedReply(found.result, 'I')).toBe(idle);
    expect(cachedReply(found.result, 'T')).toEqual(Buffer.concat([kept, encodeReadyForQuery('T')]));
    expect(found.result.reply).toEqual(kept);
  });

  it('reads a Parse’s parameter types', () => {
    const parse = Buffer.concat([Buffer.from('P'), Buffer.alloc(4), Buffer.from('s1\0select $1, $2\0'), Buffer.from([0, 2, 0, 0, 0, 23, 0, 0, 0, 25])]);
    expect(paramTypesOf(parse)).toEqual([23, 25]);
  });
});
