/**
 * CategoryFeeds on the real PostgreSQL store: one writer's audit appends handed to every
 * subscription of the audit streams in the process, and a subscription that also reads another
 * category (anomaly_windows: `anomalyrules-`) given a batch only when no event of that category
 * lies beyond its position.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CategoryFeeds } from '../../src/store/category-feeds.js';
import type { NewEvent } from '../../src/store/port.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let db: TestDatabase;
let store: PostgresEventStore;
let n = 0;

beforeEach(async () => {
  db = await freshDatabase('category_feeds');
  store = await createPostgresEventStore(db.url, { poolSize: 2 });
});

afterEach(async () => {
  await store.close();
  await db.drop();
});

const events = (count: number): NewEvent[] =>
  Array.from({ length: count }, () => ({ id: `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`, type: 'T.v1', data: Buffer.from('{}'), metadata: Buffer.from('{}') }));

/** Appends to `stream` as ingest does, handing the append to the feeds; returns its last position. */
async function append(feeds: CategoryFeeds, stream: string, count: number): Promise<bigint> {
  const batch = events(count);
  const before = (await store.readStream(stream)).length;
  const result = await store.append(stream, batch, 'any');
  feeds.committed(stream, before, batch, result);
  return result.position;
}

describe('CategoryFeeds', () => {
  it('hands each append to every subscription of the category; none to a subscription of other categories', async () => {
    const feeds = new CategoryFeeds('audit-', store);
    const audit = feeds.feedFor(['audit-'])!;
    const windows = feeds.feedFor(['audit-', 'anomalyrules-'])!;
    expect(feeds.feedFor(['credential-'])).toBeUndefined();
    const first = await append(feeds, 'audit-prj_1', 3);
    expect((await audit.next(-1n))?.map((e) => e.position)).toEqual([0n, 1n, 2n]);
    expect((await windows.next(-1n))?.map((e) => e.position)).toEqual([0n, 1n, 2n]);
    await append(feeds, 'audit-prj_2', 2);
    expect((await windows.next(first))?.map((e) => [e.stream, e.revision])).toEqual([['audit-prj_2', 0], ['audit-prj_2', 1]]);
  });

  it('a subscription of two categories gets no batch when an event of its other category lies beyond its position: the store is read', async () => {
    const feeds = new CategoryFeeds('audit-', store);
    const audit = feeds.feedFor(['audit-'])!;
    const windows = feeds.feedFor(['audit-', 'anomalyrules-'])!;
    const first = await append(feeds, 'audit-prj_1', 2);
    // Another writer's event of the other category, then the writer's next append: the category audit- moved from `first` to it directly.
    await store.append('anomalyrules-prj_1', events(1), 'any');
    await append(feeds, 'audit-prj_1', 2);
    expect(await windows.next(first)).toBeUndefined();
    expect((await audit.next(first))?.map((e) => e.position)).toEqual([first + 2n, first + 3n]);
    // An event of a category it does not read changes nothing.
    const third = first + 3n;
    await store.append('credential-agt_1', events(1), 'any');
    await append(feeds, 'audit-prj_1', 1);
    expect((await windows.next(third))?.map((e) => e.position)).toEqual([third + 2n]);
  });
});
