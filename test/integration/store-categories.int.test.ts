/**
 * The PostgreSQL store's categories on the real server: append_events computes the category with
 * the same pattern as categories.ts and notifies that category's channel (and the all-events one)
 * with the new head position; a subscriber hears only its categories, and a lost LISTEN connection
 * costs it no event although nothing polls.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_EVENTS_CHANNEL, CATEGORY_PATTERN, categoryOf } from '../../src/store/categories.js';
import type { NewEvent, RecordedEvent } from '../../src/store/port.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let database: TestDatabase;
let store: PostgresEventStore;
let client: pg.Client;

const event = (): NewEvent => ({ id: randomUUID(), type: 'Tested.v1', data: Buffer.from('{}'), metadata: Buffer.from('{}') });

async function next(iterator: AsyncIterator<RecordedEvent>, timeoutMs = 5_000): Promise<RecordedEvent> {
  const result = await Promise.race([iterator.next(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no event in ${timeoutMs} ms`)), timeoutMs))]);
  if (result.done) throw new Error('subscription ended');
  return result.value;
}

beforeAll(async () => {
  database = await freshDatabase('store_categories');
  store = await createPostgresEventStore(database.url);
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await store?.close();
  await database?.drop();
});

describe('PostgreSQL store categories', () => {
  it('the server computes the category exactly as categories.ts does', async () => {
    const names = fc.sample(fc.oneof(fc.string({ maxLength: 50 }), fc.stringMatching(/^[A-Za-z0-9_]{0,45}-?[a-z0-9_-]{0,10}$/), fc.string({ unit: 'grapheme', maxLength: 20 })), { numRuns: 500, seed: 17 })
      .map((name) => name.replaceAll('\u0000', ''));
    const { rows } = await client.query<{ name: string; category: string | null }>('select name, substring(name from $2) as category from unnest($1::text[]) as name', [names, CATEGORY_PATTERN]);
    expect(rows.map((row) => row.category ?? undefined)).toEqual(names.map(categoryOf));
  });

  it('an append reports where its category stood before it (-1 for the first), other categories’ appends between not counting; a stream without a category and a retry report none', async () => {
    const project = randomUUID().slice(0, 8);
    const first = await store.append(`reported${project}-a`, [event(), event()], 'any');
    expect(first.categoryBefore).toBe(-1n);
    await store.append(`other${project}-a`, [event()], 'any');
    const batch = [event()];
    const second = await store.append(`reported${project}-b`, batch, 'any');
    expect(second.categoryBefore).toBe(first.position);
    expect(second.position).toBe(first.position + 2n);
    expect((await store.append(`reported${project}-b`, batch, 'any')).categoryBefore).toBeUndefined();
    expect((await store.append(`nocategory${project}`, [event()], 'any')).categoryBefore).toBeUndefined();
  });

  it('an append notifies its category’s channel and the all-events channel with the head position, and no other category', async () => {
    const heard: [string, string][] = [];
    client.on('notification', (message) => heard.push([message.channel, message.payload ?? '']));
    for (const channel of ['pgward_events:audit-', 'pgward_events:credential-', ALL_EVENTS_CHANNEL]) await client.query(`listen ${pg.escapeIdentifier(channel)}`);
    const audit = await store.append('audit-prj_1', [event(), event()], 'any');
    const uncategorized = await store.append('nocategory', [event()], 'any');
    await client.query('select 1');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toEqual([
      ['pgward_events:audit-', String(audit.position)],
      [ALL_EVENTS_CHANNEL, String(audit.position)],
      [ALL_EVENTS_CHANNEL, String(uncategorized.position)],
    ]);
    await client.query('unlisten *');
  });

  it('a subscriber whose LISTEN connection was lost still gets the events appended meanwhile, without any polling', async () => {
    const subscription = store.subscribe(await store.headPosition(), { streamPrefixes: ['credential-'] });
    const iterator = subscription[Symbol.asyncIterator]();
    const first = event();
    await store.append('credential-agt_1', [first], 'any');
    expect((await next(iterator)).id).toBe(first.id);
    const pending = next(iterator);
    // The first event came by the subscription's own read: its LISTEN connection may still be opening.
    const listening = `select pid from pg_stat_activity where application_name = 'pgward-listen' and datname = current_database()`;
    for (let waited = 0; (await client.query(listening)).rowCount === 0; waited += 20) {
      if (waited > 5_000) throw new Error('no LISTEN connection within 5 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const { rowCount } = await client.query(`select pg_terminate_backend(pid) from (${listening}) l`);
    expect(rowCount).toBe(1);
    const meanwhile = event();
    await store.append('credential-agt_1', [meanwhile], 'any');
    expect((await pending).id).toBe(meanwhile.id);
    await subscription.close();
  });
});
