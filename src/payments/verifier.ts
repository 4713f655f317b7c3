/**
 * Where a payment credential is settled (docs/payments.md). pgward checks what it can check alone
 * (the challenge is its own, unexpired, bound to this request) and hands the rest to the verifier
 * of the challenge's `method`: whether the credential's `payload` proves the payment, and taking it,
 * at most once per challenge id. A verifier for a real provider (a card processor, a chain) checks
 * the provider's proof in `payload`; the built-in one debits the organization's prepaid credits.
 */
import type { ChargeRequest } from './challenge.js';

export interface Settlement {
  /** The challenge's id; a verifier settles each at most once, also under concurrent retries. */
  readonly challengeId: string;
  /** The organization the challenge was issued to, after it authenticated. */
  readonly orgId: string;
  /** Who asked for the challenge: `api_key:<key_id>` or `user:<subject>`. */
  readonly principal: string;
  /** The priced item (docs/payments.md), e.g. `createDemoCredential:pro`. */
  readonly operation: string;
  readonly charge: ChargeRequest;
  /** The credential's method-specific proof. */
  readonly payload: Readonly<Record<string, unknown>>;
  /** The credential's optional payer identifier. */
  readonly source?: string;
  readonly requestId: string;
}

/** Why a credential did not settle; the draft's problem types (§8.2). */
export type SettlementFailure = 'verification-failed' | 'payment-insufficient' | 'invalid-challenge';

export type SettleResult = { readonly ok: true; readonly reference: string } | { readonly ok: false; readonly failure: SettlementFailure; readonly detail: string };

export interface PaymentVerifier {
  /** The payment method identifier challenges name (lowercase letters). */
  readonly method: string;
  /** Verifies the proof and takes the payment, once per challenge id. */
  settle(settlement: Settlement): Promise<SettleResult>;
  /** Gives back a settled payment whose request then failed (it delivered nothing). */
  refund(settlement: Settlement, reason: string): Promise<void>;
}
