/**
 * Where the identity server meets the event-sourced domain: a sign-up creates the person's
 * organization and records their consents through commands; a token or a session names the
 * organization and role the person acts with, read from the memberships read model at every request.
 */
import { createHash, hkdfSync } from 'node:crypto';
import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type pg from 'pg';
import { recordConsents } from '../../commands/identity/consents.js';
import { createOrganizationForUser } from '../../commands/organizations/create-organization.js';
import { membershipsProjection } from '../../projections/identity.js';
import { awaitCaughtUp } from '../../projections/maintenance.js';
import { membershipsOfUser } from '../../queries/identity.js';
import type { Keyring } from '../crypto/seal.js';
import { ApiKeyRole } from '../events/organizations.js';
import type { JwtCaller } from '../auth/jwt.js';
import type { Caller } from '../http/plugins/auth.js';
import { actingMembership } from './acting.js';
import type { EventStore } from '../store/port.js';
import type { IdentityServer, SignUpEffects } from './server.js';

/** The versions of the documents a sign-up accepts (docs/identity.md); a new version is recorded when a person accepts it. */
export const CURRENT_DOCUMENTS = { terms_of_service: '2026-11-01', privacy_policy: '2026-11-01' } as const;

/** How long a lookup waits for the memberships projection (a session right after sign-up). */
const MEMBERSHIP_FRESHNESS_MS = 2_000;

/** The identity server's secret, derived from the master keyring's first key: no second secret to configure or lose. */
export function identitySecret(keyring: Keyring): string {
  const key = keyring.keys.get(keyring.current)!;
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'pgward identity server v1', 32)).toString('base64');
}

export function signUpEffects(store: EventStore, pool: pg.Pool): SignUpEffects {
  const lookup = async (userId: string) => (await membershipsOfUser(pool, userId)).map((m) => ({ orgId: m.org_id, role: m.role }));
  return {
    async onUserCreated(user, request) {
      const context = { correlationId: createHash('sha256').update(user.id).digest('hex').slice(0, 32), actor: `user:${user.id}` };
      await createOrganizationForUser(store, { name: `${user.name}'s organization`.slice(0, 128), plan: 'free', userId: user.id }, context);
      if (request.acceptedTerms) {
        const consents = Object.entries(CURRENT_DOCUMENTS).map(([documentType, documentVersion]) => ({ documentType: documentType as keyof typeof CURRENT_DOCUMENTS, documentVersion, accepted: true }));
        await recordConsents(store, { userId: user.id, ip: request.ip, consents }, context);
      }
    },
    async membershipsOf(userId) {
      const found = await lookup(userId);
      if (found.length > 0) return found;
      return (await awaitCaughtUp(store, pool, membershipsProjection, MEMBERSHIP_FRESHNESS_MS)) ? lookup(userId) : [];
    },
  };
}

/**
 * This deployment's signing keys, read from the identity server (its JWKS, the same document
 * /api/auth/jwks serves) and read again when a token names a key not seen yet (a rotation).
 */
export function ownKeys(identity: () => IdentityServer): JWTVerifyGetKey {
  let current: { keys: JWTVerifyGetKey; kids: Set<string> } | undefined;
  const load = async () => {
    const set = (await identity().api.getJwks()) as JSONWebKeySet;
    current = { keys: createLocalJWKSet(set), kids: new Set(set.keys.map((k) => k.kid ?? '')) };
    return current;
  };
  return async (header, token) => {
    const known = current && header.kid !== undefined && current.kids.has(header.kid) ? current : await load();
    return known.keys(header, token);
  };
}

/** The person a session cookie names, acting in the organization the request names, else their first. */
export function sessionCaller(identity: () => IdentityServer, effects: SignUpEffects): (headers: Headers, named?: string) => Promise<Caller | undefined> {
  return async (headers, named) => {
    const session = await identity().api.getSession({ headers });
    if (!session) return undefined;
    const membership = actingMembership(await effects.membershipsOf(session.user.id), named, undefined);
    if (!membership) return undefined;
    return { kind: 'session', subject: session.user.id, orgId: membership.orgId, role: ApiKeyRole.parse(membership.role) };
  };
}

/**
 * A token this identity server issued: the person, acting in the organization the request names,
 * else the one the token carries, with the role their membership has now (not the token's claim),
 * so a removal or a demotion holds from the next request.
 */
export function tokenCaller(effects: SignUpEffects): (token: JwtCaller, named?: string) => Promise<Caller> {
  return async (token, named) => {
    const membership = actingMembership(await effects.membershipsOf(token.subject), named, token.orgId)!;
    return { ...token, orgId: membership.orgId, role: ApiKeyRole.parse(membership.role) };
  };
}
