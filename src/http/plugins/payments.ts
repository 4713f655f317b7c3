/**
 * Per-request charges (spec §5.3, draft-httpauth-payment; docs/payments.md). A request the deployment
 * prices (PGWARD_PRICES, by operation id and the variant its route names) is answered 402
 * PAYMENT_REQUIRED with a Payment challenge for its authenticated caller; the same request sent again
 * with `Authorization: Payment <credential>` is settled by the verifier before its handler runs, gets
 * a `Payment-Receipt` when it succeeds, and is refunded when it fails. Runs after validation, so a
 * request that would be refused anyway is refused before it costs anything, and before the
 * Idempotency-Key claim, so a 402 is never what a key replays.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { findApiKey } from '../../../queries/api-keys.js';
import type { ApiKeyRole } from '../../events/organizations.js';
import { AuthParamError, decodeJson } from '../../payments/auth-params.js';
import {
  authentic,
  bodyDigest,
  ChallengeBinding,
  challengeHeader,
  ChargeRequest,
  issueChallenge,
  parseCredential,
  receiptHeader,
  type PaymentChallenge,
  type PaymentCredential,
} from '../../payments/challenge.js';
import type { PaymentSettings } from '../../payments/prices.js';
import type { PaymentVerifier, Settlement } from '../../payments/verifier.js';
import { Problem, type PaymentError } from '../problem.js';
import { authenticateCaller, callerOf, carriesPayment, type Authenticators, type Caller } from './auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The settled payment of this request, set by the payments plugin. */
    payment?: { readonly settlement: Settlement; readonly reference: string; readonly method: string; readonly at: string };
  }
  interface FastifyContextConfig {
    /** The variant of the operation a request asks for, priced as `operationId:variant` (docs/payments.md). */
    priceVariant?: (request: FastifyRequest) => string | undefined;
  }
}

/** Roles that may spend the organization's credits: every one that may change something (docs/permissions.md). */
const SPENDING_ROLES: ReadonlySet<ApiKeyRole> = new Set(['member', 'admin', 'owner']);

export interface PaymentsOptions {
  readonly settings?: PaymentSettings;
  readonly verifier?: PaymentVerifier;
  /** Challenge-binding secrets: `current` signs, any of `all` verifies (a rotated master key keeps its challenges valid). */
  readonly secrets: { readonly current: Buffer; readonly all: readonly Buffer[] };
  readonly authenticators: Authenticators;
  readonly pool: pg.Pool;
  readonly now: () => Date;
}

/** The priced item a request asks for, and its price; undefined when it is free. */
function pricedItem(request: FastifyRequest, settings: PaymentSettings | undefined): { item: string; amount: number } | undefined {
  const operationId = (request.routeOptions.schema as { operationId?: string } | undefined)?.operationId;
  if (!settings || !operationId) return undefined;
  const variant = request.routeOptions.config.priceVariant?.(request);
  const item = variant ? `${operationId}:${variant}` : operationId;
  const amount = settings.prices.get(item);
  return amount === undefined ? undefined : { item, amount };
}

function principalOf(caller: Caller): string {
  return caller.kind === 'api_key' ? `api_key:${caller.keyId}` : `user:${caller.subject}`;
}

/** A Payment credential that proves nothing: 401, as an expired, revoked or malformed credential is (spec §7). */
function refused(paymentError: PaymentError, detail: string): Problem {
  return new Problem('UNAUTHORIZED', `${detail}; ask again with Authorization: Bearer for a new payment challenge`, {
    headers: { 'www-authenticate': 'Bearer realm="pgward"', 'cache-control': 'no-store' },
    paymentError,
  });
}

function paymentRequired(challenge: PaymentChallenge, paymentError: PaymentError, detail: string): Problem {
  return new Problem('PAYMENT_REQUIRED', detail, { headers: { 'www-authenticate': challengeHeader(challenge), 'cache-control': 'no-store' }, paymentError });
}

