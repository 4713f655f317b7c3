/**
 * The built-in verifier, method `credits`: settles against the organization's prepaid credit ledger
 * (commands/credits/ledger.ts). Its proof is the challenge itself: pgward issues one only to a caller
 * of the organization that authenticated and may spend its credits, bound to that caller and that
 * request, for a few minutes, and settles it once; `payload` carries nothing.
 */
import { ChargeRefused, creditsStream, ledger, type LedgerCommand } from '../../commands/credits/ledger.js';
import { handle } from '../../commands/handle.js';
import type { EventStore } from '../store/port.js';
import type { PaymentVerifier, SettleResult, Settlement } from './verifier.js';

export const CREDITS_METHOD = 'credits';

/** `settle` waits until the read models show a write (ApiDeps.settle), so a balance read right after a payment shows it. */
export function creditLedgerVerifier(store: Pick<EventStore, 'readStream' | 'append'>, now: () => Date, settle: (stream: string, position: bigint) => Promise<void>): PaymentVerifier {
  const run = async (settlement: Settlement, command: LedgerCommand) => {
    const stream = creditsStream(settlement.orgId);
    const result = await handle(store, stream, ledger, command, { correlationId: settlement.requestId, actor: settlement.principal, now });
    const last = result.recorded.at(-1);
    if (last) await settle(stream, last.position);
    return result;
  };
  return {
    method: CREDITS_METHOD,
    async settle(settlement): Promise<SettleResult> {
      const { orgId, challengeId, charge, operation } = settlement;
      try {
        const result = await run(settlement, { kind: 'charge', orgId, challengeId, amount: Number(charge.amount), currency: charge.currency, operation });
        return { ok: true, reference: result.events[0]!.metadata.event_id };
      } catch (error) {
        if (!(error instanceof ChargeRefused)) throw error;
        const failure = error.reason === 'already-settled' ? 'invalid-challenge' : error.reason === 'insufficient' ? 'payment-insufficient' : 'verification-failed';
        return { ok: false, failure, detail: error.message };
      }
    },
    async refund(settlement, reason) {
      await run(settlement, { kind: 'refund', orgId: settlement.orgId, challengeId: settlement.challengeId, reason });
    },
  };
}
