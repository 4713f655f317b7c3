/**
 * Per-request charges (spec §5.3, docs/payments.md) on the demo's paid tier, through app.inject on
 * the real control plane and PostgreSQL: the 402 challenge, its settlement against the organization's
 * prepaid credit ledger, the receipt, refused replays and forgeries, refunds, and one settlement of
 * a challenge under concurrent retries.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORG_KEY_PREFIX } from '../../commands/organizations/create-organization.js';
import { newOperatorToken } from '../../src/auth/operators.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { newSecret } from '../../src/crypto/tokens.js';
import { decodeEvent } from '../../src/events/catalog.js';
import { DEMO_IDS, provisionDemo } from '../../src/demo/provision.js';
import { decodeJson, encodeJson, parseChallenges } from '../../src/payments/auth-params.js';
import { bodyDigest, challengeSecrets, credentialHeader, issueChallenge, type ChallengeBinding, type PaymentChallenge } from '../../src/payments/challenge.js';
import { startApi, type TestApi } from '../support/api.js';
import { PASSWORD } from '../support/identity.js';
import { demoUpstream } from '../support/demo-upstream.js';

const PRICE = 50;
const operator = newOperatorToken('billing');
const PRO = JSON.stringify({ tier: 'pro' });

let api: TestApi;
let upstream: ReturnType<typeof demoUpstream>;
let demoOwner: string;
let customer: { orgId: string; apiKey: string };
let member: string;
let viewer: string;
let jwks: Server;
let signingKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
const ISSUER = 'https://auth.pgward.test/api/auth';

function expectProblem(response: LightMyRequestResponse, status: number, code: string, paymentError?: string): Record<string, unknown> {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = response.json() as Record<string, unknown>;
  expect(body).toMatchObject({ code, status, type: `/v1/problems/${code}`, request_id: response.headers['x-request-id'] });
  expect(body.payment_error).toBe(paymentError);
  expect(response.headers['payment-receipt']).toBeUndefined();
  return body;
}

/** POST /v1/demo/credentials with `authorization` and the raw JSON `body`. */
function vend(authorization: string | undefined, body = PRO): Promise<LightMyRequestResponse> {
  return api.app.inject({ method: 'POST', url: '/v1/demo/credentials', headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) }, payload: body });
}

/** The Payment challenge of a 402, from its WWW-Authenticate header. */
function challengeOf(response: LightMyRequestResponse): PaymentChallenge {
  const [challenge, ...others] = parseChallenges(String(response.headers['www-authenticate']));
  expect(others).toEqual([]);
  expect(challenge!.scheme).toBe('Payment');
  return challenge!.params as unknown as PaymentChallenge;
}

async function freshChallenge(key = member, body = PRO): Promise<PaymentChallenge> {
  const response = await vend(`Bearer ${key}`, body);
  expectProblem(response, 402, 'PAYMENT_REQUIRED', 'payment-required');
  return challengeOf(response);
}

