import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEvent } from '../../src/events/catalog.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { loginError, openSession, waitFor } from '../support/wire.js';

let gateway: TestGateway;
let tableCanary: string;
let valueCanary: string;
let policyId: string;

type Decision = { credential_id: string; event: string; decision_rule: string; reason: string; tables_blocked: string[] };

async function plant(payload: Record<string, unknown>): Promise<string> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/honeytokens`, payload });
  expect(response.statusCode).toBe(201);
  return (response.json() as { id: string }).id;
}

async function register(name: string): Promise<AgentSecrets> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents`, payload: { name, policy_profile_id: policyId } });
  expect(response.statusCode).toBe(201);
  return response.json() as AgentSecrets;
}

/** The decisions published for a credential, once at least `count` have arrived. */
async function credentialStatus(credentialId: string): Promise<string> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/agents/${credentialId}` });
  return (response.json() as { status: string }).status;
}

beforeAll(async () => {
  gateway = await startGateway('proxy_honeytokens');
  const seed = new pg.Client({ connectionString: gateway.upstream.url });
  await seed.connect();
  await seed.query(`create table api_keys (id int primary key, secret text not null); insert into api_keys values (1, 'sk_live_canary')`);
  await seed.end();
  tableCanary = await plant({ kind: 'table', target: 'public.api_keys', disable_credential: true });
  valueCanary = await plant({ kind: 'value', target: 'canary-4411@example.com' });
  const policy = await gateway.api.call(gateway.owner.apiKey, {
    method: 'POST',
    url: `/v1/projects/${gateway.projectId}/policies`,
    payload: { name: 'orders with canaries', read_only: true, allowed_tables: ['public.orders', 'public.api_keys'], honeytokens: [tableCanary, valueCanary] },
  });
  policyId = (policy.json() as { id: string }).id;
});
afterAll(async () => {
  await gateway?.stop();
});

describe('honeytokens on the wire', () => {
  it('a value canary refuses the statement as canary_tripped and leaves the credential and its session alone', async () => {
    const agent = await register('value tripper');
    const { client, ended } = await openSession(agent.connection_string);
    const refused = await client.query(`SELECT count(*) FROM orders WHERE customer = 'CANARY-4411@example.com'`).catch((error: unknown) => error as { code: string; message: string });
    // Answered as the tables it reads would be were they off the allowlist (test/security/honeytoken-disguise.e2e.test.ts).
    expect(refused).toMatchObject({ code: '42501', message: 'table public.orders is not in the allowed tables (none); query only those (rule allowed_tables.not_allowed).' });
    expect((await client.query('SELECT count(*)::int AS n FROM orders')).rows).toEqual([{ n: 1000 }]);
    const [tripped, ran] = (await gateway.decisionsOf(agent.credential.id, 2)) as Decision[];
    expect(tripped).toMatchObject({ event: 'canary_tripped', decision_rule: 'honeytoken.value' });
    expect(ran).toMatchObject({ event: 'query' });
    expect(ended()).toBe(false);
    expect(await credentialStatus(agent.credential.id)).toBe('active');
    await client.end();
  });

  it('a table canary that disables: refused as canary_tripped, the credential disabled by the honeytoken, the session closed, new logins refused', async () => {
    const agent = await register('table tripper');
    const { client, ended } = await openSession(agent.connection_string);
    const refused = await client.query('SELECT secret FROM api_keys').catch((error: unknown) => error as { code: string; message: string });
    expect(refused).toMatchObject({ code: '42501', message: 'table public.api_keys is not in the allowed tables (public.orders); query only those (rule allowed_tables.not_allowed).' });
    await waitFor(ended, 2000, 'session closed after the canary tripped');
    const [tripped, ...rest] = (await gateway.decisionsOf(agent.credential.id, 1)) as Decision[];
    expect(tripped).toMatchObject({ event: 'canary_tripped', decision_rule: 'honeytoken.table', tables_blocked: ['public.api_keys'] });
    expect(rest.map((d) => d.event)).not.toContain('query');
    // The read model may trail the event that closed the session by a moment.
    await waitFor(async () => (await credentialStatus(agent.credential.id)) === 'disabled', 2000, 'credential disabled in the read model');
    // The login's CredentialUsed is appended without waiting and may land after the disable.
    const events = (await gateway.api.store.readStream(`credential-${agent.credential.id}`)).map(decodeEvent);
    expect(events.filter((event) => event.type === 'CredentialDisabled.v1')).toHaveLength(1);
    const disabled = events.find((event) => event.type === 'CredentialDisabled.v1')!;
    expect(disabled.metadata.actor).toBe(`honeytoken:${tableCanary}`);
    expect(disabled.data).toEqual({ credential_id: agent.credential.id, reason: `a statement touched honeytoken ${tableCanary}` });
    expect(await loginError(agent.connection_string)).toBe('28P01');
  });

  it('a canary in any statement of a multi-statement query decides, even after another refusal', async () => {
    const agent = await register('multi tripper');
    const { client } = await openSession(agent.connection_string);
    const refused = await client.query('DELETE FROM orders; SELECT id FROM public.api_keys').catch((error: unknown) => error as { code: string; message: string });
    // The agent gets the first refusal, as it would without the canary; the trail records the trip.
    expect(refused).toMatchObject({ code: '42501', message: expect.stringContaining('(rule read_only.write)') });
    const [tripped] = (await gateway.decisionsOf(agent.credential.id, 1)) as Decision[];
    expect(tripped).toMatchObject({ event: 'canary_tripped', decision_rule: 'honeytoken.table' });
    await waitFor(async () => (await credentialStatus(agent.credential.id)) === 'disabled', 2000, 'credential disabled');
    const upstream = new pg.Client({ connectionString: gateway.upstream.url });
    await upstream.connect();
    expect((await upstream.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
    await upstream.end();
  });
});
