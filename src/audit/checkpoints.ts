/**
 * Signed checkpoints of a project's audit chain, as stored (the AuditCheckpointSigned payload)
 * and as a C2SP signed note. The Merkle leaves are the entries' canonical bytes, the same bytes
 * their hashes cover, so a root vouches for every field of entries 1..size.
 */
import type { KeyObject } from 'node:crypto';
import { formatCheckpoint, formatNote, noteKeyHash, parseNote, signCheckpoint, type Checkpoint } from '../crypto/checkpoint.js';
import type { AuditCheckpointSigned } from '../events/audit.js';

export interface AnchorSigner {
  /** The anchor key's id: the key name of the note's signature line. */
  readonly keyId: string;
  readonly privateKey: KeyObject;
}

/** The checkpoint a stored record claims. */
export function recordCheckpoint(record: AuditCheckpointSigned): Checkpoint {
  return { origin: record.project_id, size: Number(record.size), root: Buffer.from(record.root, 'base64'), chainStartSeq: Number(record.chain_start_seq) };
}

/** Signs `checkpoint` (origin = project id) with the anchor key; the payload of AuditCheckpointSigned. */
export function signAuditCheckpoint(checkpoint: Checkpoint, anchor: AnchorSigner, signedAt: string): AuditCheckpointSigned {
  const note = signCheckpoint(formatCheckpoint(checkpoint), anchor.privateKey, anchor.keyId);
  return {
    project_id: checkpoint.origin,
    size: String(checkpoint.size),
    root: checkpoint.root.toString('base64'),
    chain_start_seq: String(checkpoint.chainStartSeq),
    key_id: anchor.keyId,
    signature: parseNote(note).signatures[0]!.signature.toString('base64'),
    signed_at: signedAt,
  };
}

/** The C2SP signed note of a stored checkpoint, for export or verification under `publicKey`. */
export function auditCheckpointNote(record: AuditCheckpointSigned, publicKey: KeyObject): string {
  return formatNote({
    text: formatCheckpoint(recordCheckpoint(record)),
    signatures: [{ keyName: record.key_id, keyHash: noteKeyHash(record.key_id, publicKey), signature: Buffer.from(record.signature, 'base64') }],
  });
}
