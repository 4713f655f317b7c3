import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreError, type NewEvent } from '../../src/store/port.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { eventStoreContract } from './event-store.contract.js';

let database: TestDatabase | undefined;
const open = async (): Promise<PostgresEventStore> => {
  database ??= await freshDatabase('store_contract');
  return createPostgresEventStore(database.url);
};

eventStoreContract('postgres', open, { supportsTransactions: true });

/**
 * append_events looks ids up only once the unique index refused one (or the expected revision
 * did not hold): what a batch that meets stored ids gets is the same either way.
 */
describe('postgres event store: a batch that meets ids stored before', () => {
  const event = (): NewEvent => ({ id: randomUUID(), type: 'Tested.v1', data: Buffer.from('{}'), metadata: Buffer.from('{}') });
  const stream = (): string => `idc${randomUUID().slice(0, 8)}-s`;
  const codeOf = (promise: Promise<unknown>): Promise<string> => promise.then(() => 'appended', (error: unknown) => (error instanceof StoreError ? error.code : String(error)));

  it('is refused whole as EVENT_ID_CONFLICT when it mixes stored and new ids, or holds stored ids in another order or stream; nothing of it lands', async () => {
    const store = await open();
    try {
      const [a, b] = [event(), event()];
      const first = stream();
      await store.append(first, [a, b], 'no_stream');
      const head = await store.headPosition();
      expect(await codeOf(store.append(first, [event(), a], 'any'))).toBe('EVENT_ID_CONFLICT');
      expect(await codeOf(store.append(first, [b, event()], 1))).toBe('EVENT_ID_CONFLICT');
      expect(await codeOf(store.append(first, [b, a], 'any'))).toBe('EVENT_ID_CONFLICT');
      expect(await codeOf(store.append(stream(), [a, b], 'any'))).toBe('EVENT_ID_CONFLICT');
      expect(await codeOf(store.append(stream(), [a, b], 'no_stream'))).toBe('EVENT_ID_CONFLICT');
      expect(await store.headPosition()).toBe(head);
      expect((await store.readStream(first)).map((e) => e.id)).toEqual([a.id, b.id]);
    } finally {
      await store.close();
    }
  });

  it('a retry is a duplicate under any expectation, and new ids against a stale revision are WRONG_EXPECTED_REVISION', async () => {
    const store = await open();
    try {
      const s = stream();
      const batch = [event(), event()];
      const first = await store.append(s, batch, 'any');
      await store.append(s, [event()], 'any');
      for (const expected of ['any', 'exists', 'no_stream', 0, 1, 2] as const) {
        expect(await store.append(s, batch, expected)).toEqual({ nextExpectedRevision: 1, position: first.position, duplicate: true });
      }
      expect(await codeOf(store.append(s, [event()], 1))).toBe('WRONG_EXPECTED_REVISION');
      expect(await store.readStream(s)).toHaveLength(3);
    } finally {
      await store.close();
    }
  });
});

afterAll(async () => {
  await database?.drop();
});