/** The credential of an `Authorization: Payment` value, with its challenge's bound request and charge; 401 malformed-credential when any is not what pgward issues. */
function readCredential(authorization: string): { credential: PaymentCredential; binding: ChallengeBinding; charge: ChargeRequest } {
  const malformed = () => refused('malformed-credential', 'the Payment credential is not base64url JSON naming a challenge of pgward’s');
  let credential: PaymentCredential;
  try {
    credential = parseCredential(authorization.replace(/^Payment +/i, '').trim());
  } catch (error) {
    if (error instanceof AuthParamError) throw malformed();
    throw error;
  }
  const decoded = (encoded: string): unknown => {
    try {
      return decodeJson(encoded);
    } catch {
      return undefined;
    }
  };
  const binding = ChallengeBinding.safeParse(decoded(credential.challenge.opaque));
  const charge = ChargeRequest.safeParse(decoded(credential.challenge.request));
  if (!binding.success || !charge.success) throw malformed();
  return { credential, binding: binding.data, charge: charge.data };
}

/** An authentic challenge as pgward issued it: only its bound parameters, and the description its charge carries (a client's is not echoed). */
function boundPart(presented: PaymentCredential['challenge'], charge: ChargeRequest): PaymentChallenge {
  const { id, realm, method, intent, request, expires, digest, opaque } = presented;
  return { id, realm, method, intent, request, expires, ...(digest ? { digest } : {}), opaque, ...(charge.description ? { description: charge.description } : {}) };
}

