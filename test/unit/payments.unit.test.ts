import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { evolveLedger, ledger, type LedgerState } from '../../commands/credits/ledger.js';
import { DomainError } from '../../commands/domain-error.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { decodeEvent } from '../../src/events/catalog.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { AuthParamError, decodeJson, encodeJson, parseChallenges, serializeChallenge } from '../../src/payments/auth-params.js';
import { authentic, bodyDigest, challengeHeader, challengeSecrets, credentialHeader, issueChallenge, parseCredential } from '../../src/payments/challenge.js';
import { parsePrices } from '../../src/payments/prices.js';

const TOKEN_CHARS = "!#$%&'*+.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-".split('');
const token = fc.array(fc.constantFrom(...TOKEN_CHARS), { minLength: 1, maxLength: 12 }).map((chars) => chars.join(''));
/** What a quoted-string may carry: tab, space, visible ASCII (quotes and backslashes included). */
const value = fc.array(fc.oneof(fc.constantFrom('\t', ' ', '"', '\\', ','), fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c))), { maxLength: 40 }).map((chars) => chars.join(''));
const params = fc.uniqueArray(fc.tuple(token.map((t) => t.toLowerCase()), value), { selector: ([name]) => name, maxLength: 8 }).map((entries) => Object.fromEntries(entries));

const keyring = parseKeyring(`k1:${Buffer.alloc(32, 1).toString('base64')}`);
const rotated = parseKeyring(`k2:${Buffer.alloc(32, 2).toString('base64')},k1:${Buffer.alloc(32, 1).toString('base64')}`);
const terms = {
  realm: 'gateway.test',
  method: 'credits',
  charge: { amount: '50', currency: 'usd', description: 'createDemoCredential:pro on gateway.test' },
  expires: new Date('2026-01-01T00:05:00.000Z'),
  digest: bodyDigest('{"tier":"pro"}'),
  binding: { http_method: 'POST', path: '/v1/demo/credentials', org_id: 'org_1', principal: 'api_key:key_1', role: 'member', caller: 'api_key' as const },
};

describe('auth-params (RFC 9110 §11.2)', () => {
  it('round-trips: parse(serialize(challenges)) gives back every scheme and parameter, quotes and backslashes included', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ scheme: token, params }), { minLength: 1, maxLength: 4 }), (challenges) => {
        const header = challenges.map(serializeChallenge).join(', ');
        expect(parseChallenges(header)).toEqual(challenges);
      }),
    );
  });

  it('reads token values, any spacing around = and commas, and names case-insensitively', () => {
    expect(parseChallenges('Bearer realm="pgward", Payment ID=abc ,  realm = "a \\"b\\"",intent=charge')).toEqual([
      { scheme: 'Bearer', params: { realm: 'pgward' } },
      { scheme: 'Payment', params: { id: 'abc', realm: 'a "b"', intent: 'charge' } },
    ]);
  });

  it('refuses a repeated parameter, an unterminated quoted-string, and a value a header cannot carry', () => {
    expect(() => parseChallenges('Payment id="a", id="b"')).toThrow(AuthParamError);
    expect(() => parseChallenges('Payment id="a')).toThrow(AuthParamError);
    expect(() => parseChallenges('Payment id="a" realm="b"')).toThrow(AuthParamError);
    expect(() => serializeChallenge({ scheme: 'Payment', params: { id: 'a\r\nSet-Cookie: x' } })).toThrow(AuthParamError);
  });

  it('JSON parameters round-trip through base64url of JCS without padding', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (json) => {
        const encoded = encodeJson(json);
        expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/);
        expect(decodeJson(encoded)).toEqual(JSON.parse(JSON.stringify(json)));
      }),
    );
    expect(encodeJson({ b: 1, a: 'x' })).toBe(Buffer.from('{"a":"x","b":1}').toString('base64url'));
    expect(() => decodeJson('e30=')).toThrow(AuthParamError);
    expect(() => decodeJson('bm90IGpzb24')).toThrow(AuthParamError);
  });
});

