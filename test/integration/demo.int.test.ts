import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ORG_KEY_PREFIX } from '../../commands/organizations/create-organization.js';
import { DEMO_IDS, provisionDemo, type DemoUpstream } from '../../src/demo/provision.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { newSecret } from '../../src/crypto/tokens.js';
import { startApi, type TestApi } from '../support/api.js';
import { callTool, connectAgent, listenForAgents, textOf } from '../support/agent-mcp.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';

const TTL_SECONDS = 10;
const CEILING = 3;
const PER_ADDRESS = 5;

interface Vended {
  credential: { id: string; project_id: string; policy_profile_id: string; status: string; expires_at: string; expired: boolean };
  connection_string: string;
  mcp_url: string;
  mcp_token: string;
  tier: string;
  expires_at: string;
  policy: { id: string; allowed_tables: string[]; masked_columns: Record<string, string>; max_rows: number };
}

let gateway: TestGateway;
let upstream: DemoUpstream;
let ownerKey: string;
let mcpUrl: string;

function vend(address: string, payload?: object): Promise<LightMyRequestResponse> {
  return gateway.api.app.inject({ method: 'POST', url: '/v1/demo/credentials', remoteAddress: address, ...(payload ? { payload } : {}) });
}

function expectProblem(response: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = response.json() as Record<string, unknown>;
  expect(body).toMatchObject({ code, status, type: `/v1/problems/${code}`, request_id: response.headers['x-request-id'] });
  return body;
}

function provision() {
  return provisionDemo({ store: gateway.api.store, keyring: parseKeyring(gateway.api.masterKey) }, upstream, async () => ownerKey);
}

async function connect(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  return client;
}

beforeAll(async () => {
  gateway = await startGateway('demo', undefined, 60_000, {
    PGWARD_DEMO: 'on',
    PGWARD_DEMO_TTL_SECONDS: String(TTL_SECONDS),
    PGWARD_DEMO_MAX_CREDENTIALS: String(CEILING),
    PGWARD_DEMO_VENDS_PER_ADDRESS_PER_HOUR: String(PER_ADDRESS),
  });
  upstream = { adminUrl: inject('pgUrl'), database: `pgward_t_demo_${randomBytes(4).toString('hex')}` };
  ownerKey = newSecret(ORG_KEY_PREFIX);
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});

afterAll(async () => {
  await gateway?.stop();
  await admin(upstream.adminUrl, async (client) => {
    await client.query(`drop database if exists ${pg.escapeIdentifier(upstream.database)} with (force)`);
    await client.query(`drop role if exists ${pg.escapeIdentifier(`${upstream.database}_reader`)}`);
  });
});

