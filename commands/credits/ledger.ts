/**
 * An organization's prepaid credit ledger, one stream per organization (`credits-<org_id>`). A
 * challenge settles at most once: the charge decision reads the stream and appends at the revision
 * it read, so of concurrent settlements of one challenge exactly one appends and the others,
 * deciding again on the stream that now holds it, are refused.
 */
import type { CatalogEvent } from '../../src/events/catalog.js';
import { CreditsCharged, CreditsRefunded, CreditsToppedUp } from '../../src/events/credits.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate } from '../handle.js';

export const creditsStream = (orgId: string): string => `credits-${orgId}`;

export interface LedgerState {
  readonly balance: number;
  /** The ledger's currency, fixed by its first entry. */
  readonly currency?: string;
  /** Each settled challenge's amount, and whether it was refunded. */
  readonly charges: ReadonlyMap<string, { readonly amount: number; readonly refunded: boolean }>;
}

export type LedgerCommand =
  | { readonly kind: 'top-up'; readonly orgId: string; readonly amount: number; readonly currency: string; readonly reference: string }
  | { readonly kind: 'charge'; readonly orgId: string; readonly challengeId: string; readonly amount: number; readonly currency: string; readonly operation: string }
  | { readonly kind: 'refund'; readonly orgId: string; readonly challengeId: string; readonly reason: string };

/** Why a charge was refused, for the verifier to tell the payer. */
export class ChargeRefused extends DomainError {
  constructor(
    readonly reason: 'already-settled' | 'insufficient' | 'currency',
    message: string,
  ) {
    super(reason === 'already-settled' ? 'CONFLICT' : 'INVALID_STATE', message);
  }
}

export function evolveLedger(state: LedgerState, event: CatalogEvent): LedgerState {
  switch (event.type) {
    case CreditsToppedUp.type:
      return { ...state, balance: state.balance + event.data.amount, currency: state.currency ?? event.data.currency };
    case CreditsCharged.type:
      return { ...state, balance: state.balance - event.data.amount, charges: new Map(state.charges).set(event.data.challenge_id, { amount: event.data.amount, refunded: false }) };
    case CreditsRefunded.type:
      return { ...state, balance: state.balance + event.data.amount, charges: new Map(state.charges).set(event.data.challenge_id, { amount: event.data.amount, refunded: true }) };
    default:
      return state;
  }
}

function sameCurrency(state: LedgerState, currency: string): DomainError | undefined {
  if (state.currency !== undefined && state.currency !== currency) return new ChargeRefused('currency', `the ledger holds ${state.currency}, not ${currency}`);
  return undefined;
}

export const ledger: Aggregate<LedgerState, LedgerCommand> = {
  initial: { balance: 0, charges: new Map() },
  evolve: evolveLedger,
  decide(state, command) {
    switch (command.kind) {
      case 'top-up':
        return sameCurrency(state, command.currency) ?? [emit(CreditsToppedUp, { org_id: command.orgId, amount: command.amount, currency: command.currency, reference: command.reference })];
      case 'charge': {
        if (state.charges.has(command.challengeId)) return new ChargeRefused('already-settled', 'this challenge was settled already');
        const refused = sameCurrency(state, command.currency);
        if (refused) return refused;
        if (state.balance < command.amount) return new ChargeRefused('insufficient', `the organization has ${state.balance} ${command.currency} of prepaid credit, the charge is ${command.amount}`);
        return [emit(CreditsCharged, { org_id: command.orgId, challenge_id: command.challengeId, amount: command.amount, currency: command.currency, operation: command.operation })];
      }
      case 'refund': {
        const charge = state.charges.get(command.challengeId);
        if (!charge) return new DomainError('NOT_FOUND', 'no charge settled this challenge');
        if (charge.refunded) return [];
        return [emit(CreditsRefunded, { org_id: command.orgId, challenge_id: command.challengeId, amount: charge.amount, currency: state.currency!, reason: command.reason })];
      }
    }
  },
};
