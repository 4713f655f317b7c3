import { randomBytes } from 'node:crypto';

const ALPHABET = Buffer.from('abcdefghijklmnopqrstuvwxyz234567', 'latin1');
/** Characters after an id's prefix: 26 of 5 bits (130 bits). */
const ID_CHARACTERS = 26;
/** Where ids are written: synchronously, one at a time. Appending a character a time to a string cost 3 µs an id (the audit entry's, one a decision). */
const scratch = Buffer.alloc(64);
const PREFIX = /^[\x21-\x7e]{0,38}$/;

/**
 * `prefix` and 26 base32 characters, one of the low 5 bits of each of the first 26 bytes of
 * `bytes` (a Uint8Array, or a latin1 string such as a digest in the `binary` encoding).
 */
export function base32Id<P extends string>(prefix: P, bytes: Uint8Array | string): `${P}${string}` {
  if (!PREFIX.test(prefix) || bytes.length < ID_CHARACTERS) throw new RangeError('an id takes a prefix of at most 38 visible ASCII characters (no space) and 26 bytes');
  const start = scratch.write(prefix, 0, 'latin1');
  if (typeof bytes === 'string') for (let i = 0; i < ID_CHARACTERS; i++) scratch[start + i] = ALPHABET[bytes.charCodeAt(i) & 31]!;
  else for (let i = 0; i < ID_CHARACTERS; i++) scratch[start + i] = ALPHABET[bytes[i]! & 31]!;
  return scratch.toString('latin1', 0, start + ID_CHARACTERS) as `${P}${string}`;
}

/** A new identifier: the type prefix and 26 random base32 characters (130 bits). */
export function newId<P extends `${string}_`>(prefix: P): `${P}${string}` {
  return base32Id(prefix, randomBytes(ID_CHARACTERS));
}
