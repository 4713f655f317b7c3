/**
 * The 402 flow over real HTTP with fetch, as a client of the Payment scheme would run it: ask,
 * read the challenge from WWW-Authenticate, answer it with Authorization: Payment, read the receipt.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORG_KEY_PREFIX } from '../../commands/organizations/create-organization.js';
import { newOperatorToken } from '../../src/auth/operators.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { newSecret } from '../../src/crypto/tokens.js';
import { DEMO_IDS, provisionDemo } from '../../src/demo/provision.js';
import { decodeJson, parseChallenges } from '../../src/payments/auth-params.js';
import { credentialHeader, type PaymentChallenge } from '../../src/payments/challenge.js';
import { startApi, type TestApi } from '../support/api.js';
import { demoUpstream } from '../support/demo-upstream.js';

const operator = newOperatorToken('billing');
let api: TestApi;
let upstream: ReturnType<typeof demoUpstream>;
let base: string;

beforeAll(async () => {
  api = await startApi('payments_e2e', { PGWARD_DEMO: 'on', PGWARD_PRICES: 'createDemoCredential:pro=25', PGWARD_PAYMENT_CURRENCY: 'eur', PGWARD_OPERATOR_TOKENS: operator.entry });
  upstream = demoUpstream('paye2e');
  await provisionDemo({ store: api.store, keyring: parseKeyring(api.masterKey) }, upstream, async () => newSecret(ORG_KEY_PREFIX));
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await upstream?.drop();
});

describe('paying for a request over HTTP', () => {
  it('402 with a challenge, top-up, the credential settles once with a receipt, and its replay is refused', async () => {
    const { orgId, apiKey } = await api.org();
    const ask = (authorization: string) => fetch(`${base}/v1/demo/credentials`, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: '{"tier":"pro"}' });

    const unpaid = await ask(`Bearer ${apiKey}`);
    expect(unpaid.status).toBe(402);
    expect(unpaid.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await unpaid.json()).toMatchObject({ code: 'PAYMENT_REQUIRED', status: 402, payment_error: 'payment-required' });
    const [challenge] = parseChallenges(unpaid.headers.get('www-authenticate')!);
    expect(challenge!.scheme).toBe('Payment');
    const params = challenge!.params as unknown as PaymentChallenge;
    expect(decodeJson(params.request)).toMatchObject({ amount: '25', currency: 'eur' });

    const topUp = await fetch(`${base}/v1/operator/orgs/${orgId}/credits/top-ups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operator.token}`, 'content-type': 'application/json', 'idempotency-key': 'e2e-1' },
      body: JSON.stringify({ amount: 100, reference: 'wire transfer 42' }),
    });
    expect(topUp.status).toBe(201);

    const credential = credentialHeader(params, {});
    const paid = await ask(credential);
    expect(paid.status).toBe(201);
    expect(await paid.json()).toMatchObject({ tier: 'pro', policy: { id: DEMO_IDS.proPolicy } });
    expect(paid.headers.get('cache-control')).toBe('private');
    expect(decodeJson(paid.headers.get('payment-receipt')!)).toMatchObject({ status: 'success', method: 'credits' });

    const replay = await ask(credential);
    expect(replay.status).toBe(401);
    expect(await replay.json()).toMatchObject({ code: 'UNAUTHORIZED', payment_error: 'invalid-challenge' });
    expect(replay.headers.get('payment-receipt')).toBeNull();

    const balance = await fetch(`${base}/v1/orgs/${orgId}/credits`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(await balance.json()).toMatchObject({ org_id: orgId, currency: 'eur', balance: 75, topped_up: 100, charged: 25, refunded: 0, charges: 1 });
  });
});
