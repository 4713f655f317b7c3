import { afterAll } from 'vitest';
import { createPostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { eventStoreContract } from './event-store.contract.js';

let database: TestDatabase | undefined;

eventStoreContract(
  'postgres',
  async () => {
    database ??= await freshDatabase('store_contract');
    return createPostgresEventStore(database.url);
  },
  { supportsTransactions: true },
);

afterAll(async () => {
  await database?.drop();
});