async function balance(): Promise<Record<string, unknown>> {
  const response = await api.call(viewer, { method: 'GET', url: `/v1/orgs/${customer.orgId}/credits` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json() as Record<string, unknown>;
}

async function topUp(amount: number, key?: string): Promise<LightMyRequestResponse> {
  return api.call(operator.token, { method: 'POST', url: `/v1/operator/orgs/${customer.orgId}/credits/top-ups`, headers: key ? { 'idempotency-key': key } : {}, payload: { amount, reference: 'pi_test' } });
}

async function ledgerTypes(): Promise<string[]> {
  return (await api.store.readStream(`credits-${customer.orgId}`)).map((e) => decodeEvent(e).type);
}

async function newKey(role: string): Promise<{ secret: string; id: string }> {
  const created = await api.call(customer.apiKey, { method: 'POST', url: `/v1/orgs/${customer.orgId}/api-keys`, payload: { name: role, role } });
  expect(created.statusCode, created.body).toBe(201);
  const { api_key: secret, key } = created.json() as { api_key: string; key: { id: string } };
  return { secret, id: key.id };
}

beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  signingKey = pair.privateKey;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  api = await startApi('payments', {
    PGWARD_DEMO: 'on',
    PGWARD_PRICES: `createDemoCredential:pro=${PRICE},getCurrentCaller=1,listConsents=1`,
    PGWARD_OPERATOR_TOKENS: operator.entry,
    PGWARD_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`,
    PGWARD_JWT_ISSUER: ISSUER,
    PGWARD_JWT_AUDIENCE: 'pgward-api',
  });
  upstream = demoUpstream('pay');
  demoOwner = newSecret(ORG_KEY_PREFIX);
  await provisionDemo({ store: api.store, keyring: parseKeyring(api.masterKey) }, upstream, async () => demoOwner);
  customer = await api.org();
  member = (await newKey('member')).secret;
  viewer = (await newKey('viewer')).secret;
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await upstream?.drop();
  await new Promise((resolve) => jwks?.close(resolve));
});

describe('priced requests (the demo’s paid tier first)', () => {
  it('GET /v1/demo offers the pro tier at its price; the free tier stays public and free', async () => {
    const offer = (await api.app.inject({ method: 'GET', url: '/v1/demo' })).json() as { tiers: { tier: string; available: boolean; policy_id: string | null; price: unknown }[] };
    expect(offer.tiers.map((t) => [t.tier, t.available, t.policy_id, t.price])).toEqual([
      ['free', true, DEMO_IDS.freePolicy, null],
      ['pro', true, DEMO_IDS.proPolicy, { amount: PRICE, currency: 'usd' }],
      ['scale', false, null, null],
      ['enterprise', false, null, null],
    ]);
    const free = await vend(undefined, '{}');
    expect(free.statusCode, free.body).toBe(201);
    expect(free.json()).toMatchObject({ tier: 'free' });
  });

  it('asks an anonymous caller to authenticate (401) and refuses a viewer (403): neither gets a challenge', async () => {
    const anonymous = expectProblem(await vend(undefined), 401, 'UNAUTHORIZED');
    expect(anonymous.detail).toMatch(/costs 50 usd/);
    expect((await vend(undefined)).headers['www-authenticate']).toBe('Bearer realm="pgward"');
    const refused = await vend(`Bearer ${viewer}`);
    expectProblem(refused, 403, 'FORBIDDEN');
    expect(refused.headers['www-authenticate']).toBeUndefined();
  });

  it('answers a member 402 PAYMENT_REQUIRED with a Payment challenge bound to the request, and records nothing', async () => {
    const before = Date.now();
    const response = await vend(`Bearer ${member}`);
    expectProblem(response, 402, 'PAYMENT_REQUIRED', 'payment-required');
    expect(response.headers['cache-control']).toBe('no-store');
    const challenge = challengeOf(response);
    expect(Object.keys(challenge).sort()).toEqual(['description', 'digest', 'expires', 'id', 'intent', 'method', 'opaque', 'realm', 'request']);
    expect(challenge).toMatchObject({ realm: 'gateway.test', method: 'credits', intent: 'charge', digest: bodyDigest(PRO), description: 'createDemoCredential:pro on gateway.test' });
    expect(challenge.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const expires = Date.parse(challenge.expires);
    expect(expires).toBeGreaterThanOrEqual(before + 300_000 - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 300_000);
    expect(decodeJson(challenge.request)).toEqual({ amount: '50', currency: 'usd', description: 'createDemoCredential:pro on gateway.test', externalId: response.headers['x-request-id'] });
    const binding = decodeJson(challenge.opaque) as Record<string, string>;
    expect({ ...binding, nonce: undefined }).toEqual({ http_method: 'POST', path: '/v1/demo/credentials', org_id: customer.orgId, principal: expect.stringMatching(/^api_key:key_/), role: 'member', caller: 'api_key', nonce: undefined });
    expect(await ledgerTypes()).toEqual([]);
  });

  it('keeps an unfunded challenge good: 402 payment-insufficient repeats it, and after a top-up the same credential settles once, with a receipt', async () => {
    const challenge = await freshChallenge();
    const credential = credentialHeader(challenge, {});
    const short = await vend(credential);
    const body = expectProblem(short, 402, 'PAYMENT_REQUIRED', 'payment-insufficient');
    expect(body.detail).toBe('the organization has 0 usd of prepaid credit, the charge is 50');
    expect(challengeOf(short)).toEqual(challenge);

    const topped = await topUp(120, 'top-up-1');
    expect(topped.statusCode, topped.body).toBe(201);
    expect(topped.json()).toMatchObject({ org_id: customer.orgId, currency: 'usd', balance: 120, topped_up: 120, charged: 0, charges: 0 });
    // The operator's retry adds nothing twice.
    expect((await topUp(120, 'top-up-1')).json()).toMatchObject({ balance: 120 });

    const paid = await vend(credential);
    expect(paid.statusCode, paid.body).toBe(201);
    expect(paid.json()).toMatchObject({ tier: 'pro', policy: { id: DEMO_IDS.proPolicy, max_rows: 500 }, credential: { policy_profile_id: DEMO_IDS.proPolicy } });
    expect(paid.headers['cache-control']).toBe('private');
    const receipt = decodeJson(String(paid.headers['payment-receipt'])) as Record<string, string>;
    const charged = (await api.store.readStream(`credits-${customer.orgId}`)).map(decodeEvent).at(-1)!;
    expect(charged).toMatchObject({ type: 'CreditsCharged.v1', data: { org_id: customer.orgId, challenge_id: challenge.id, amount: 50, currency: 'usd', operation: 'createDemoCredential:pro' } });
    expect(receipt).toEqual({ status: 'success', method: 'credits', timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), reference: charged.metadata.event_id });
    expect(await balance()).toMatchObject({ balance: 70, topped_up: 120, charged: 50, refunded: 0, charges: 1 });

    // A replay proves nothing more: refused, nothing charged.
    const replay = await vend(credential);
    expectProblem(replay, 401, 'UNAUTHORIZED', 'invalid-challenge');
    expect(replay.headers['www-authenticate']).toBe('Bearer realm="pgward"');
    expect(await balance()).toMatchObject({ balance: 70, charges: 1 });
    expect(await ledgerTypes()).toEqual(['CreditsToppedUp.v1', 'CreditsCharged.v1']);
  });

  it('settles a challenge once under concurrent retries: one 201, the others refused, one charge', async () => {
    expect((await topUp(1000)).statusCode).toBe(201);
    const credential = credentialHeader(await freshChallenge(), {});
    const before = (await balance()).balance as number;
    const responses = await Promise.all(Array.from({ length: 8 }, () => vend(credential)));
    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, 401, 401, 401, 401, 401, 401, 401]);
    for (const refused of responses.filter((r) => r.statusCode === 401)) expect(refused.json()).toMatchObject({ payment_error: 'invalid-challenge' });
    expect(responses.filter((r) => r.headers['payment-receipt'] !== undefined)).toHaveLength(1);
    expect(await balance()).toMatchObject({ balance: before - PRICE, charges: 2 });
    expect((await ledgerTypes()).filter((t) => t === 'CreditsCharged.v1')).toHaveLength(2);
  });

  it('refuses a credential for another body, a forged or tampered challenge, an expired one and a malformed one, charging nothing', async () => {
    const challenge = await freshChallenge();
    const before = await ledgerTypes();
    expectProblem(await vend(credentialHeader(challenge, {}), JSON.stringify({ tier: 'pro', extra: 1 })), 400, 'INVALID_INPUT');
    expectProblem(await vend(credentialHeader(challenge, {}), '{"tier": "pro"}'), 401, 'UNAUTHORIZED', 'invalid-challenge');
    const cheaper = { ...challenge, request: encodeJson({ amount: '1', currency: 'usd' }) };
    expectProblem(await vend(credentialHeader(cheaper, {})), 401, 'UNAUTHORIZED', 'invalid-challenge');
    const otherOrg = { ...challenge, opaque: encodeJson({ ...(decodeJson(challenge.opaque) as object), org_id: DEMO_IDS.org }) };
    expectProblem(await vend(credentialHeader(otherOrg, {})), 401, 'UNAUTHORIZED', 'invalid-challenge');
    const binding = decodeJson(challenge.opaque) as ChallengeBinding;
    const expired = issueChallenge(challengeSecrets(parseKeyring(api.masterKey)).current, {
      realm: 'gateway.test',
      method: 'credits',
      charge: { amount: '50', currency: 'usd' },
      expires: new Date(Date.now() - 1000),
      digest: bodyDigest(PRO),
      binding: { http_method: 'POST', path: '/v1/demo/credentials', org_id: binding.org_id, principal: binding.principal, role: binding.role, caller: binding.caller },
    });
    expectProblem(await vend(credentialHeader(expired, {})), 401, 'UNAUTHORIZED', 'payment-expired');
    expectProblem(await vend('Payment not-base64!'), 401, 'UNAUTHORIZED', 'malformed-credential');
    expectProblem(await vend(`Payment ${encodeJson({ challenge: { id: 'x' }, payload: {} })}`), 401, 'UNAUTHORIZED', 'malformed-credential');
    expect(await ledgerTypes()).toEqual(before);
    // The challenge itself is still good for its own request.
    expect((await vend(credentialHeader(challenge, {}))).statusCode).toBe(201);
  });

  it('refunds a paid request that fails (the demo paused after the challenge), and sends no receipt', async () => {
    const credential = credentialHeader(await freshChallenge(), {});
    const before = await balance();
    expect((await api.call(demoOwner, { method: 'POST', url: '/v1/demo/pause', payload: { reason: 'maintenance' } })).statusCode).toBe(200);
    try {
      expectProblem(await vend(credential), 503, 'DEMO_PAUSED');
    } finally {
      expect((await api.call(demoOwner, { method: 'POST', url: '/v1/demo/resume' })).statusCode).toBe(200);
    }
    expect((await ledgerTypes()).slice(-2)).toEqual(['CreditsCharged.v1', 'CreditsRefunded.v1']);
    expect(await balance()).toMatchObject({ balance: before.balance, refunded: PRICE, charges: (before.charges as number) + 1 });
    // Spent, even though refunded: the challenge does not settle again.
    expectProblem(await vend(credential), 401, 'UNAUTHORIZED', 'invalid-challenge');
  });

  it('refuses a challenge whose API key was revoked since, and a Payment credential on a request nothing prices', async () => {
    const doomed = await newKey('member');
    const credential = credentialHeader(await freshChallenge(doomed.secret), {});
    const revoked = await api.call(customer.apiKey, { method: 'DELETE', url: `/v1/orgs/${customer.orgId}/api-keys/${doomed.id}` });
    expect(revoked.statusCode, revoked.body).toBeLessThan(300);
    expectProblem(await vend(credential), 401, 'UNAUTHORIZED', 'invalid-challenge');
    const unpriced = await api.app.inject({ method: 'GET', url: '/v1/projects', headers: { authorization: credential } });
    expectProblem(unpriced, 401, 'UNAUTHORIZED', 'invalid-challenge');
  });

  it('charges a human signed in with a JWT as that user: the challenge names them, the charge and the credential are theirs', async () => {
    const jwt = await new SignJWT({ sub: 'usr_pay', org_id: customer.orgId, role: 'member' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience('pgward-api')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(signingKey);
    const challenge = await freshChallenge(jwt);
    expect(decodeJson(challenge.opaque)).toMatchObject({ org_id: customer.orgId, principal: 'user:usr_pay', role: 'member', caller: 'jwt', issuer: ISSUER });
    const paid = await vend(credentialHeader(challenge, {}));
    expect(paid.statusCode, paid.body).toBe(201);
    const actorOf = (event: { metadata: Uint8Array }) => (JSON.parse(Buffer.from(event.metadata).toString()) as { actor: string }).actor;
    const charge = (await api.store.readStream(`credits-${customer.orgId}`)).at(-1)!;
    expect([decodeEvent(charge).type, actorOf(charge)]).toEqual(['CreditsCharged.v1', 'user:usr_pay']);
    const credentialId = (paid.json() as { credential: { id: string } }).credential.id;
    expect(actorOf((await api.store.readStream(`credential-${credentialId}`))[0]!)).toBe('user:usr_pay');
  });

  it('settles each payer as what signed them in: an org API key, a person’s session and a JWT keep their kind, permissions and audit actor', async () => {
    const me = async (authorization: Record<string, string>) => {
      const unpaid = await api.app.inject({ method: 'GET', url: '/v1/me', headers: authorization });
      expectProblem(unpaid, 402, 'PAYMENT_REQUIRED', 'payment-required');
      const paid = await api.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: credentialHeader(challengeOf(unpaid), {}) } });
      expect(paid.statusCode, paid.body).toBe(200);
      return paid.json() as Record<string, unknown>;
    };
    const consents = async (authorization: Record<string, string>) => {
      const unpaid = await api.app.inject({ method: 'GET', url: '/v1/account/consents', headers: authorization });
      expectProblem(unpaid, 402, 'PAYMENT_REQUIRED', 'payment-required');
      return api.app.inject({ method: 'GET', url: '/v1/account/consents', headers: { authorization: credentialHeader(challengeOf(unpaid), {}) } });
    };
    expect((await topUp(PRICE + 10)).statusCode).toBe(201);

    // An org API key: the key, and no person.
    const key = await newKey('member');
    expect(await me({ authorization: `Bearer ${key.secret}` })).toEqual({ kind: 'org_api_key', org_id: customer.orgId, role: 'member', key_id: key.id, subject: null });
    expectProblem(await consents({ authorization: `Bearer ${key.secret}` }), 403, 'FORBIDDEN');
    const demo = await vend(credentialHeader(await freshChallenge(key.secret), {}));
    expect(demo.statusCode, demo.body).toBe(201);
    const actorOf = (event: { metadata: Uint8Array }) => (JSON.parse(Buffer.from(event.metadata).toString()) as { actor: string }).actor;
    const credentialId = (demo.json() as { credential: { id: string } }).credential.id;
    expect(actorOf((await api.store.readStream(`credential-${credentialId}`))[0]!)).toBe(`api_key:${key.id}`);

    // A person signed in to the identity server: their session, their own account.
    const origin = 'http://gateway.test:8080';
    const signedUp = await api.app.inject({ method: 'POST', url: '/api/auth/sign-up/email', headers: { origin, 'content-type': 'application/json' }, payload: { email: 'payer@example.test', password: PASSWORD, name: 'Payer', accept_terms: true } });
    expect(signedUp.statusCode, signedUp.body).toBe(200);
    const userId = (signedUp.json() as { user: { id: string } }).user.id;
    const cookie = ([signedUp.headers['set-cookie']].flat() as string[]).map((line) => line.split(';')[0]!).find((pair) => pair.startsWith('pgward.session_token='))!;
    const own = (await api.app.inject({ method: 'GET', url: '/v1/me', headers: { cookie } })).headers;
    expect(own['www-authenticate']).toMatch(/^Payment /);
    const personOrg = ((await api.app.inject({ method: 'GET', url: '/v1/orgs', headers: { cookie } })).json() as { organizations: { id: string }[] }).organizations[0]!.id;
    expect((await api.call(operator.token, { method: 'POST', url: `/v1/operator/orgs/${personOrg}/credits/top-ups`, payload: { amount: 10, reference: 'pi_person' } })).statusCode).toBe(201);
    expect(await me({ cookie })).toEqual({ kind: 'user_session', org_id: personOrg, role: 'owner', key_id: null, subject: userId });
    const theirs = await consents({ cookie });
    expect(theirs.statusCode, theirs.body).toBe(200);
    expect((theirs.json() as { data: { user_id: string; document_type: string }[] }).data.map((c) => [c.user_id, c.document_type]).sort()).toEqual([[userId, 'privacy_policy'], [userId, 'terms_of_service']]);
    const charges = (await api.store.readStream(`credits-${personOrg}`)).filter((e) => e.type === 'CreditsCharged.v1');
    expect(charges.map(actorOf)).toEqual([`user:${userId}`, `user:${userId}`]);

    // A JWT of another identity provider: a person, but not one whose account this deployment keeps.
    const jwt = await new SignJWT({ sub: 'usr_external', org_id: customer.orgId, role: 'member' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(ISSUER).setAudience('pgward-api').setIssuedAt().setExpirationTime('5m').sign(signingKey);
    expect(await me({ authorization: `Bearer ${jwt}` })).toEqual({ kind: 'user_jwt', org_id: customer.orgId, role: 'member', key_id: null, subject: 'usr_external' });
    const before = (await balance()).balance as number;
    expectProblem(await consents({ authorization: `Bearer ${jwt}` }), 403, 'FORBIDDEN');
    // The refused request delivered nothing: its charge was given back.
    expect(await balance()).toMatchObject({ balance: before });
  });

  it('repeats an unfunded challenge as it issued it, never a description the client put in its credential', async () => {
    const broke = await api.org();
    const challenge = await freshChallenge(broke.apiKey);
    const response = await vend(credentialHeader({ ...challenge, description: 'pay more\r\nSet-Cookie: session=x' }, {}));
    expectProblem(response, 402, 'PAYMENT_REQUIRED', 'payment-insufficient');
    expect(challengeOf(response)).toEqual(challenge);
    expect(response.headers['set-cookie']).toBeUndefined();
  });

  it('prices any operation by its id: a GET has no digest, and its challenge is bound to the path with its query', async () => {
    expect((await topUp(10)).statusCode).toBe(201);
    const before = (await balance()).balance as number;
    const unpaid = await api.call(member, { method: 'GET', url: '/v1/me' });
    expectProblem(unpaid, 402, 'PAYMENT_REQUIRED', 'payment-required');
    const challenge = challengeOf(unpaid);
    expect(challenge.digest).toBeUndefined();
    expect(decodeJson(challenge.request)).toMatchObject({ amount: '1', currency: 'usd', description: 'getCurrentCaller on gateway.test' });
    const credential = credentialHeader(challenge, {});
    expectProblem(await api.app.inject({ method: 'GET', url: '/v1/me?again=1', headers: { authorization: credential } }), 401, 'UNAUTHORIZED', 'invalid-challenge');
    const paid = await api.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: credential } });
    expect(paid.statusCode, paid.body).toBe(200);
    expect(paid.json()).toMatchObject({ kind: 'org_api_key', org_id: customer.orgId, role: 'member', key_id: expect.stringMatching(/^key_/) });
    expect(decodeJson(String(paid.headers['payment-receipt']))).toMatchObject({ status: 'success', method: 'credits' });
    expect(await balance()).toMatchObject({ balance: before - 1 });
  });

  it('shows the balance to the organization only: another organization’s is 404', async () => {
    const other = await api.org();
    expectProblem(await api.call(other.apiKey, { method: 'GET', url: `/v1/orgs/${customer.orgId}/credits` }), 404, 'NOT_FOUND');
    expect((await api.call(other.apiKey, { method: 'GET', url: `/v1/orgs/${other.orgId}/credits` })).json()).toEqual({ org_id: other.orgId, currency: 'usd', balance: 0, topped_up: 0, charged: 0, refunded: 0, charges: 0, updated_at: null });
    expectProblem(await api.call(customer.apiKey, { method: 'POST', url: `/v1/operator/orgs/${customer.orgId}/credits/top-ups`, payload: { amount: 1 } }), 403, 'FORBIDDEN');
  });
});
