import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new bearer secret: `prefix` and 32 random bytes in base64url (256 bits). */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

export function sha256Hex(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Compares a presented secret with a stored hash in constant time. */
export function matchesHash(secret: string, storedHex: string): boolean {
  const presented = createHash('sha256').update(secret, 'utf8').digest();
  const stored = Buffer.from(storedHex, 'hex');
  return stored.length === presented.length && timingSafeEqual(presented, stored);
}

/** The leading characters shown to humans so they can tell keys apart; never enough to use. */
export function displayPrefix(secret: string, length = 12): string {
  return secret.slice(0, length);
}