describe('payment challenges (draft-httpauth-payment §5)', () => {
  it('has the draft’s parameters, its id the HMAC-SHA256 of the seven slots, and the header parses back to it', () => {
    const secrets = challengeSecrets(keyring);
    const challenge = issueChallenge(secrets.current, terms);
    expect(challenge).toMatchObject({ realm: 'gateway.test', method: 'credits', intent: 'charge', expires: '2026-01-01T00:05:00.000Z', digest: terms.digest });
    expect(decodeJson(challenge.request)).toEqual(terms.charge);
    expect(decodeJson(challenge.opaque)).toMatchObject(terms.binding);
    expect(challenge.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const [parsed] = parseChallenges(challengeHeader(challenge));
    expect(parsed).toEqual({ scheme: 'Payment', params: { ...challenge } });
    expect(authentic(secrets.all, challenge)).toBe(true);
    // Two challenges for one request differ (their nonces), so each settles on its own.
    expect(issueChallenge(secrets.current, terms).id).not.toBe(challenge.id);
  });

  it('is authentic under any key of the keyring that made it, and not once any bound slot is changed', () => {
    const challenge = issueChallenge(challengeSecrets(keyring).current, terms);
    expect(authentic(challengeSecrets(rotated).all, challenge)).toBe(true);
    expect(authentic(challengeSecrets(parseKeyring(`k3:${Buffer.alloc(32, 3).toString('base64')}`)).all, challenge)).toBe(false);
    fc.assert(
      fc.property(fc.constantFrom('realm', 'method', 'intent', 'request', 'expires', 'digest', 'opaque', 'id'), fc.string({ minLength: 1, maxLength: 8 }), (slot, suffix) => {
        const forged = { ...challenge, [slot]: `${(challenge as unknown as Record<string, string>)[slot]}${suffix}` };
        expect(authentic(challengeSecrets(keyring).all, forged)).toBe(false);
      }),
    );
    // The description is for display and is not bound.
    expect(authentic(challengeSecrets(keyring).all, { ...challenge, description: 'anything' })).toBe(true);
  });

  it('credentials round-trip, and anything but base64url JSON with challenge and payload is malformed', () => {
    const challenge = issueChallenge(challengeSecrets(keyring).current, terms);
    const header = credentialHeader(challenge, {}, 'did:example:payer');
    expect(header).toMatch(/^Payment [A-Za-z0-9_-]+$/);
    expect(parseCredential(header.slice('Payment '.length))).toEqual({ challenge, payload: {}, source: 'did:example:payer' });
    expect(() => parseCredential('not base64!')).toThrow(AuthParamError);
    expect(() => parseCredential(encodeJson({ challenge }))).toThrow(AuthParamError);
    expect(bodyDigest(undefined)).toBeUndefined();
    expect(bodyDigest('')).toBe('sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:');
  });
});

describe('prices (PGWARD_PRICES)', () => {
  it('reads operationId[:variant]=amount entries and refuses anything else', () => {
    expect([...parsePrices(' createDemoCredential:pro=50, evaluatePolicy=2 ')]).toEqual([
      ['createDemoCredential:pro', 50],
      ['evaluatePolicy', 2],
    ]);
    expect(parsePrices('').size).toBe(0);
    for (const bad of ['x=0', 'x=1.5', 'x=-1', 'x', '=1', 'x=1,x=2', 'x:Pro=1', 'x=1=2']) expect(() => parsePrices(bad), bad).toThrow();
  });
});

describe('the credit ledger aggregate', () => {
  const at = '2026-01-01T00:00:00.000Z';
  const apply = (state: LedgerState, command: Parameters<typeof ledger.decide>[1]): LedgerState => {
    const decided = ledger.decide(state, command, at);
    if (decided instanceof DomainError) throw decided;
    return decided
      .map((e, i) => ({ ...encodeEvent(e.definition, e.data, { event_id: `0195509a-3c00-7000-8000-00000000000${i}`, correlation_id: 'r', actor: 'a', at }), stream: 'credits-org_1', revision: 0, position: 1n }))
      .map(decodeEvent)
      .reduce(evolveLedger, state);
  };
  const org = 'org_01j9zq8x4m7k2n5p6r3s8t0v1w';
  const challengeId = 'c'.repeat(43);

  it('charges a challenge once, refuses an overdraft and another currency, and refunds once', () => {
    let state = apply(ledger.initial, { kind: 'top-up', orgId: org, amount: 100, currency: 'usd', reference: '' });
    expect(() => apply(state, { kind: 'charge', orgId: org, challengeId, amount: 101, currency: 'usd', operation: 'x' })).toThrow(/has 100 usd/);
    expect(() => apply(state, { kind: 'charge', orgId: org, challengeId, amount: 1, currency: 'eur', operation: 'x' })).toThrow(/holds usd/);
    state = apply(state, { kind: 'charge', orgId: org, challengeId, amount: 60, currency: 'usd', operation: 'x' });
    expect(state.balance).toBe(40);
    expect(() => apply(state, { kind: 'charge', orgId: org, challengeId, amount: 1, currency: 'usd', operation: 'x' })).toThrow(/settled already/);
    state = apply(state, { kind: 'refund', orgId: org, challengeId, reason: 'failed' });
    expect(state.balance).toBe(100);
    expect(ledger.decide(state, { kind: 'refund', orgId: org, challengeId, reason: 'again' }, at)).toEqual([]);
    // A refunded challenge stays spent: it is never charged again.
    expect(() => apply(state, { kind: 'charge', orgId: org, challengeId, amount: 1, currency: 'usd', operation: 'x' })).toThrow(/settled already/);
  });
});
