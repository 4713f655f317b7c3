import { decodeEvent } from '../src/events/catalog.js';
import { CreditsCharged, CreditsRefunded, CreditsToppedUp } from '../src/events/credits.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** An organization's prepaid credit balance and the totals that make it up; `version` counts its ledger entries. */
export type CreditBalanceRow = {
  org_id: string;
  currency: string;
  balance: number;
  topped_up: number;
  charged: number;
  refunded: number;
  charges: number;
  version: number;
  updated_at: string;
};

const STREAM = 'credits-';

export function evolveCreditBalance(row: CreditBalanceRow | undefined, event: RecordedEvent): CreditBalanceRow | null {
  const decoded = decodeEvent(event);
  const base = row ?? { org_id: '', currency: '', balance: 0, topped_up: 0, charged: 0, refunded: 0, charges: 0, version: 0, updated_at: '' };
  const next = { ...base, version: base.version + 1, updated_at: decoded.metadata.at };
  switch (decoded.type) {
    case CreditsToppedUp.type:
      return { ...next, org_id: decoded.data.org_id, currency: base.currency || decoded.data.currency, balance: base.balance + decoded.data.amount, topped_up: base.topped_up + decoded.data.amount };
    case CreditsCharged.type:
      return { ...next, org_id: decoded.data.org_id, currency: base.currency || decoded.data.currency, balance: base.balance - decoded.data.amount, charged: base.charged + decoded.data.amount, charges: base.charges + 1 };
    case CreditsRefunded.type:
      return { ...next, org_id: decoded.data.org_id, balance: base.balance + decoded.data.amount, refunded: base.refunded + decoded.data.amount };
    default:
      return row ?? null;
  }
}

export const creditBalancesProjection = rowProjection<CreditBalanceRow>({
  name: 'credit_balances',
  streamPrefixes: [STREAM],
  table: {
    name: 'credit_balances',
    key: 'org_id',
    columnNames: ['org_id', 'currency', 'balance', 'topped_up', 'charged', 'refunded', 'charges', 'version', 'updated_at'],
    columns:
      'org_id text primary key, currency text not null, balance bigint not null, topped_up bigint not null, charged bigint not null, refunded bigint not null, charges integer not null, version integer not null, updated_at timestamptz not null',
    orderBy: 'org_id',
  },
  keyOf: (event) => (event.stream.startsWith(STREAM) ? event.stream.slice(STREAM.length) : undefined),
  evolve: evolveCreditBalance,
});
