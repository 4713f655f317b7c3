/**
 * Appending to a project's audit hash chain (ARCHITECTURE.md §6):
 * entry_hash = SHA-256(prev_hash bytes ‖ canonical entry bytes), or HMAC-SHA-256 under the key
 * key_id names. Once a project's chain is keyed, every later entry is keyed.
 */
import { createHash, createHmac } from 'node:crypto';
import { parseKeyring } from '../crypto/seal.js';
import { canonicalEntryBytes, genesisHash, type AuditEntry, type AuditEntryContent } from './entry.js';

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

/** Hex entry_hash over `prevHash` (hex) and an entry's canonical bytes, keyed when `key` is given. */
export function entryHash(prevHash: string, canonicalEntry: Uint8Array, key: Buffer | undefined): string {
  const digest = key ? createHmac('sha256', key) : createHash('sha256');
  return digest.update(Buffer.from(prevHash, 'hex')).update(canonicalEntry).digest('hex');
}

/** The part of the project's last entry that the next one depends on. */
export interface ChainTip {
  /** '' when the last entry is a legacy entry: the next one then starts the chain at genesis. */
  readonly entry_hash: string;
  readonly key_id: string | null;
}

/** A chained entry with the canonical bytes its hash covers, which are also its Merkle leaf. */
export interface ChainedEntry {
  readonly entry: AuditEntry;
  readonly canonical: Buffer;
}

/**
 * Chains `entry` after `previous` (the project's last entry; undefined for its first), keyed with
 * the keyring's current key when there is one. Throws AuditChainError 'KEY_DOWNGRADE' rather than
 * write an unkeyed entry after a keyed one.
 */
export function chainEntryWithBytes(previous: ChainTip | undefined, entry: AuditEntryContent, keyring: HmacKeyring, projectId: string): ChainedEntry {
  if (entry.project_id !== projectId) throw new AuditChainError('PROJECT_MISMATCH', `the entry belongs to ${entry.project_id}, not ${projectId}`);
  const keyId = keyring.current ?? null;
  if (keyId === null && previous !== undefined && previous.key_id !== null) {
    throw new AuditChainError('KEY_DOWNGRADE', `the chain of ${projectId} is keyed; configure PGWARD_AUDIT_HMAC_KEYS with a current key`);
  }
  const key = keyId === null ? undefined : keyring.keys.get(keyId);
  if (keyId !== null && !key) throw new AuditChainError('UNKNOWN_KEY', `the keyring has no key ${keyId}`);
  const prevHash = previous?.entry_hash || genesisHash(projectId);
  // One object per entry: the canonical bytes leave prev_hash and entry_hash out, so the hash can be filled in after.
  const chained: AuditEntry = { ...entry, key_id: keyId, prev_hash: prevHash, entry_hash: '' };
  const canonical = canonicalEntryBytes(chained);
  chained.entry_hash = entryHash(prevHash, canonical, key);
  return { entry: chained, canonical };
}

/** chainEntryWithBytes without the bytes. */
export function chainEntry(previous: ChainTip | undefined, entry: AuditEntryContent, keyring: HmacKeyring, projectId: string): AuditEntry {
  return chainEntryWithBytes(previous, entry, keyring, projectId).entry;
}
