/**
 * Digests of entries computed ahead of the verification walk, on any thread: one fixed-size record
 * per entry (a status byte, the hex entry hash, the leaf digest) in a buffer a worker can transfer.
 * The walk reads them through RecordedDigests, which recomputes on the calling thread any digest a
 * record lacks, so the records only ever save work: they never decide a finding.
 */
import { SHA256_HEX_PATTERN } from '../events/fields.js';
import type { CanonicalEntryInput } from './canonical-entry.js';
import { EntryDigests, type DigestSource } from './entry-digests.js';

/** The record holds no digest (the entry was left to the calling thread): the walk digests it there, and throws where the pass would. */
const NONE = 0;
/** The leaf digest only: the walk never asks for an entry hash it could not compute (unknown key, prev_hash not hex). */
const LEAF = 1;
const BOTH = 2;

const HASH_AT = 1;
const LEAF_AT = HASH_AT + 64;
export const DIGEST_RECORD_BYTES = LEAF_AT + 32;

/** What the walk recomputes: entries as stored, with the keys named by their key_id. */
export type RecordedEntry = CanonicalEntryInput & { readonly prev_hash: string };

/**
 * Records for `entries`, in their order; a null entry gets a record without digests. The entries
 * must be ones carriedByWire (entry-wire.ts) accepts. The entry hash is over the stored prev_hash,
 * under keys.get(key_id) when keyed: what the walk compares.
 */
export function writeDigestRecords(entries: readonly (RecordedEntry | null)[], keys: ReadonlyMap<string, Uint8Array>, digests: EntryDigests): Buffer {
  const records = Buffer.alloc(entries.length * DIGEST_RECORD_BYTES);
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (!entry) continue;
    const at = i * DIGEST_RECORD_BYTES;
    digests.load(entry);
    const key = entry.key_id === null ? undefined : keys.get(entry.key_id);
    if ((entry.key_id === null || key) && SHA256_HEX_PATTERN.test(entry.prev_hash)) {
      records.write(digests.entryHash(entry.prev_hash, key), at + HASH_AT, 64, 'latin1');
      records[at] = BOTH;
    } else records[at] = LEAF;
    // After the entry hash: leafDigest reuses the byte before the canonical text.
    records.write(digests.leafDigest(), at + LEAF_AT, 32, 'latin1');
  }
  return records;
}

interface RecordedChunk {
  readonly entries: readonly object[];
  readonly records: Buffer;
}

/**
 * The walk's digests from records of chunks pushed in the order the walk meets their entries. An
 * entry is found by identity, searching forward from the last one found; one not found, or whose
 * record lacks a digest, is digested on this thread.
 */
export class RecordedDigests implements DigestSource {
  readonly #local = new EntryDigests();
  /** Chunks from the one holding the last entry found on; entries before #next in the first are done with. */
  readonly #chunks: RecordedChunk[] = [];
  #next = 0;
  #records: Buffer | undefined;
  #at = 0;
  #entry: CanonicalEntryInput | undefined;
  #localLoaded = false;

  push(chunk: RecordedChunk): void {
    this.#chunks.push(chunk);
  }

  load(entry: CanonicalEntryInput): void {
    this.#entry = entry;
    this.#localLoaded = false;
    this.#records = this.#find(entry);
    if (this.#records === undefined) this.#loadLocal();
  }

  entryHash(prevHash: string, key: Uint8Array | undefined): string {
    if (this.#records !== undefined && this.#records[this.#at] === BOTH) return this.#records.toString('latin1', this.#at + HASH_AT, this.#at + LEAF_AT);
    this.#loadLocal();
    return this.#local.entryHash(prevHash, key);
  }

  leafDigest(): string {
    if (this.#records !== undefined) return this.#records.toString('latin1', this.#at + LEAF_AT, this.#at + DIGEST_RECORD_BYTES);
    this.#loadLocal();
    return this.#local.leafDigest();
  }

  #loadLocal(): void {
    if (this.#localLoaded) return;
    this.#local.load(this.#entry!);
    this.#localLoaded = true;
  }

  /** The records of the chunk holding `entry`, with #at set to its record; undefined when its record holds no digest or it has none. */
  #find(entry: CanonicalEntryInput): Buffer | undefined {
    for (let c = 0; c < this.#chunks.length; c++) {
      const { entries, records } = this.#chunks[c]!;
      const i = entries.indexOf(entry, c === 0 ? this.#next : 0);
      if (i === -1) continue;
      this.#chunks.splice(0, c);
      this.#next = i + 1;
      this.#at = i * DIGEST_RECORD_BYTES;
      return records[this.#at] === NONE ? undefined : records;
    }
    return undefined;
  }
}
