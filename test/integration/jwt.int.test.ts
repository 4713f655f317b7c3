import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJwtVerifier, looksLikeJwt, JwtRejected, type JwtRejectReason, type JwtVerifier } from '../../src/auth/jwt.js';
import { newSecret } from '../../src/crypto/tokens.js';
import { newId } from '../../src/ids.js';
import { freePort } from '../support/free-port.js';

const ISSUER = 'https://auth.example.test/api/auth';
const AUDIENCE = 'https://api.example.test';
const ORG_ID = newId('org_');

type SigningKey = { alg: 'RS256' | 'ES256'; kid: string; privateKey: CryptoKey; publicKey: CryptoKey };

async function signingKey(alg: SigningKey['alg'], kid: string): Promise<SigningKey> {
  return { alg, kid, ...(await generateKeyPair(alg)) };
}

async function publicJwk(key: SigningKey): Promise<JWK> {
  return { ...(await exportJWK(key.publicKey)), kid: key.kid, alg: key.alg, use: 'sig' };
}

/** A real JWKS endpoint on 127.0.0.1 serving whatever `keys` holds at request time. */
async function startJwksServer(keys: JWK[], status = 200): Promise<{ url: string; keys: JWK[]; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server: Server = createServer((_req, res) => {
    requests += 1;
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/api/auth/jwks`,
    keys,
    requests: () => requests,
    close: () => new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
}

const validClaims = { sub: 'usr_alice', org_id: ORG_ID, role: 'admin' };

function sign(key: SigningKey, claims: JWTPayload = validClaims, edit: (jwt: SignJWT) => SignJWT = (jwt) => jwt): Promise<string> {
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('5m');
  return edit(jwt).sign(key.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

async function expectReason(verifier: JwtVerifier, token: string, reason: JwtRejectReason): Promise<void> {
  const err: unknown = await verifier.verify(token).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(JwtRejected);
  expect((err as JwtRejected).reason).toBe(reason);
  expect((err as JwtRejected).message).not.toContain(token);
}

let rsa: SigningKey;
let ec: SigningKey;
let jwks: Awaited<ReturnType<typeof startJwksServer>>;
let verifier: JwtVerifier;

beforeAll(async () => {
  rsa = await signingKey('RS256', 'rsa-1');
  ec = await signingKey('ES256', 'ec-1');
  jwks = await startJwksServer([await publicJwk(rsa), await publicJwk(ec)]);
  verifier = createJwtVerifier({ jwks: jwks.url, issuer: ISSUER, audience: AUDIENCE });
});
afterAll(() => jwks.close());

describe('JWT verification against a live JWKS', () => {
  it.each(['RS256', 'ES256'] as const)('accepts a valid %s token and returns the caller', async (alg) => {
    const token = await sign(alg === 'RS256' ? rsa : ec);
    await expect(verifier.verify(token)).resolves.toEqual({ kind: 'jwt', subject: 'usr_alice', orgId: ORG_ID, role: 'admin', issuer: ISSUER });
  });

  it('rejects an expired token as EXPIRED', async () => {
    await expectReason(verifier, await sign(rsa, validClaims, (jwt) => jwt.setExpirationTime('-1m')), 'EXPIRED');
  });

  it('honours the clock tolerance', async () => {
    const tolerant = createJwtVerifier({ jwks: jwks.url, issuer: ISSUER, audience: AUDIENCE, clockToleranceSeconds: 120 });
    const recentlyExpired = await sign(rsa, validClaims, (jwt) => jwt.setExpirationTime('-1m'));
    await expect(tolerant.verify(recentlyExpired)).resolves.toMatchObject({ subject: 'usr_alice' });
  });

  it('rejects a token whose nbf is in the future as NOT_YET_VALID', async () => {
    await expectReason(verifier, await sign(rsa, validClaims, (jwt) => jwt.setNotBefore('10m')), 'NOT_YET_VALID');
  });

  it('rejects a wrong issuer as WRONG_ISSUER', async () => {
    await expectReason(verifier, await sign(rsa, validClaims, (jwt) => jwt.setIssuer('https://evil.example.test')), 'WRONG_ISSUER');
  });

  it('rejects a wrong audience as WRONG_AUDIENCE', async () => {
    await expectReason(verifier, await sign(rsa, validClaims, (jwt) => jwt.setAudience('https://other.example.test')), 'WRONG_AUDIENCE');
  });

  it('rejects a key id absent from the set as UNKNOWN_KEY', async () => {
    await expectReason(verifier, await sign(await signingKey('RS256', 'rogue')), 'UNKNOWN_KEY');
  });

  it('rejects a foreign key that reuses a known key id as BAD_SIGNATURE', async () => {
    await expectReason(verifier, await sign(await signingKey('RS256', rsa.kid)), 'BAD_SIGNATURE');
  });

  it('rejects a tampered payload as BAD_SIGNATURE', async () => {
    const [header, payload, signature] = (await sign(rsa)).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as JWTPayload;
    await expectReason(verifier, `${header}.${b64({ ...claims, role: 'owner' })}.${signature}`, 'BAD_SIGNATURE');
  });

  it('rejects an unsigned alg "none" token as BAD_SIGNATURE', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { ...validClaims, iss: ISSUER, aud: AUDIENCE, iat: now, exp: now + 300 };
    const token = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`;
    expect(looksLikeJwt(token)).toBe(true);
    await expectReason(verifier, token, 'BAD_SIGNATURE');
  });

  it('rejects an HS256 token keyed with the public key material as BAD_SIGNATURE', async () => {
    const secret = new TextEncoder().encode(await exportSPKI(rsa.publicKey));
    const token = await new SignJWT(validClaims)
      .setProtectedHeader({ alg: 'HS256', kid: rsa.kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(secret);
    await expectReason(verifier, token, 'BAD_SIGNATURE');
  });

  it.each([
    ['org_id missing', { sub: 'usr_alice', role: 'admin' }],
    ['org_id not an org id', { ...validClaims, org_id: 'acme' }],
    ['role unknown', { ...validClaims, role: 'superuser' }],
    ['sub missing', { org_id: ORG_ID, role: 'admin' }],
  ])('rejects a signed token with %s as MISSING_CLAIMS', async (_case, claims) => {
    await expectReason(verifier, await sign(rsa, claims), 'MISSING_CLAIMS');
  });

  it('rejects a token without exp as MISSING_CLAIMS', async () => {
    const token = await new SignJWT(validClaims)
      .setProtectedHeader({ alg: rsa.alg, kid: rsa.kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .sign(rsa.privateKey);
    await expectReason(verifier, token, 'MISSING_CLAIMS');
  });

  it.each([
    ['not a JWT', 'garbage'],
    ['three junk segments', 'a.b.c'],
    ['a header that is not JSON', `${Buffer.from('nope').toString('base64url')}.${b64(validClaims)}.c2ln`],
  ])('rejects %s as MALFORMED', async (_case, token) => {
    await expectReason(verifier, token, 'MALFORMED');
  });

  it('reports a closed JWKS port as JWKS_UNAVAILABLE', async () => {
    const down = createJwtVerifier({ jwks: `http://127.0.0.1:${await freePort()}/jwks`, issuer: ISSUER, audience: AUDIENCE });
    await expectReason(down, await sign(rsa), 'JWKS_UNAVAILABLE');
  });

  it('reports a JWKS endpoint answering 503 as JWKS_UNAVAILABLE', async () => {
    const failing = await startJwksServer([await publicJwk(rsa)], 503);
    try {
      const verifierOfFailing = createJwtVerifier({ jwks: failing.url, issuer: ISSUER, audience: AUDIENCE });
      await expectReason(verifierOfFailing, await sign(rsa), 'JWKS_UNAVAILABLE');
    } finally {
      await failing.close();
    }
  });

  it('refetches the set on an unknown kid once the cooldown has passed, so a rotated-in key verifies', async () => {
    const rotating = await startJwksServer([await publicJwk(rsa)]);
    try {
      const noCooldown = createJwtVerifier({ jwks: rotating.url, issuer: ISSUER, audience: AUDIENCE, cooldownMs: 0 });
      await noCooldown.verify(await sign(rsa));
      expect(rotating.requests()).toBe(1);

      const next = await signingKey('ES256', 'ec-2');
      rotating.keys.push(await publicJwk(next));
      await expect(noCooldown.verify(await sign(next))).resolves.toMatchObject({ orgId: ORG_ID });
      expect(rotating.requests()).toBe(2);
    } finally {
      await rotating.close();
    }
  });

  it('does not refetch on an unknown kid within the cooldown', async () => {
    const rotating = await startJwksServer([await publicJwk(rsa)]);
    try {
      const cooling = createJwtVerifier({ jwks: rotating.url, issuer: ISSUER, audience: AUDIENCE, cooldownMs: 600_000 });
      await cooling.verify(await sign(rsa));
      const next = await signingKey('RS256', 'rsa-2');
      rotating.keys.push(await publicJwk(next));
      await expectReason(cooling, await sign(next), 'UNKNOWN_KEY');
      expect(rotating.requests()).toBe(1);
    } finally {
      await rotating.close();
    }
  });
});

describe('looksLikeJwt', () => {
  it('tells a JWT from an org API key and junk', async () => {
    expect(looksLikeJwt(await sign(rsa))).toBe(true);
    expect(looksLikeJwt(newSecret('pgw_org_'))).toBe(false);
    for (const junk of ['', 'garbage', 'a.b', 'a.b.c.d', '.b.c', 'a b.c.d', 'a.b.c\n']) expect(looksLikeJwt(junk)).toBe(false);
  });
});
