/**
 * Ingest's AppendBatcher on the PostgreSQL event store: a backlog of one stream goes in appends of
 * at most MAX_EVENTS_PER_APPEND, oldest first, and each append settles its own callers as it
 * commits, before the next append starts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { AppendBatcher, MAX_EVENTS_PER_APPEND } from '../../src/ingest/batcher.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { decision } from '../support/decisions.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await freshDatabase('append_batcher');
  store = await createPostgresEventStore(db.url, { poolSize: 2 });
});

afterAll(async () => {
  await store.close();
  await db.drop();
});

describe('AppendBatcher', () => {
  it('appends a backlog in bounded appends, oldest first, settling each append’s callers as it commits', async () => {
    const stream = 'audit-prj_appendbatcher00000000000000';
    const count = 2 * MAX_EVENTS_PER_APPEND + 500;
    const [d] = fc.sample(decision, { numRuns: 1, seed: 1 });
    const events = Array.from({ length: count }, (_, i) =>
      encodeEvent(StatementDecided, d!, { event_id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, correlation_id: 'test', actor: 'ingest', at: d!.ts }),
    );
    const commits: [number, number][] = [];
    const batcher = new AppendBatcher(store, async (_stream, before, after) => {
      commits.push([before, after]);
    });
    const appendsCommittedWhenSettled: number[] = [];
    await Promise.all(events.map((event) => batcher.append(stream, event).then(() => appendsCommittedWhenSettled.push(commits.length))));
    expect(commits).toEqual([
      [0, MAX_EVENTS_PER_APPEND],
      [MAX_EVENTS_PER_APPEND, 2 * MAX_EVENTS_PER_APPEND],
      [2 * MAX_EVENTS_PER_APPEND, count],
    ]);
    expect(appendsCommittedWhenSettled).toEqual(events.map((_, i) => Math.floor(i / MAX_EVENTS_PER_APPEND) + 1));
    expect((await store.readStream(stream)).map((e) => e.id)).toEqual(events.map((e) => e.id));
  });

  it('appends the events of calls that straddle the bound in bounded appends, in order, settling each call once all of its events committed', async () => {
    const stream = 'audit-prj_appendbatchercalls0000000000';
    const [d] = fc.sample(decision, { numRuns: 1, seed: 3 });
    const events = Array.from({ length: 3 * 700 }, (_, i) =>
      encodeEvent(StatementDecided, d!, { event_id: `00000000-0000-4000-8002-${String(i).padStart(12, '0')}`, correlation_id: 'test', actor: 'ingest', at: d!.ts }),
    );
    const commits: [number, number][] = [];
    const batcher = new AppendBatcher(store, async (_stream, before, after) => {
      commits.push([before, after]);
    });
    const committedWhenSettled: number[] = [];
    const calls = [0, 1, 2].map((call) => batcher.appendAll(stream, events.slice(call * 700, (call + 1) * 700)).then(() => committedWhenSettled.push(commits.at(-1)![1])));
    await Promise.all(calls);
    expect(commits).toEqual([
      [0, MAX_EVENTS_PER_APPEND],
      [MAX_EVENTS_PER_APPEND, 2 * MAX_EVENTS_PER_APPEND],
      [2 * MAX_EVENTS_PER_APPEND, 2_100],
    ]);
    // The second call's last events went in the second append, the third's in the third.
    expect(committedWhenSettled).toEqual([MAX_EVENTS_PER_APPEND, 2 * MAX_EVENTS_PER_APPEND, 2_100]);
    expect((await store.readStream(stream)).map((e) => e.id)).toEqual(events.map((e) => e.id));
  });

  it('with a linger, an idle stream’s append starts at once and the events of the next linger share one append', async () => {
    const stream = 'audit-prj_appendbatcherlinger000000000';
    const [d] = fc.sample(decision, { numRuns: 1, seed: 2 });
    const events = Array.from({ length: 4 }, (_, i) =>
      encodeEvent(StatementDecided, d!, { event_id: `00000000-0000-4000-8001-${String(i).padStart(12, '0')}`, correlation_id: 'test', actor: 'ingest', at: d!.ts }),
    );
    const commits: [number, number][] = [];
    const batcher = new AppendBatcher(store, async (_stream, before, after) => {
      commits.push([before, after]);
    }, 2_000);
    const began = performance.now();
    await batcher.append(stream, events[0]!);
    const first = performance.now() - began;
    const rest: Promise<void>[] = [];
    for (const event of events.slice(1)) {
      rest.push(batcher.append(stream, event));
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    await Promise.all(rest);
    expect(first).toBeLessThan(2_000);
    expect(commits).toEqual([
      [0, 1],
      [1, 4],
    ]);
    expect((await store.readStream(stream)).map((e) => e.id)).toEqual(events.map((e) => e.id));
  });
});
