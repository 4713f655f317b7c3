/**
 * The two digests of each entry, over one reusable buffer laid out as prev_hash bytes (32) ‖
 * canonical entry bytes: the entry hash covers all of it, and the Merkle leaf hash (0x00 ‖
 * canonical bytes) the slice from byte 31 once that byte is zeroed. No buffer or Hash object per
 * entry; the digests are those of entryHash and leafHash. Verification, the checkpointer and
 * the audit projection take them so.
 */
import { createHmac, hash } from 'node:crypto';
import { sha256Latin1 } from '../crypto/sha256.js';
import { canonicalEntryText, type CanonicalEntryInput } from './canonical-entry.js';

const PREV = 32;
/** UTF-8 takes at most 3 bytes per UTF-16 code unit. */
const MAX_UTF8_PER_UNIT = 3;

/** The digests the verification walk takes of the entry it loaded last. */
export interface DigestSource {
  /** Makes `entry` the one the next entryHash and leafDigest are of. */
  load(entry: CanonicalEntryInput): void;
  /** Hex entry_hash of the loaded entry after `prevHash` (64 hex digits), keyed when `key` is given. */
  entryHash(prevHash: string, key: Uint8Array | undefined): string;
  /** RFC 6962 leaf hash of the loaded entry's canonical bytes, as MerkleBuilder.appendLeafDigest takes it. */
  leafDigest(): string;
}

export class EntryDigests implements DigestSource {
  #buffer = Buffer.alloc(PREV + 4096);
  #end = PREV;

  /** Writes the entry's canonical bytes: what the next entryHash and leafHash cover. */
  load(entry: CanonicalEntryInput): void {
    const text = canonicalEntryText(entry);
    if (this.#buffer.length < PREV + text.length * MAX_UTF8_PER_UNIT) this.#buffer = Buffer.alloc(PREV + text.length * MAX_UTF8_PER_UNIT);
    this.#end = PREV + this.#buffer.write(text, PREV, 'utf8');
  }

  /** load for an entry whose canonical bytes (UTF-8 of canonicalEntryText) are written already. */
  loadBytes(bytes: Uint8Array): void {
    if (this.#buffer.length < PREV + bytes.length) this.#buffer = Buffer.alloc(PREV + bytes.length);
    this.#buffer.set(bytes, PREV);
    this.#end = PREV + bytes.length;
  }

  entryHash(prevHash: string, key: Uint8Array | undefined): string {
    this.#buffer.write(prevHash, 0, 'hex');
    const covered = this.#buffer.subarray(0, this.#end);
    return key ? createHmac('sha256', key).update(covered).digest('hex') : hash('sha256', covered, 'hex');
  }

  leafDigest(): string {
    this.#buffer[PREV - 1] = 0x00;
    return sha256Latin1(this.#buffer.subarray(PREV - 1, this.#end));
  }
}
