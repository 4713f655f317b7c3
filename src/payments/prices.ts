/**
 * The operations a deployment prices per request (PGWARD_PRICES, docs/payments.md). An item is an
 * operation id, or an operation id and a variant a route names (`createDemoCredential:pro`); its
 * price is a whole number of base units of PGWARD_PAYMENT_CURRENCY. An item absent is free.
 */
import type { Config } from '../config.js';

export type Prices = ReadonlyMap<string, number>;

const ITEM = /^[A-Za-z][A-Za-z0-9]*(:[a-z0-9_-]+)?$/;

/** `item=amount` entries, comma-separated; a repeated item or an amount below 1 is refused. */
export function parsePrices(spec: string): Prices {
  const prices = new Map<string, number>();
  for (const entry of spec.split(',').map((e) => e.trim()).filter(Boolean)) {
    const [item, amount, ...rest] = entry.split('=').map((part) => part.trim());
    if (!item || !ITEM.test(item) || rest.length > 0) throw new Error(`${JSON.stringify(entry)} is not operationId[:variant]=amount`);
    if (!amount || !/^[1-9][0-9]{0,14}$/.test(amount)) throw new Error(`the price of ${item} must be a whole number of base units from 1`);
    if (prices.has(item)) throw new Error(`${item} is priced twice`);
    prices.set(item, Number(amount));
  }
  return prices;
}

export interface PaymentSettings {
  readonly prices: Prices;
  readonly currency: string;
  readonly realm: string;
  readonly challengeTtlSeconds: number;
}

/** What the deployment charges, or undefined when it prices nothing (then it takes no payment at all). */
export function paymentSettings(config: Config): PaymentSettings | undefined {
  const prices = parsePrices(config.PGWARD_PRICES ?? '');
  if (prices.size === 0) return undefined;
  return { prices, currency: config.PGWARD_PAYMENT_CURRENCY, realm: config.PGWARD_PUBLIC_HOST, challengeTtlSeconds: config.PGWARD_PAYMENT_CHALLENGE_TTL_SECONDS };
}