export function installPayments(app: FastifyInstance, options: PaymentsOptions): void {
  const { settings, verifier, secrets } = options;

  const challenge = async (request: FastifyRequest, priced: { item: string; amount: number }, settings: PaymentSettings, method: string): Promise<never> => {
    if (!request.caller && !request.operator) {
      if (!request.headers.authorization) {
        throw new Problem('UNAUTHORIZED', `this request costs ${priced.amount} ${settings.currency}, paid from an organization’s prepaid credits: send Authorization: Bearer <organization API key or JWT> to get a payment challenge`, {
          headers: { 'www-authenticate': 'Bearer realm="pgward"' },
        });
      }
      await authenticateCaller(request, options.authenticators);
    }
    const caller = callerOf(request);
    if (!SPENDING_ROLES.has(caller.role)) throw new Problem('FORBIDDEN', `spending the organization’s credits needs the member role or higher; the caller is ${caller.role}`);
    const issued = issueChallenge(secrets.current, {
      realm: settings.realm,
      method,
      charge: { amount: String(priced.amount), currency: settings.currency, description: `${priced.item} on ${settings.realm}`, externalId: request.id },
      expires: new Date(options.now().getTime() + settings.challengeTtlSeconds * 1000),
      digest: bodyDigest(request.rawBody),
      binding: { http_method: request.method, path: request.url, org_id: caller.orgId, principal: principalOf(caller), role: caller.role, caller: caller.kind, ...(caller.kind === 'jwt' ? { issuer: caller.issuer } : {}) },
    });
    throw paymentRequired(issued, 'payment-required', `this request costs ${priced.amount} ${settings.currency}; answer the Payment challenge in WWW-Authenticate`);
  };

  /** The caller a settled challenge names, as what signed them in, if they still may act: an API key revoked since is refused. */
  const payer = async (binding: ChallengeBinding): Promise<Caller | undefined> => {
    const id = binding.principal.slice(binding.principal.indexOf(':') + 1);
    const [orgId, role] = [binding.org_id, binding.role as ApiKeyRole];
    const rebuilt = async (): Promise<Caller | undefined> => {
      switch (binding.caller) {
        case 'api_key': {
          const key = await findApiKey(options.pool, orgId, id);
          return key?.status === 'active' ? { kind: 'api_key', keyId: id, orgId, role: key.role as ApiKeyRole } : undefined;
        }
        case 'jwt':
          return binding.issuer === undefined ? undefined : { kind: 'jwt', subject: id, orgId, role, issuer: binding.issuer };
        case 'session':
          return { kind: 'session', subject: id, orgId, role };
      }
    };
    const caller = await rebuilt();
    return caller && principalOf(caller) === binding.principal ? caller : undefined;
  };

  const settle = async (request: FastifyRequest, priced: { item: string; amount: number }, settings: PaymentSettings, verifier: PaymentVerifier): Promise<void> => {
    const { credential, binding, charge } = readCredential(request.headers.authorization!);
    const presented = credential.challenge;
    if (presented.realm !== settings.realm || presented.method !== verifier.method || presented.intent !== 'charge' || !authentic(secrets.all, presented)) {
      throw refused('invalid-challenge', 'the challenge was not issued by this deployment');
    }
    if (!(Date.parse(presented.expires) > options.now().getTime())) throw refused('payment-expired', `the challenge expired at ${presented.expires}`);
    if (binding.http_method !== request.method || binding.path !== request.url || (presented.digest ?? undefined) !== bodyDigest(request.rawBody)) {
      throw refused('invalid-challenge', 'the challenge was issued for another request (method, path or body)');
    }
    if (charge.amount !== String(priced.amount) || charge.currency !== settings.currency) throw refused('invalid-challenge', 'the price of this request changed since the challenge was issued');
    const caller = await payer(binding);
    if (!caller) throw refused('invalid-challenge', 'the API key the challenge was issued to is revoked, or the challenge names no caller pgward issues for');
    request.caller = caller;
    const settlement: Settlement = {
      challengeId: presented.id,
      orgId: binding.org_id,
      principal: binding.principal,
      operation: priced.item,
      charge,
      payload: credential.payload,
      ...(credential.source ? { source: credential.source } : {}),
      requestId: request.id,
    };
    const result = await verifier.settle(settlement);
    if (!result.ok) {
      // Unsettled but still good: after a top-up the same credential settles. Anything else proves nothing more.
      if (result.failure === 'payment-insufficient') throw paymentRequired(boundPart(presented, charge), 'payment-insufficient', result.detail);
      throw refused(result.failure, result.detail);
    }
    request.payment = { settlement, reference: result.reference, method: verifier.method, at: options.now().toISOString() };
  };

  app.addHook('preHandler', async (request) => {
    const priced = pricedItem(request, settings);
    if (!priced || !settings || !verifier) {
      // Fail closed: a Payment credential authenticates nothing but a priced request.
      if (carriesPayment(request) && !request.routeOptions.config.public) throw refused('invalid-challenge', 'this request is not charged; a Payment credential does not authenticate it');
      return;
    }
    if (carriesPayment(request)) return settle(request, priced, settings, verifier);
    return challenge(request, priced, settings, verifier.method);
  });

  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload) => {
    const paid = request.payment;
    if (!paid || !verifier) return payload;
    // An Idempotency-Key replay repeats the answer of a request paid for already: it delivers nothing new.
    const undelivered = reply.statusCode >= 400 ? `the request failed with ${reply.statusCode}` : reply.getHeader('idempotent-replayed') === 'true' ? 'its Idempotency-Key replayed an earlier answer' : undefined;
    if (undelivered) {
      // The paid request delivered nothing: the charge is given back, and no receipt is sent. A refund
      // that fails does not replace the request's own answer; it is logged for an operator to settle.
      await verifier.refund(paid.settlement, undelivered).catch((error: unknown) => {
        request.log.error({ err: error, challenge_id: paid.settlement.challengeId, org_id: paid.settlement.orgId }, 'a failed paid request could not be refunded');
      });
      return payload;
    }
    void reply.header('payment-receipt', receiptHeader({ status: 'success', method: paid.method, timestamp: paid.at, reference: paid.reference }));
    void reply.header('cache-control', 'private');
    return payload;
  });
}
