/**
 * An organization's prepaid credits (docs/payments.md): its members read the balance, the
 * deployment's operators top it up (what a payment provider's webhook would report). Priced
 * requests (PGWARD_PRICES) settle against it through the built-in `credits` payment method.
 */
import { z } from 'zod';
import { creditsStream, ledger } from '../../../commands/credits/ledger.js';
import { evolveCreditBalance, type CreditBalanceRow } from '../../../projections/credits.js';
import { findCreditBalance } from '../../../queries/credits.js';
import { CreditAmount } from '../../events/credits.js';
import { text } from '../../events/fields.js';
import { requireOperator } from '../plugins/auth.js';
import { Problem } from '../problem.js';
import { OrgParams } from './organizations.js';
import { addressedOrg, errorResponses, execute, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';
import { organizationRecord } from './usage.js';

const CreditBalance = z
  .object({
    org_id: z.string(),
    currency: z.string().describe('ISO 4217, lowercase; amounts are in its base units (cents for usd)'),
    balance: z.int().describe('What priced requests can still spend'),
    topped_up: z.int().describe('Every top-up, summed'),
    charged: z.int().describe('Every settled charge, summed (refunds not deducted)'),
    refunded: z.int().describe('Charges given back because their request failed'),
    charges: z.int().describe('Settled charges, counted'),
    updated_at: Timestamp.nullable().describe('The newest ledger entry’s time; null before the first'),
  })
  .meta({ id: 'CreditBalance' });
type CreditBalance = z.infer<typeof CreditBalance>;

const TopUpRequest = z
  .strictObject({
    amount: CreditAmount.describe('Base units of the deployment’s currency (PGWARD_PAYMENT_CURRENCY) to add'),
    reference: text(200).default('').describe('The payment that bought them, e.g. a provider’s payment id'),
  })
  .meta({ title: 'TopUpCreditsRequest' });

export function creditBalanceRoutes(app: Api, deps: ApiDeps): void {
  const currency = () => {
    if (!deps.payments) throw new Problem('NOT_FOUND', 'this deployment prices nothing (PGWARD_PRICES), so it keeps no credits');
    return deps.payments.currency;
  };
  const balance = async (orgId: string): Promise<CreditBalance> => {
    const row: CreditBalanceRow | undefined = await readModelOrStream(deps, () => findCreditBalance(deps.pool, orgId), creditsStream(orgId), evolveCreditBalance);
    if (!row) return { org_id: orgId, currency: currency(), balance: 0, topped_up: 0, charged: 0, refunded: 0, charges: 0, updated_at: null };
    return { org_id: orgId, currency: row.currency, balance: row.balance, topped_up: row.topped_up, charged: row.charged, refunded: row.refunded, charges: row.charges, updated_at: iso(row.updated_at) };
  };

  app.get(
    '/v1/orgs/:org_id/credits',
    {
      schema: {
        operationId: 'getCreditBalance',
        summary: 'An organization’s prepaid credit balance',
        description: 'What priced requests (docs/payments.md) settle against. 404 on a deployment that prices nothing.',
        tags: ['payments'],
        params: OrgParams,
        response: { 200: CreditBalance, ...errorResponses('NOT_FOUND') },
      },
    },
    async (request) => {
      const orgId = addressedOrg(requireRole(request, 'viewer'), request.params.org_id);
      currency();
      return balance(orgId);
    },
  );

  app.post(
    '/v1/operator/orgs/:org_id/credits/top-ups',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'topUpCredits',
        summary: 'Add prepaid credits to an organization (operators)',
        description: 'What an operator or a payment provider’s webhook records once a payment for credits cleared. Send an Idempotency-Key: a retry adds nothing twice.',
        tags: ['operator'],
        params: OrgParams,
        body: TopUpRequest,
        response: { 201: CreditBalance, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'IDEMPOTENCY_KEY_REUSED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      requireOperator(request);
      const { row } = await organizationRecord(deps, request.params.org_id);
      await execute(deps, request, creditsStream(row.org_id), ledger, { kind: 'top-up', orgId: row.org_id, amount: request.body.amount, currency: currency(), reference: request.body.reference });
      return reply.code(201).send(await balance(row.org_id));
    },
  );
}
