/**
 * An entry's hash and canonical bytes as ARCHITECTURE.md §6 defines them, written plainly: the
 * reference the chain's own digests (src/audit/entry-digests.ts, one reusable buffer) are compared with.
 */
import { createHash, createHmac } from 'node:crypto';
import { canonicalEntryText, type CanonicalEntryInput } from '../../src/audit/canonical-entry.js';

/** RFC 8785 canonical JSON of the entry without prev_hash and entry_hash: what its hash covers, and its Merkle leaf. */
export function canonicalEntryBytes(entry: CanonicalEntryInput): Buffer {
  return Buffer.from(canonicalEntryText(entry), 'utf8');
}

/** Hex entry_hash over `prevHash` (hex) and an entry's canonical bytes, keyed when `key` is given. */
export function entryHash(prevHash: string, canonicalEntry: Uint8Array, key: Buffer | undefined): string {
  const digest = key ? createHmac('sha256', key) : createHash('sha256');
  return digest.update(Buffer.from(prevHash, 'hex')).update(canonicalEntry).digest('hex');
}
