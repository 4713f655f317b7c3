import { createEventStoreDbStore } from '../../src/store/eventstoredb.js';
import { eventStoreContract } from './event-store.contract.js';

const url = process.env.EVENTSTORE_URL;

eventStoreContract('eventstoredb', async () => createEventStoreDbStore(url ?? ''), {
  skipReason: url ? undefined : 'EVENTSTORE_URL is not set',
});
