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

/** Every tier: the ones the demo has a policy for are available (all free), the paid ones are not purchasable here. */
export function tierOffers(state: DemoState): { tier: DemoTier; available: boolean; policy_id: string | null; detail: string }[] {
  return DemoTier.options.map((tier) => {
    const policyId = state.provisioned?.tiers.find((t) => t.tier === tier)?.policy_id ?? null;
    if (tier !== 'free') return { tier, available: false, policy_id: null, detail: PAID_TIER_REFUSAL };
    return { tier, available: policyId !== null, policy_id: policyId, detail: policyId ? 'read-only access to the demo shop' : 'no policy for this tier' };
  });
}
