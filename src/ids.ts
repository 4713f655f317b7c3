import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** A new identifier: the type prefix and 26 random base32 characters (130 bits). */
export function newId<P extends `${string}_`>(prefix: P): `${P}${string}` {
  const bytes = randomBytes(26);
  let out = '';
  for (const byte of bytes) out += ALPHABET[byte & 31];
  return `${prefix}${out}`;
}
