import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '../../commands/domain-error.js';
import { handle } from '../../commands/handle.js';
import { createOrganization } from '../../commands/organizations/create-organization.js';
import { organization } from '../../commands/organizations/organization.js';
import { matchesHash } from '../../src/crypto/tokens.js';
import { ApiKeyCreated, OrganizationCreated } from '../../src/events/organizations.js';
import { newId } from '../../src/ids.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let database: TestDatabase;
let store: PostgresEventStore;
const context = { correlationId: 'req-1', actor: 'test' };

beforeAll(async () => {
  database = await freshDatabase('commands');
  store = await createPostgresEventStore(database.url);
});
afterAll(async () => {
  await store.close();
  await database.drop();
});

function newKey(name: string) {
  return { keyId: newId('key_'), name, role: 'member' as const, prefix: 'pgw_org_abcd', tokenHash: 'a'.repeat(64) };
}

describe('command handling', () => {
  it('creates an organization with its owner key; the key is stored only as a hash', async () => {
    const created = await createOrganization(store, { name: 'Acme', plan: 'pro' }, context);
    const events = await store.readStream(`org-${created.org_id}`);
    expect(events.map((e) => e.type)).toEqual([OrganizationCreated.type, ApiKeyCreated.type]);
    const stored = Buffer.concat(events.map((e) => Buffer.from(e.data))).toString();
    expect(stored).not.toContain(created.api_key);
    const key = JSON.parse(Buffer.from(events[1]!.data).toString()) as { token_hash: string; role: string; prefix: string };
    expect(key.role).toBe('owner');
    expect(matchesHash(created.api_key, key.token_hash)).toBe(true);
    expect(created.api_key.startsWith(key.prefix)).toBe(true);
    const meta = JSON.parse(Buffer.from(events[0]!.metadata).toString()) as Record<string, string>;
    expect(meta).toMatchObject({ correlation_id: 'req-1', actor: 'test' });
  });

  it('refuses what decide refuses and appends nothing', async () => {
    const orgId = newId('org_');
    await expect(handle(store, `org-${orgId}`, organization, { kind: 'create-api-key', orgId, key: newKey('k') }, context)).rejects.toEqual(
      new DomainError('NOT_FOUND', `organization ${orgId} not found`),
    );
    expect(await store.readStream(`org-${orgId}`)).toEqual([]);
  });

  it('retries on a concurrent writer: eight concurrent commands on one stream all land, each once', async () => {
    const { org_id: orgId } = await createOrganization(store, { name: 'Busy', plan: 'free' }, context);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => handle(store, `org-${orgId}`, organization, { kind: 'create-api-key', orgId, key: newKey(`k${i}`) }, context)),
    );
    expect(new Set(results.map((r) => r.revision))).toEqual(new Set([2, 3, 4, 5, 6, 7, 8, 9]));
    expect((await store.readStream(`org-${orgId}`)).length).toBe(10);
  });

  it('never double-creates: retries with one idempotency key append once, in any order and concurrency (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { minLength: 1, maxLength: 12 }), fc.boolean(), async (keys, concurrent) => {
        const { org_id: orgId } = await createOrganization(store, { name: 'Retry', plan: 'free' }, context);
        const run = (key: string) =>
          handle(store, `org-${orgId}`, organization, { kind: 'create-api-key', orgId, key: newKey(key) }, { ...context, idempotencyKey: key });
        const results = concurrent ? await Promise.all(keys.map(run)) : await keys.reduce<Promise<unknown[]>>(async (acc, key) => [...(await acc), await run(key)], Promise.resolve([]));
        const stream = await store.readStream(`org-${orgId}`);
        const created = stream
          .filter((e) => e.type === ApiKeyCreated.type)
          .map((e) => JSON.parse(Buffer.from(e.data).toString()) as { name: string; key_id: string; role: string })
          .filter((k) => k.role !== 'owner');
        expect(created.map((k) => k.name).sort()).toEqual([...new Set(keys)].sort());
        for (const [i, result] of (results as Awaited<ReturnType<typeof run>>[]).entries()) {
          const keyId = (result.events[0]!.data as { key_id: string }).key_id;
          expect(created.find((k) => k.name === keys[i])!.key_id).toBe(keyId);
        }
      }),
      { numRuns: 25 },
    );
  });
});
