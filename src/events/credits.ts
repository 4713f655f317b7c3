/** An organization's prepaid credit ledger (docs/payments.md): one stream per organization, `credits-<org_id>`. */
import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { OrgId, text } from './fields.js';

/** Base units of the ledger's currency (cents for usd): a whole number, at most 10^15. */
export const CreditAmount = z.int().min(1).max(1e15);
/** ISO 4217 code in lowercase, as the charge intent writes currencies. */
export const Currency = z.string().regex(/^[a-z]{3}$/, { message: 'expected a lowercase ISO 4217 code such as usd' });
/** A payment challenge's id (base64url of an HMAC-SHA256). */
export const ChallengeId = z.string().regex(/^[A-Za-z0-9_-]{43}$/, { message: 'expected a challenge id' });

/** An operator added prepaid credits; `reference` names the payment that bought them (a provider's id), if any. */
export const CreditsToppedUp = defineEvent(
  'CreditsToppedUp',
  1,
  z.strictObject({ org_id: OrgId, amount: CreditAmount, currency: Currency, reference: text(200) }),
);
export type CreditsToppedUp = z.infer<typeof CreditsToppedUp.schema>;

/** A payment challenge was settled from the ledger: `operation` is the priced item (docs/payments.md). Once per challenge. */
export const CreditsCharged = defineEvent(
  'CreditsCharged',
  1,
  z.strictObject({ org_id: OrgId, challenge_id: ChallengeId, amount: CreditAmount, currency: Currency, operation: text(200, 1) }),
);
export type CreditsCharged = z.infer<typeof CreditsCharged.schema>;

/** A charge was given back: the paid request failed, so it delivered nothing. */
export const CreditsRefunded = defineEvent(
  'CreditsRefunded',
  1,
  z.strictObject({ org_id: OrgId, challenge_id: ChallengeId, amount: CreditAmount, currency: Currency, reason: text(500) }),
);
export type CreditsRefunded = z.infer<typeof CreditsRefunded.schema>;
