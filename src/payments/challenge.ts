/**
 * Payment challenges (draft-httpauth-payment §5.1) and the credentials that answer them (§5.2).
 * A challenge's `id` is the draft's recommended HMAC-SHA256 binding over its seven slots (realm,
 * method, intent, request, expires, digest, opaque), keyed by a secret derived from the master
 * keyring: pgward keeps no state for a challenge it issued until one is settled. `opaque` binds
 * the rest of the request (its HTTP method and path, the payer organization and principal, and a
 * nonce, so that two challenges for the same request differ), `digest` its body.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Keyring } from '../crypto/seal.js';
import { AuthParamError, decodeJson, encodeJson, serializeChallenge } from './auth-params.js';

export const PAYMENT_SCHEME = 'Payment';

/** What a challenge carries on the wire; `request` and `opaque` are base64url JCS. */
export interface PaymentChallenge {
  readonly id: string;
  readonly realm: string;
  readonly method: string;
  readonly intent: string;
  readonly request: string;
  readonly expires: string;
  readonly digest?: string;
  readonly opaque: string;
  readonly description?: string;
}

/** The `charge` intent's request (draft-payment-intent-charge §4): an amount in base units of `currency`. */
export const ChargeRequest = z.object({
  amount: z.string().regex(/^[1-9][0-9]{0,15}$/),
  currency: z.string().min(1).max(64),
  description: z.string().max(500).optional(),
  externalId: z.string().max(200).optional(),
});
export type ChargeRequest = z.infer<typeof ChargeRequest>;

/** What `opaque` binds: the request the challenge was issued for, and who may settle it. */
export const ChallengeBinding = z.strictObject({
  http_method: z.string().min(1).max(16),
  path: z.string().min(1).max(2048),
  org_id: z.string().min(1).max(128),
  principal: z.string().min(1).max(200),
  /** What signed the principal in; the settled request acts as that caller (docs/permissions.md). */
  caller: z.enum(['api_key', 'jwt', 'session']),
  /** The issuer of a `jwt` caller's token. */
  issuer: z.string().min(1).max(2048).optional(),
  role: z.string().min(1).max(32),
  nonce: z.string().min(16).max(64),
});
export type ChallengeBinding = z.infer<typeof ChallengeBinding>;

const Text = z.string().max(4096);

/** A credential (§5.2): the echoed challenge, an optional payer and the method's proof. */
export const PaymentCredential = z.object({
  challenge: z.object({
    id: z.string().min(1).max(128),
    realm: Text,
    method: z.string().regex(/^[a-z]+$/),
    intent: z.string().regex(/^[A-Za-z0-9-]+$/),
    request: Text,
    expires: Text,
    digest: Text.optional(),
    opaque: Text,
    description: Text.optional(),
  }),
  source: z.string().max(500).optional(),
  payload: z.record(z.string(), z.unknown()),
});
export type PaymentCredential = z.infer<typeof PaymentCredential>;

/** The secrets challenge ids are keyed with: one per master key, so a challenge outlives a key rotation. */
export function challengeSecrets(keyring: Keyring): { readonly current: Buffer; readonly all: readonly Buffer[] } {
  const derive = (key: Buffer) => createHmac('sha256', key).update('pgward-payment-challenge').digest();
  return { current: derive(keyring.keys.get(keyring.current)!), all: [...keyring.keys.values()].map(derive) };
}

function mac(secret: Buffer, c: Omit<PaymentChallenge, 'id' | 'description'>): Buffer {
  const slots = [c.realm, c.method, c.intent, c.request, c.expires, c.digest ?? '', c.opaque];
  return createHmac('sha256', secret).update(slots.join('|')).digest();
}

/** The body's Content-Digest value (RFC 9530, sha-256) over the bytes received; undefined without a body. */
export function bodyDigest(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  return `sha-256=:${createHash('sha256').update(raw, 'utf8').digest('base64')}:`;
}

export interface ChallengeTerms {
  readonly realm: string;
  readonly method: string;
  readonly charge: ChargeRequest;
  readonly expires: Date;
  readonly digest: string | undefined;
  readonly binding: Omit<ChallengeBinding, 'nonce'>;
}

export function issueChallenge(secret: Buffer, terms: ChallengeTerms): PaymentChallenge {
  const unsigned = {
    realm: terms.realm,
    method: terms.method,
    intent: 'charge',
    request: encodeJson(terms.charge),
    expires: terms.expires.toISOString(),
    ...(terms.digest ? { digest: terms.digest } : {}),
    opaque: encodeJson({ ...terms.binding, nonce: randomBytes(16).toString('base64url') }),
  };
  return { id: mac(secret, unsigned).toString('base64url'), ...unsigned, ...(terms.charge.description ? { description: terms.charge.description } : {}) };
}

/** The WWW-Authenticate value of a challenge. */
export function challengeHeader(challenge: PaymentChallenge): string {
  const { id, realm, method, intent, request, expires, digest, opaque, description } = challenge;
  return serializeChallenge({ scheme: PAYMENT_SCHEME, params: { id, realm, method, intent, request, expires, ...(digest ? { digest } : {}), opaque, ...(description ? { description } : {}) } });
}

/** Whether one of `secrets` made this challenge's id, compared in constant time. */
export function authentic(secrets: readonly Buffer[], challenge: PaymentCredential['challenge']): boolean {
  // The text is compared, not its decoding: base64url decoders skip stray characters and ignore spare bits.
  const presented = Buffer.from(challenge.id);
  return secrets.some((secret) => {
    const expected = Buffer.from(mac(secret, challenge).toString('base64url'));
    return presented.length === expected.length && timingSafeEqual(presented, expected);
  });
}

/** The credential of an `Authorization: Payment <base64url>` value; AuthParamError when it is not one. */
export function parseCredential(token: string): PaymentCredential {
  const parsed = PaymentCredential.safeParse(decodeJson(token));
  if (!parsed.success) throw new AuthParamError('the payment credential is not a JSON object with challenge and payload');
  return parsed.data;
}

/** The `Authorization` value answering `challenge` with `payload`: what a client sends. */
export function credentialHeader(challenge: PaymentChallenge, payload: Record<string, unknown>, source?: string): string {
  return `${PAYMENT_SCHEME} ${encodeJson({ challenge, payload, ...(source ? { source } : {}) })}`;
}

export interface Receipt {
  readonly status: 'success';
  readonly method: string;
  readonly timestamp: string;
  readonly reference: string;
}

/** The Payment-Receipt value (§5.3). */
export function receiptHeader(receipt: Receipt): string {
  return encodeJson(receipt);
}
