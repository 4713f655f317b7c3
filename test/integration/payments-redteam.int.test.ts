/**
 * Red-team findings on payments (docs/payments.md): top-ups that would carry the prepaid ledger
 * past what its totals can count exactly, and Payment credentials spelled to confuse the parser.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newOperatorToken } from '../../src/auth/operators.js';
import { encodeJson, parseChallenges } from '../../src/payments/auth-params.js';
import { credentialHeader, type PaymentChallenge } from '../../src/payments/challenge.js';
import { startApi, type TestApi } from '../support/api.js';

const operator = newOperatorToken('billing');
let api: TestApi;
let customer: { orgId: string; apiKey: string };

beforeAll(async () => {
  api = await startApi('paymentsredteam', { PGWARD_PRICES: 'getCurrentCaller=3,createCompany=2', PGWARD_OPERATOR_TOKENS: operator.entry });
  customer = await api.org('pro');
}, 60_000);
afterAll(async () => {
  await api?.stop();
});

const topUp = (orgId: string, amount: number) => api.call(operator.token, { method: 'POST', url: `/v1/operator/orgs/${orgId}/credits/top-ups`, payload: { amount, reference: 'pi_test' } });
const balanceOf = async (org: { orgId: string; apiKey: string }) => {
  const response = await api.call(org.apiKey, { method: 'GET', url: `/v1/orgs/${org.orgId}/credits` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json() as Record<string, number>;
};
const codeOf = (response: LightMyRequestResponse) => [response.statusCode, (response.json() as { code: string }).code];

async function challenge(): Promise<PaymentChallenge> {
  const response = await api.call(customer.apiKey, { method: 'GET', url: '/v1/me' });
  expect(response.statusCode, response.body).toBe(402);
  return parseChallenges(String(response.headers['www-authenticate']))[0]!.params as unknown as PaymentChallenge;
}

describe('top-ups', () => {
  it('refuses a top-up that would take the ledger past 2^53 - 1 units with 409 INVALID_STATE, and the balance stays readable and exact', async () => {
    const org = await api.org();
    for (let i = 0; i < 9; i++) expect((await topUp(org.orgId, 1e15)).statusCode).toBe(201);
    expect((await topUp(org.orgId, 7_199_254_740_991)).statusCode).toBe(201);
    expect(codeOf(await topUp(org.orgId, 1))).toEqual([409, 'INVALID_STATE']);
    expect(await balanceOf(org)).toMatchObject({ balance: Number.MAX_SAFE_INTEGER, topped_up: Number.MAX_SAFE_INTEGER });
  });

  it('refuses zero, negative, fractional, string and over-large amounts with 400 INVALID_INPUT', async () => {
    for (const amount of [0, -5, 1.5, '10', 1e15 + 1, Number.MAX_SAFE_INTEGER + 2]) {
      const response = await api.call(operator.token, { method: 'POST', url: `/v1/operator/orgs/${customer.orgId}/credits/top-ups`, payload: { amount, reference: 'x' } });
      expect([amount, ...codeOf(response)]).toEqual([amount, 400, 'INVALID_INPUT']);
    }
  });
});

describe('Payment credentials spelled to confuse', () => {
  it('refuses padded, spaced, doubled, empty and huge credentials with 401 and charges nothing', async () => {
    expect((await topUp(customer.orgId, 100)).statusCode).toBe(201);
    const good = credentialHeader(await challenge(), {});
    const token = good.slice('Payment '.length);
    const tricks = [`Payment ${token}==`, `Payment ${token.slice(0, 10)} ${token.slice(10)}`, `Payment ${token}, Payment ${token}`, 'Payment ', `Payment ${'A'.repeat(60_000)}`, `Payment ${encodeJson({ challenge: {}, payload: {} })}`, `Payment\t${token}`];
    for (const authorization of tricks) {
      const response = await api.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization } });
      expect([authorization.slice(0, 20), response.statusCode]).toEqual([authorization.slice(0, 20), 401]);
    }
    expect(await balanceOf(customer)).toMatchObject({ balance: 100, charges: 0 });
    const paid = await api.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `PAYMENT ${token}` } });
    expect(paid.statusCode, paid.body).toBe(200);
    const again = await api.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `payment ${token}` } });
    expect(again.statusCode).toBe(401);
    expect(await balanceOf(customer)).toMatchObject({ balance: 97, charges: 1 });
  });
});

describe('paid creates and their Idempotency-Key', () => {
  it('gives back the charge of a retry the key answers with the first response (it delivered nothing new), with no receipt', async () => {
    const org = await api.org('pro');
    expect((await topUp(org.orgId, 10)).statusCode).toBe(201);
    const create = async (authorization: string) =>
      api.app.inject({ method: 'POST', url: '/v1/crm/companies', headers: { authorization, 'idempotency-key': 'create-once', 'content-type': 'application/json' }, payload: JSON.stringify({ name: 'Paid Co' }) });
    const pay = async () => {
      const asked = await create(`Bearer ${org.apiKey}`);
      expect(asked.statusCode, asked.body).toBe(402);
      return create(credentialHeader(parseChallenges(String(asked.headers['www-authenticate']))[0]!.params as unknown as PaymentChallenge, {}));
    };
    const first = await pay();
    expect([first.statusCode, typeof first.headers['payment-receipt']]).toEqual([201, 'string']);
    const retry = await pay();
    expect([retry.statusCode, retry.headers['idempotent-replayed'], retry.headers['payment-receipt'], retry.json()]).toEqual([201, 'true', undefined, first.json()]);
    expect(await balanceOf(org)).toMatchObject({ balance: 8, charged: 4, refunded: 2, charges: 2 });
    const companies = (await api.call(org.apiKey, { method: 'GET', url: '/v1/crm/companies' })).json() as { companies: unknown[] };
    expect(companies.companies).toHaveLength(1);
  });
});