describe('the demo (spec §4.8)', () => {
  it('before it is provisioned: GET says not_configured and a vend answers 503 DEMO_NOT_CONFIGURED without Retry-After', async () => {
    const offer = await gateway.api.app.inject({ method: 'GET', url: '/v1/demo' });
    expect(offer.statusCode).toBe(200);
    expect(offer.json()).toMatchObject({ status: 'not_configured', live_credentials: 0, database: null, schema: [], policy: null, statements: [] });
    const refused = expectProblem(await vend('10.0.0.1'), 503, 'DEMO_NOT_CONFIGURED');
    expect(refused.detail).toMatch(/do not retry/);
    expect((await vend('10.0.0.1')).headers['retry-after']).toBeUndefined();
  });

  it('is provisioned through the commands, once: a second run creates nothing and the shop keeps its rows', async () => {
    const first = await provision();
    expect(first.created).toBe(true);
    expect(first.demo).toEqual({ org_id: DEMO_IDS.org, project_id: DEMO_IDS.project, database_id: DEMO_IDS.database, tiers: [{ tier: 'free', policy_id: DEMO_IDS.freePolicy }, { tier: 'pro', policy_id: DEMO_IDS.proPolicy }] });
    const streams = [`org-${DEMO_IDS.org}`, `project-${DEMO_IDS.project}`, `policy-${DEMO_IDS.freePolicy}`, `policy-${DEMO_IDS.proPolicy}`, 'demo-shop'];
    const lengths = async () => Promise.all(streams.map(async (stream) => (await gateway.api.store.readStream(stream)).length));
    expect(await lengths()).toEqual([2, 2, 1, 1, 1]);
    const again = await provision();
    expect(again).toEqual({ demo: first.demo, created: false });
    expect(await lengths()).toEqual([2, 2, 1, 1, 1]);
    const shop = new URL(upstream.adminUrl);
    shop.pathname = `/${upstream.database}`;
    const counts = await admin(shop.toString(), async (client) => (await client.query('select (select count(*) from customers)::int as c, (select count(*) from orders)::int as o, (select count(*) from secrets)::int as s')).rows[0]);
    expect(counts).toEqual({ c: 200, o: 600, s: 20 });
  });

  it('GET /v1/demo (public) states the offer: each column’s treatment, the policy, the limits and statements to try', async () => {
    const response = await gateway.api.app.inject({ method: 'GET', url: '/v1/demo' });
    expect(response.statusCode).toBe(200);
    const offer = response.json() as {
      status: string;
      limits: unknown;
      database: unknown;
      tiers: { tier: string; available: boolean }[];
      schema: { table: string; treatment: string; rows: number; columns: { name: string; treatment: string; mask: string | null }[] }[];
      policy: unknown;
      statements: unknown[];
    };
    expect(offer.status).toBe('available');
    expect(offer.limits).toEqual({ credential_ttl_seconds: TTL_SECONDS, max_concurrent_credentials: CEILING, credentials_per_address_per_hour: PER_ADDRESS });
    expect(offer.database).toEqual({ name: upstream.database, description: 'The demo: a small shop database behind a read-only policy' });
    expect(offer.tiers.map((t) => [t.tier, t.available])).toEqual([['free', true], ['pro', false], ['scale', false], ['enterprise', false]]);
    const treatment = Object.fromEntries(offer.schema.flatMap((table) => table.columns.map((c) => [`${table.table}.${c.name}`, c.mask ? `${c.treatment}:${c.mask}` : c.treatment])));
    expect(treatment).toEqual({
      'public.customers.id': 'allowed',
      'public.customers.name': 'allowed',
      'public.customers.email': 'masked:partial',
      'public.customers.country': 'allowed',
      'public.customers.created_at': 'allowed',
      'public.orders.id': 'allowed',
      'public.orders.customer_id': 'allowed',
      'public.orders.placed_at': 'allowed',
      'public.orders.status': 'allowed',
      'public.orders.total_cents': 'allowed',
      'public.secrets.id': 'hidden',
      'public.secrets.customer_id': 'hidden',
      'public.secrets.card_token': 'hidden',
      'public.secrets.api_key': 'hidden',
    });
    expect(offer.schema.map((t) => [t.table, t.treatment, t.rows])).toEqual([
      ['public.customers', 'allowed', 200],
      ['public.orders', 'allowed', 600],
      ['public.secrets', 'hidden', 20],
    ]);
    expect(offer.policy).toMatchObject({ id: DEMO_IDS.freePolicy, read_only: true, allowed_tables: ['public.customers', 'public.orders'], masked_columns: { 'public.customers.email': 'partial' }, max_rows: 50 });
    expect(offer.statements.length).toBe(5);
  });

  it('takes every policy document docs/policy.md shows as an example', async () => {
    const policyDoc = readFileSync('docs/policy.md', 'utf8');
    const section = policyDoc.slice(policyDoc.indexOf('## Policy documents by example'), policyDoc.indexOf('## Fail closed'));
    const examples = [...section.matchAll(/^```json\n([\s\S]*?)^```$/gm)].map((match) => JSON.parse(match[1]!) as { name: string });
    expect(examples.map((example) => example.name)).toEqual(['demo (read-only)', 'analyst', 'support bot']);
    const offered = (await gateway.api.app.inject({ method: 'GET', url: '/v1/demo' })).json() as { policy: Record<string, unknown> };
    expect(offered.policy).toMatchObject(examples[0]!);
    for (const example of examples.slice(1)) {
      const created = await gateway.api.call(ownerKey, { method: 'POST', url: `/v1/projects/${DEMO_IDS.project}/policies`, payload: example });
      expect(created.statusCode, created.body).toBe(201);
      expect(created.json()).toMatchObject(example);
    }
  });

  it('a paid tier answers DEMO_TIER_NOT_PURCHASABLE, an unknown one INVALID_INPUT', async () => {
    expectProblem(await vend('10.0.0.2', { tier: 'pro' }), 503, 'DEMO_TIER_NOT_PURCHASABLE');
    const invalid = expectProblem(await vend('10.0.0.2', { tier: 'gold' }), 400, 'INVALID_INPUT');
    expect(invalid.errors).toEqual([expect.objectContaining({ field: 'tier' })]);
  });

  it('vends a credential that works on the wire (masked, capped, refused) and on MCP, and that both refuse once it expires', async () => {
    const before = Date.now();
    const response = await vend('10.0.0.3');
    expect(response.statusCode, response.body).toBe(201);
    const vended = response.json() as Vended;
    expect(vended.tier).toBe('free');
    expect(vended.credential).toMatchObject({ project_id: DEMO_IDS.project, policy_profile_id: DEMO_IDS.freePolicy, status: 'active', expired: false, expires_at: vended.expires_at });
    expect(Date.parse(vended.expires_at) - before).toBeGreaterThanOrEqual(TTL_SECONDS * 1000 - 50);
    expect(Date.parse(vended.expires_at) - before).toBeLessThanOrEqual(TTL_SECONDS * 1000 + 5_000);
    expect(vended.connection_string).toMatch(new RegExp(`^postgresql://${vended.credential.id}:[^@]+@127\\.0\\.0\\.1:\\d+/${upstream.database}$`));
    expect(vended.policy.id).toBe(DEMO_IDS.freePolicy);

    const wire = await connect(vended.connection_string);
    const masked = await wire.query('select id, email from customers order by id limit 3');
    expect(masked.rows).toEqual([{ id: 1, email: 'a***' }, { id: 2, email: 'g***' }, { id: 3, email: 'e***' }]);
    expect((await wire.query('select id from orders order by id')).rowCount).toBe(50);
    await expect(wire.query('select * from secrets')).rejects.toMatchObject({ code: '42501' });
    // The session's FATAL, then the closed socket: both reach the error listener.
    const sessionEnded = new Promise<Error>((resolve) => wire.on('error', resolve));

    const mcp = await connectAgent(mcpUrl, vended.mcp_token, 'demo-test');
    const result = await callTool(mcp, 'query', { sql: 'select email from customers order by id limit 1' });
    expect(result.isError ?? false).toBe(false);
    expect(textOf(result)).toContain('a***');

    await new Promise((resolve) => setTimeout(resolve, Date.parse(vended.expires_at) - Date.now() + 200));
    expect(await sessionEnded).toMatchObject({ code: '57P01' });
    await expect(connect(vended.connection_string)).rejects.toMatchObject({ code: '28P01' });
    await expect(callTool(mcp, 'query', { sql: 'select 1' })).rejects.toThrow(/401/);
    await mcp.close().catch(() => undefined);
  }, 40_000);

  it('admits at most 8 vends at once (DEMO_BUSY) and issues no more than the ceiling (DEMO_CAPACITY_FULL, Retry-After until the oldest expires)', async () => {
    // Vends wait behind a lock on the credentials read model: the admitted ones pile up in the gate.
    const locker = new pg.Client({ connectionString: gateway.api.database.url });
    await locker.connect();
    await locker.query('begin');
    await locker.query('lock table rm.credentials in access exclusive mode');
    const admitted: Promise<LightMyRequestResponse>[] = [];
    let busy: LightMyRequestResponse | undefined;
    for (let i = 0; !busy; i++) {
      const attempt = vend(`10.1.0.${i}`);
      const settled = await Promise.race([attempt, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 300))]);
      if (settled) busy = settled;
      else admitted.push(attempt);
      expect(i).toBeLessThan(20);
    }
    expect(admitted.length).toBe(8);
    const busyBody = expectProblem(busy, 503, 'DEMO_BUSY');
    expect(busyBody.detail).toMatch(/at once/);
    expect(busy.headers['retry-after']).toBe('1');
    await locker.query('rollback');
    await locker.end();

    const outcomes = await Promise.all(admitted);
    const issued = outcomes.filter((r) => r.statusCode === 201).map((r) => r.json() as Vended);
    const full = outcomes.filter((r) => r.statusCode !== 201);
    expect(issued.length).toBe(CEILING);
    expect(full.length).toBe(8 - CEILING);
    const oldest = Math.min(...issued.map((v) => Date.parse(v.expires_at)));
    for (const response of full) {
      expectProblem(response, 503, 'DEMO_CAPACITY_FULL');
      const wait = Number(response.headers['retry-after']);
      expect(wait).toBeGreaterThanOrEqual(1);
      expect(wait).toBeLessThanOrEqual(Math.ceil((oldest - Date.now()) / 1000) + 1);
    }
    const offer = (await gateway.api.app.inject({ method: 'GET', url: '/v1/demo' })).json() as { live_credentials: number };
    expect(offer.live_credentials).toBe(CEILING);
  });

  it('limits vends per client address: the sixth request of an hour answers 429 RATE_LIMITED with Retry-After', async () => {
    for (let i = 0; i < PER_ADDRESS; i++) expectProblem(await vend('10.2.0.1'), 503, 'DEMO_CAPACITY_FULL');
    const limited = await vend('10.2.0.1');
    expectProblem(limited, 429, 'RATE_LIMITED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(3000);
    expect(limited.headers.ratelimit).toMatch(new RegExp(`^limit=${PER_ADDRESS}, remaining=0, reset=\\d+$`));
    expectProblem(await vend('10.2.0.2'), 503, 'DEMO_CAPACITY_FULL');
  });

  it('pause (the demo organization’s admins only) disables the live demo credentials and answers DEMO_PAUSED until resumed', async () => {
    const other = await gateway.api.org('pro');
    expectProblem(await gateway.api.call(other.apiKey, { method: 'POST', url: '/v1/demo/pause', payload: {} }), 404, 'NOT_FOUND');
    expect((await gateway.api.app.inject({ method: 'POST', url: '/v1/demo/pause', payload: {} })).statusCode).toBe(401);

    const paused = await gateway.api.call(ownerKey, { method: 'POST', url: '/v1/demo/pause', payload: { reason: 'maintenance' } });
    expect(paused.statusCode, paused.body).toBe(200);
    expect(paused.json()).toMatchObject({ status: 'paused', detail: 'the demo is paused by its operator: maintenance', live_credentials: 0 });
    const { rows } = await gateway.api.pool.query<{ status: string; n: number }>(`select status, count(*)::int as n from rm.credentials where project_id = $1 group by status order by status`, [DEMO_IDS.project]);
    expect(rows).toEqual([{ status: 'disabled', n: CEILING + 1 }]);

    const refused = await vend('10.3.0.1');
    expectProblem(refused, 503, 'DEMO_PAUSED');
    expect(refused.headers['retry-after']).toBe('300');

    const resumed = await gateway.api.call(ownerKey, { method: 'POST', url: '/v1/demo/resume' });
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json()).toMatchObject({ status: 'available' });
    expect((await vend('10.3.0.1')).statusCode).toBe(201);
  });
});

describe('the demo switched off', () => {
  let api: TestApi;
  beforeAll(async () => {
    // An external state database (PGWARD_STATE_URL) without PGWARD_DEMO: off.
    api = await startApi('demo_off');
  });
  afterAll(async () => api?.stop());

  it('GET says not_configured with no limits, a vend answers DEMO_NOT_CONFIGURED', async () => {
    const offer = await api.app.inject({ method: 'GET', url: '/v1/demo' });
    expect(offer.json()).toMatchObject({ status: 'not_configured', detail: 'this deployment runs no demo (PGWARD_DEMO)', limits: null, tiers: expect.any(Array) });
    expectProblem(await api.app.inject({ method: 'POST', url: '/v1/demo/credentials' }), 503, 'DEMO_NOT_CONFIGURED');
  });
});
