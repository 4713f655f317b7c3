/** What `GET /v1/demo` states: pure, from the demo's state, its settings and its policy. */
import type { PolicyRow } from '../../projections/policies.js';
import type { DemoState } from '../../commands/demo/demo.js';
import { DemoTier } from '../events/demo.js';
import type { MaskMode } from '../events/policies.js';
import type { DemoSettings } from './settings.js';
import { SHOP_TABLES } from './shop.js';

export type Treatment = 'allowed' | 'masked' | 'hidden';

export interface ColumnOffer {
  readonly name: string;
  readonly type: string;
  readonly description: string;
  readonly treatment: Treatment;
  readonly mask: MaskMode | null;
}

export interface TableOffer {
  readonly table: string;
  readonly description: string;
  readonly rows: number;
  readonly treatment: 'allowed' | 'hidden';
  readonly columns: ColumnOffer[];
}

export type DemoStatus = 'available' | 'paused' | 'not_configured';

export function demoStatus(settings: DemoSettings | undefined, state: DemoState): DemoStatus {
  if (!settings || !state.provisioned) return 'not_configured';
  return state.paused ? 'paused' : 'available';
}

/** How the policy treats each table and column of the shop: a table off the allowlist is hidden whole. */
export function treatments(policy: Pick<PolicyRow, 'allowed_tables' | 'masked_columns'>): TableOffer[] {
  return SHOP_TABLES.map((table) => {
    const qualified = `public.${table.name}`;
    const allowed = policy.allowed_tables.includes(qualified) || policy.allowed_tables.includes('public.*');
    return {
      table: qualified,
      description: table.description,
      rows: table.rows,
      treatment: allowed ? 'allowed' : 'hidden',
      columns: table.columns.map((column) => {
        const mask = policy.masked_columns[`${qualified}.${column.name}`] ?? null;
        return { ...column, treatment: !allowed ? 'hidden' : mask ? 'masked' : 'allowed', mask: allowed ? mask : null };
      }),
    };
  });
}

export const PAID_TIER_REFUSAL = 'paid tiers need a payment method, which this deployment does not take';

export interface TierPrice {
  readonly amount: number;
  readonly currency: string;
}

export interface TierOffer {
  readonly tier: DemoTier;
  readonly available: boolean;
  readonly policy_id: string | null;
  readonly price: TierPrice | null;
  readonly detail: string;
}

/**
 * Every tier: the free one is available when the demo has its policy; a paid one when the demo has
 * its policy and the deployment prices it (`priceOf`), paid per credential (docs/payments.md).
 */
export function tierOffers(state: DemoState, priceOf: (tier: DemoTier) => TierPrice | undefined): TierOffer[] {
  return DemoTier.options.map((tier) => {
    const policyId = state.provisioned?.tiers.find((t) => t.tier === tier)?.policy_id ?? null;
    const unavailable = (detail: string): TierOffer => ({ tier, available: false, policy_id: null, price: null, detail });
    if (tier === 'free') return policyId ? { tier, available: true, policy_id: policyId, price: null, detail: 'read-only access to the demo shop' } : unavailable('no policy for this tier');
    const price = priceOf(tier);
    if (!price) return unavailable(PAID_TIER_REFUSAL);
    if (!policyId) return unavailable('no policy for this tier');
    return { tier, available: true, policy_id: policyId, price, detail: `read-only access to the demo shop under a larger row cap and query budget, ${price.amount} ${price.currency} per credential paid from an organization’s prepaid credits` };
  });
}
