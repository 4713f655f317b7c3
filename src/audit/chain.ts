/**
 * Appending to a project's audit hash chain (ARCHITECTURE.md §6):
 * entry_hash = SHA-256(prev_hash bytes ‖ canonical entry bytes), or HMAC-SHA-256 under the key
 * key_id names. Once a project's chain is keyed, every later entry is keyed.
 */
import { parseKeyring } from '../crypto/seal.js';
import { canonicalEntryText } from './canonical-entry.js';
import { EntryDigests } from './entry-digests.js';
import { genesisHash, type AuditEntry, type AuditEntryContent, type UnchainedEntry } from './entry.js';

/** HMAC keys for audit entries (PGWARD_AUDIT_HMAC_KEYS); without `current`, new entries are unkeyed. */
export interface HmacKeyring {
  readonly current?: string;
  readonly keys: ReadonlyMap<string, Buffer>;
}

export type AuditChainErrorCode = 'KEY_DOWNGRADE' | 'UNKNOWN_KEY' | 'PROJECT_MISMATCH';

export class AuditChainError extends Error {
  override readonly name = 'AuditChainError';
  constructor(
    readonly code: AuditChainErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Parses PGWARD_AUDIT_HMAC_KEYS, in the form of PGWARD_MASTER_KEY: comma-separated
 * `kid:base64secret` entries of 32-byte secrets, the first current (or one bare secret, id `k1`).
 * Throws KeyringError, whose message never quotes the specification.
 */
export function parseHmacKeyring(spec: string): HmacKeyring {
  return parseKeyring(spec);
}

/** The part of the project's last entry that the next one depends on. */
export interface ChainTip {
  /** '' when the last entry is a legacy entry: the next one then starts the chain at genesis. */
  readonly entry_hash: string;
  readonly key_id: string | null;
}

/**
 * An entry keyed for chaining but not linked yet, with its canonical JSON text: the bytes its hash
 * covers, and its Merkle leaf. They depend on the keyring, not on the entries before it, so they
 * can be written ahead of the chain's tip.
 */
export interface PreparedEntry {
  readonly entry: AuditEntry;
  /**
   * Its canonical bytes (UTF-8 of canonicalEntryText). Kept as bytes, not the text: an entry waits
   * hundreds of milliseconds to be linked, and a Buffer's bytes lie outside the heap the collector's
   * scavenges copy (a small one in a pooled slab), where a text of about 850 characters is copied by each.
   */
  readonly bytes: Buffer;
  readonly key: Buffer | undefined;
}

/** The digests of the entries this thread prepares and links, over one buffer (hashing is synchronous): no buffer of bytes per entry. */
const digests = new EntryDigests();

/** The RFC 6962 leaf hash of a prepared entry's canonical bytes, as MerkleBuilder.appendLeafDigest takes it. */
export function leafDigestOf(prepared: PreparedEntry): string {
  digests.loadBytes(prepared.bytes);
  return digests.leafDigest();
}

/** Keys `entry` with the keyring's current key (none without one) and writes its canonical bytes. Throws AuditChainError 'UNKNOWN_KEY'. */
export function prepareEntry(entry: AuditEntryContent, keyring: HmacKeyring): PreparedEntry {
  // One object per entry: the canonical bytes leave prev_hash and entry_hash out, so linkEntry fills them in after.
  // The chain fields come first: added after a spread of 30 fields, they would turn the object into a
  // slow dictionary (about 6 µs an entry, and slower reads in canonical JSON and the insert after).
  const prepared: AuditEntry = { key_id: null, prev_hash: '', entry_hash: '', ...entry };
  // Again after the spread, for content that is an AuditEntry and carries its own.
  prepared.prev_hash = '';
  prepared.entry_hash = '';
  return prepareOwnEntry(prepared as UnchainedEntry, keyring);
}

/** prepareEntry of an entry as entryFromDecision and entryFromGap build it, which the caller hands over: keyed in place, not copied. */
export function prepareOwnEntry(entry: UnchainedEntry, keyring: HmacKeyring): PreparedEntry {
  const keyId = keyring.current ?? null;
  const key = keyId === null ? undefined : keyring.keys.get(keyId);
  if (keyId !== null && !key) throw new AuditChainError('UNKNOWN_KEY', `the keyring has no key ${keyId}`);
  const prepared: AuditEntry = entry;
  prepared.key_id = keyId;
  return { entry: prepared, bytes: Buffer.from(canonicalEntryText(prepared), 'utf8'), key };
}

/**
 * Links a prepared entry after `previous` (the project's last entry; undefined for its first) and
 * fills in its hashes. Throws AuditChainError 'PROJECT_MISMATCH', or 'KEY_DOWNGRADE' rather than
 * write an unkeyed entry after a keyed one.
 */
export function linkEntry(previous: ChainTip | undefined, prepared: PreparedEntry, projectId: string): AuditEntry {
  const { entry, bytes, key } = prepared;
  if (entry.project_id !== projectId) throw new AuditChainError('PROJECT_MISMATCH', `the entry belongs to ${entry.project_id}, not ${projectId}`);
  if (entry.key_id === null && previous !== undefined && previous.key_id !== null) {
    throw new AuditChainError('KEY_DOWNGRADE', `the chain of ${projectId} is keyed; configure PGWARD_AUDIT_HMAC_KEYS with a current key`);
  }
  const prevHash = previous?.entry_hash || genesisHash(projectId);
  entry.prev_hash = prevHash;
  digests.loadBytes(bytes);
  entry.entry_hash = digests.entryHash(prevHash, key);
  return entry;
}

/** Chains `entry` after `previous`: prepareEntry, then linkEntry. */
export function chainEntry(previous: ChainTip | undefined, entry: AuditEntryContent, keyring: HmacKeyring, projectId: string): AuditEntry {
  return linkEntry(previous, prepareEntry(entry, keyring), projectId);
}
