import { hkdfSync } from 'node:crypto';
import type { Keyring } from '../crypto/seal.js';

/** An enrollment token: this prefix and 32 random bytes in base64url (src/crypto/tokens.ts newSecret). */
export const ENROLLMENT_TOKEN_PREFIX = 'pgw_enr_';
export const ENROLLMENT_TOKEN = /^pgw_enr_[A-Za-z0-9_-]{43}$/;

/**
 * The keyring a data plane opens its project's sealed secrets with (upstream passwords, policy
 * roles' passwords, the hash-mask key): derived from its token, so it holds no key of the control
 * plane's. The control plane, which sees the token on each request, re-seals under the same key.
 */
export function dataPlaneKeyring(token: string): Keyring {
  const key = Buffer.from(hkdfSync('sha256', Buffer.from(token, 'utf8'), Buffer.alloc(0), 'pgward self-host data plane seal key v1', 32));
  return { current: 'enrollment', keys: new Map([['enrollment', key]]) };
}

/**
 * The proxy id an enrolled data plane publishes decisions under: its enrollment's id and its own
 * instance name, so its sequence numbers never meet another proxy's, and the ingest endpoint can
 * check that every decision a data plane sends is its own.
 */
export function enrolledProxyId(enrollmentId: string, instance: string): string {
  return `${enrollmentId}:${instance}`.slice(0, 64);
}

export function isEnrolledProxyId(proxyId: string, enrollmentId: string): boolean {
  return proxyId.startsWith(`${enrollmentId}:`);
}
