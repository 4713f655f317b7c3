/**
 * Verification of a project's audit chain (spec §2.7). One pass in seq order checks each entry,
 * then each checkpoint whose size that entry completes; the first failure ends the pass. The
 * order of checks, which decides the reason when several apply, is in docs/audit-verification.md.
 */
import { timingSafeEqual, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { CheckpointError, verifyCheckpoint } from '../crypto/checkpoint.js';
import { MerkleBuilder } from '../crypto/merkle.js';
import type { AuditCheckpointSigned } from '../events/audit.js';
import { Timestamp } from '../events/fields.js';
import { entryHash } from './chain.js';
import { auditCheckpointNote, recordCheckpoint } from './checkpoints.js';
import { canonicalEntryBytes, genesisHash, type AuditEntry } from './entry.js';

export const AuditFailureReason = z.enum([
  'hash_mismatch',
  'broken_link',
  'missing_entry',
  'unknown_key',
  'key_downgrade',
  'truncated',
  'root_mismatch',
  'checkpoint_unverifiable',
]);
export type AuditFailureReason = z.infer<typeof AuditFailureReason>;

const Count = z.int().min(0);
const Seq = z.int().min(1);

export const AuditChainVerification = z.strictObject({
  ok: z.boolean(),
  verified_count: Count,
  keyed_count: Count,
  unchained_count: Count,
  chain_start_seq: Seq.nullable(),
  chain_end_seq: Seq.nullable(),
  first_broken_seq: Seq.nullable(),
  failure_reason: AuditFailureReason.nullable(),
  verified_at: Timestamp,
});
export type AuditChainVerification = z.infer<typeof AuditChainVerification>;

export interface VerifyChainInput {
  readonly projectId: string;
  /** Entries as stored, in any order; holes and duplicates are findings, not errors. */
  readonly entries: readonly AuditEntry[];
  readonly checkpoints: readonly AuditCheckpointSigned[];
  readonly hmacKeys: ReadonlyMap<string, Buffer>;
  readonly anchorPublicKey: KeyObject;
  readonly verifiedAt: string;
  /** First seq to verify (default 1). Above 1, `entries` must also hold the entry at fromSeq - 1, the window's anchor. */
  readonly fromSeq?: number;
  /** Last seq to verify (default: the last stored). */
  readonly toSeq?: number;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/** The chained entry the next one must link to; undefined before the chain starts. */
interface Link {
  readonly hash: string;
  readonly keyed: boolean;
}

function isLegacy(entry: AuditEntry): boolean {
  return entry.key_id === null && entry.prev_hash === '' && entry.entry_hash === '';
}

function linkAfter(entry: AuditEntry): Link | undefined {
  return isLegacy(entry) ? undefined : { hash: entry.entry_hash, keyed: entry.key_id !== null };
}

function groupBy<T>(items: readonly T[], key: (item: T) => number): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

function hashMatches(entry: AuditEntry, canonicalEntry: Uint8Array, key: Buffer | undefined): boolean {
  if (!HEX_SHA256.test(entry.prev_hash) || !HEX_SHA256.test(entry.entry_hash)) return false;
  return timingSafeEqual(Buffer.from(entry.entry_hash), Buffer.from(entryHash(entry.prev_hash, canonicalEntry, key)));
}

/** True when the record is a checkpoint of `projectId` signed by the anchor key. */
function opens(record: AuditCheckpointSigned, projectId: string, publicKey: KeyObject): boolean {
  try {
    return verifyCheckpoint(auditCheckpointNote(record, publicKey), publicKey).origin === projectId;
  } catch (error) {
    if (error instanceof CheckpointError) return false;
    throw error;
  }
}

export function verifyChain(input: VerifyChainInput): AuditChainVerification {
  const { projectId, hmacKeys, anchorPublicKey } = input;
  const from = input.fromSeq ?? 1;
  const to = input.toSeq ?? Number.POSITIVE_INFINITY;
  if (!Number.isSafeInteger(from) || from < 1) throw new RangeError('fromSeq must be a positive integer');
  if (input.toSeq !== undefined && (!Number.isSafeInteger(to) || to < from)) throw new RangeError('toSeq must be an integer no less than fromSeq');

  const entries = groupBy(input.entries, (e) => {
    // Not a finding: no store holds such a seq, and the walk would skip the entry.
    if (!Number.isSafeInteger(e.seq) || e.seq < 1) throw new RangeError(`an entry has seq ${String(e.seq)}, not a positive integer`);
    return e.seq;
  });
  const checkpoints = groupBy(
    input.checkpoints.filter((c) => Number(c.size) >= from && Number(c.size) <= to),
    (c) => Number(c.size),
  );
  let last = from - 1;
  for (const seq of entries.keys()) if (seq >= from && seq <= to && seq > last) last = seq;
  // A root covers entries 1..size, so only a window from seq 1 can recompute it.
  const tree = from === 1 ? new MerkleBuilder() : undefined;
  const genesis = genesisHash(projectId);

  let link: Link | undefined;
  let verified = 0;
  let keyed = 0;
  let unchained = 0;
  let chainStart: number | null = null;
  let chainEnd: number | null = null;
  const report = (failure?: { seq: number; reason: AuditFailureReason }): AuditChainVerification => ({
    ok: failure === undefined,
    verified_count: verified,
    keyed_count: keyed,
    unchained_count: unchained,
    chain_start_seq: chainStart,
    chain_end_seq: chainEnd,
    first_broken_seq: failure?.seq ?? null,
    failure_reason: failure?.reason ?? null,
    verified_at: input.verifiedAt,
  });

  const entryFailure = (entry: AuditEntry, canonicalEntry: Uint8Array): AuditFailureReason | undefined => {
    if (link === undefined && isLegacy(entry)) return entry.project_id === projectId ? undefined : 'broken_link';
    const key = entry.key_id === null ? undefined : hmacKeys.get(entry.key_id);
    if (entry.key_id !== null && !key) return 'unknown_key';
    if (entry.key_id === null && link?.keyed) return 'key_downgrade';
    if (!hashMatches(entry, canonicalEntry, key)) return 'hash_mismatch';
    if (entry.project_id !== projectId || entry.prev_hash !== (link?.hash ?? genesis)) return 'broken_link';
    return undefined;
  };

  const checkpointFailure = (records: readonly AuditCheckpointSigned[]): AuditFailureReason | undefined => {
    if (!records.every((record) => opens(record, projectId, anchorPublicKey))) return 'checkpoint_unverifiable';
    if (!tree) return undefined;
    const root = tree.root();
    const chainStartSeq = unchained + 1;
    const matches = (record: AuditCheckpointSigned) => {
      const claimed = recordCheckpoint(record);
      return claimed.root.equals(root) && claimed.chainStartSeq === chainStartSeq;
    };
    return records.every(matches) ? undefined : 'root_mismatch';
  };

  if (last >= from && from > 1) {
    const anchor = entries.get(from - 1);
    if (!anchor) return report({ seq: from - 1, reason: 'missing_entry' });
    if (anchor.length > 1) return report({ seq: from - 1, reason: 'broken_link' });
    link = linkAfter(anchor[0]!);
  }

  for (let seq = from; seq <= last; seq += 1) {
    const candidates = entries.get(seq);
    if (!candidates) return report({ seq, reason: 'missing_entry' });
    // Two entries claiming one seq fork the chain, whichever of them is genuine.
    if (candidates.length > 1) return report({ seq, reason: 'broken_link' });
    const entry = candidates[0]!;
    const canonicalEntry = canonicalEntryBytes(entry);
    const entryReason = entryFailure(entry, canonicalEntry);
    if (entryReason) return report({ seq, reason: entryReason });

    link = linkAfter(entry);
    if (link === undefined) unchained += 1;
    else {
      verified += 1;
      if (link.keyed) keyed += 1;
      chainStart ??= seq;
      chainEnd = seq;
    }
    tree?.append(canonicalEntry);

    const due = checkpoints.get(seq);
    const checkpointReason = due && checkpointFailure(due);
    if (checkpointReason) return report({ seq, reason: checkpointReason });
  }

  const beyond = [...checkpoints].filter(([size]) => size > last).flatMap(([, records]) => records);
  if (beyond.length === 0) return report();
  const opened = beyond.every((record) => opens(record, projectId, anchorPublicKey));
  return report({ seq: last + 1, reason: opened ? 'truncated' : 'checkpoint_unverifiable' });
}
