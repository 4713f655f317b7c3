/**
 * Verification of a project's audit chain (spec §2.7). One pass in seq order checks each entry,
 * then each checkpoint whose size that entry completes; the first failure ends the pass, whether
 * the entries come as one array (verifyChain, verifyChainParallel) or in pages (verifyChainPages).
 * The order of checks, which decides the reason when several apply, is in docs/audit-verification.md.
 * The pass is the same everywhere; verifyChainParallel and verifyChainPages only have the digests
 * of large windows computed ahead on worker threads (digest-pipeline.ts).
 */
import { timingSafeEqual, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { CheckpointError, verifyCheckpoint } from '../crypto/checkpoint.js';
import { MerkleBuilder } from '../crypto/merkle.js';
import type { AuditCheckpointSigned } from '../events/audit.js';
import { SHA256_HEX_PATTERN, Timestamp } from '../events/fields.js';
import { auditCheckpointNote, recordCheckpoint } from './checkpoints.js';
import { digestedPages, type ParallelVerification } from './digest-pipeline.js';
import { RecordedDigests } from './digest-records.js';
import { EntryDigests, type DigestSource } from './entry-digests.js';
import { genesisHash, type AuditEntry } from './entry.js';

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

export interface VerifyChainOptions {
  readonly projectId: string;
  readonly checkpoints: readonly AuditCheckpointSigned[];
  readonly hmacKeys: ReadonlyMap<string, Buffer>;
  readonly anchorPublicKey: KeyObject;
  readonly verifiedAt: string;
  /** First seq to verify (default 1). Above 1, the entries must also hold the entry at fromSeq - 1, the window's anchor. */
  readonly fromSeq?: number;
  /** Last seq to verify (default: the last stored). */
  readonly toSeq?: number;
}

export interface VerifyChainInput extends VerifyChainOptions {
  /** Entries as stored, in any order; holes and duplicates are findings, not errors. */
  readonly entries: readonly AuditEntry[];
}

/** The chained entry the next one must link to; undefined before the chain starts. */
interface Link {
  readonly hash: string;
  readonly keyed: boolean;
}

interface Failure {
  readonly seq: number;
  readonly reason: AuditFailureReason;
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

/** The entry's seq; not a finding when invalid: no store holds such a seq, and the walk would skip the entry. */
function seqOf(entry: AuditEntry): number {
  if (!Number.isSafeInteger(entry.seq) || entry.seq < 1) throw new RangeError(`an entry has seq ${String(entry.seq)}, not a positive integer`);
  return entry.seq;
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

/** The window's first and last seq; throws RangeError when it is not a window. */
function windowOf(options: Pick<VerifyChainOptions, 'fromSeq' | 'toSeq'>): { from: number; to: number } {
  const from = options.fromSeq ?? 1;
  const to = options.toSeq ?? Number.POSITIVE_INFINITY;
  if (!Number.isSafeInteger(from) || from < 1) throw new RangeError('fromSeq must be a positive integer');
  if (options.toSeq !== undefined && (!Number.isSafeInteger(to) || to < from)) throw new RangeError('toSeq must be an integer no less than fromSeq');
  return { from, to };
}

/**
 * One pass over a window of the chain in seq order: the anchor (the entry before the window, when
 * the window does not start at 1), then each seq's candidates, then the checkpoints beyond the end.
 */
class ChainWalk {
  readonly from: number;
  readonly to: number;
  readonly #options: VerifyChainOptions;
  readonly #checkpoints: Map<number, AuditCheckpointSigned[]>;
  // A root covers entries 1..size, so only a window from seq 1 can recompute it.
  readonly #tree: MerkleBuilder | undefined;
  readonly #genesis: string;
  readonly #digests: DigestSource;
  readonly #compared = Buffer.alloc(128);
  readonly #storedHash = this.#compared.subarray(0, 64);
  readonly #computedHash = this.#compared.subarray(64);
  /** The last hash known to be 64 hex digits: a prev_hash equal to it needs no pattern test. */
  #knownHex: string;
  #link: Link | undefined;
  #verified = 0;
  #keyed = 0;
  #unchained = 0;
  #chainStart: number | null = null;
  #chainEnd: number | null = null;

  constructor(options: VerifyChainOptions, digests: DigestSource) {
    this.#options = options;
    this.#digests = digests;
    ({ from: this.from, to: this.to } = windowOf(options));
    this.#checkpoints = groupBy(
      options.checkpoints.filter((c) => Number(c.size) >= this.from && Number(c.size) <= this.to),
      (c) => Number(c.size),
    );
    this.#tree = this.from === 1 ? new MerkleBuilder() : undefined;
    this.#genesis = genesisHash(options.projectId);
    this.#knownHex = this.#genesis;
  }

  report(failure?: Failure): AuditChainVerification {
    return {
      ok: failure === undefined,
      verified_count: this.#verified,
      keyed_count: this.#keyed,
      unchained_count: this.#unchained,
      chain_start_seq: this.#chainStart,
      chain_end_seq: this.#chainEnd,
      first_broken_seq: failure?.seq ?? null,
      failure_reason: failure?.reason ?? null,
      verified_at: this.#options.verifiedAt,
    };
  }

  /** The candidates for seq fromSeq - 1, when the window holds any entry. */
  anchor(candidates: readonly AuditEntry[] | undefined): Failure | undefined {
    const seq = this.from - 1;
    if (!candidates) return { seq, reason: 'missing_entry' };
    if (candidates.length > 1) return { seq, reason: 'broken_link' };
    this.#link = linkAfter(candidates[0]!);
    return undefined;
  }

  /** The candidates for `seq`, the next seq of the window. */
  step(seq: number, candidates: readonly AuditEntry[] | undefined): Failure | undefined {
    if (!candidates) return { seq, reason: 'missing_entry' };
    // Two entries claiming one seq fork the chain, whichever of them is genuine.
    if (candidates.length > 1) return { seq, reason: 'broken_link' };
    const entry = candidates[0]!;
    this.#digests.load(entry);
    const entryReason = this.#entryFailure(entry);
    if (entryReason) return { seq, reason: entryReason };

    this.#link = linkAfter(entry);
    if (this.#link === undefined) this.#unchained += 1;
    else {
      this.#verified += 1;
      this.#knownHex = this.#link.hash;
      if (this.#link.keyed) this.#keyed += 1;
      this.#chainStart ??= seq;
      this.#chainEnd = seq;
    }
    this.#tree?.appendLeafDigest(this.#digests.leafDigest());

    const due = this.#checkpoints.get(seq);
    const checkpointReason = due && this.#checkpointFailure(due);
    return checkpointReason ? { seq, reason: checkpointReason } : undefined;
  }

  /** The report once every seq up to `last` passed: checkpoints beyond it say the chain was truncated. */
  finish(last: number): AuditChainVerification {
    const beyond = [...this.#checkpoints].filter(([size]) => size > last).flatMap(([, records]) => records);
    if (beyond.length === 0) return this.report();
    const opened = beyond.every((record) => opens(record, this.#options.projectId, this.#options.anchorPublicKey));
    return this.report({ seq: last + 1, reason: opened ? 'truncated' : 'checkpoint_unverifiable' });
  }

  #hashMatches(entry: AuditEntry, key: Buffer | undefined): boolean {
    if (entry.prev_hash !== this.#knownHex && !SHA256_HEX_PATTERN.test(entry.prev_hash)) return false;
    // An unkeyed hash is no secret (anyone can compute it), so comparing it may take any time; a keyed one is compared in constant time.
    // Equal to a computed hash, an unkeyed entry_hash is 64 hex digits without a pattern test.
    if (!key) return this.#digests.entryHash(entry.prev_hash, undefined) === entry.entry_hash;
    if (!SHA256_HEX_PATTERN.test(entry.entry_hash)) return false;
    const computed = this.#digests.entryHash(entry.prev_hash, key);
    // Both are 64 ASCII hex digits now, so their latin1 bytes are their text: compared without a buffer per entry.
    this.#compared.write(entry.entry_hash, 0, 64, 'latin1');
    this.#compared.write(computed, 64, 64, 'latin1');
    return timingSafeEqual(this.#storedHash, this.#computedHash);
  }

  #entryFailure(entry: AuditEntry): AuditFailureReason | undefined {
    const { projectId, hmacKeys } = this.#options;
    if (this.#link === undefined && isLegacy(entry)) return entry.project_id === projectId ? undefined : 'broken_link';
    const key = entry.key_id === null ? undefined : hmacKeys.get(entry.key_id);
    if (entry.key_id !== null && !key) return 'unknown_key';
    if (entry.key_id === null && this.#link?.keyed) return 'key_downgrade';
    if (!this.#hashMatches(entry, key)) return 'hash_mismatch';
    if (entry.project_id !== projectId || entry.prev_hash !== (this.#link?.hash ?? this.#genesis)) return 'broken_link';
    return undefined;
  }

  #checkpointFailure(records: readonly AuditCheckpointSigned[]): AuditFailureReason | undefined {
    const { projectId, anchorPublicKey } = this.#options;
    if (!records.every((record) => opens(record, projectId, anchorPublicKey))) return 'checkpoint_unverifiable';
    if (!this.#tree) return undefined;
    const root = this.#tree.root();
    const chainStartSeq = this.#unchained + 1;
    const matches = (record: AuditCheckpointSigned) => {
      const claimed = recordCheckpoint(record);
      return claimed.root.equals(root) && claimed.chainStartSeq === chainStartSeq;
    };
    return records.every(matches) ? undefined : 'root_mismatch';
  }
}

/**
 * Walks entries given in ascending seq order: a seq's candidates are walked once the next seq shows
 * up, since a duplicate may follow (in pages, at the start of the next page).
 */
class AscendingWalk {
  readonly #walk: ChainWalk;
  #anchor: AuditEntry[] | undefined;
  #anchored: boolean;
  #group: AuditEntry[] = [];
  #next: number;

  constructor(options: VerifyChainOptions, digests: DigestSource) {
    this.#walk = new ChainWalk(options, digests);
    this.#anchored = this.#walk.from === 1;
    this.#next = this.#walk.from;
  }

  /** The report when this entry reveals the first failure, else undefined. */
  add(entry: AuditEntry): AuditChainVerification | undefined {
    const { from, to } = this.#walk;
    const seq = seqOf(entry);
    if (seq < from - 1 || seq > to) return undefined;
    if (seq === from - 1) {
      (this.#anchor ??= []).push(entry);
      return undefined;
    }
    const group = this.#group;
    if (group.length > 0 && seq === group[0]!.seq) {
      group.push(entry);
      return undefined;
    }
    if (group.length > 0 && seq < group[0]!.seq) throw new RangeError('pages of entries must come in ascending seq order');
    const failure = group.length > 0 ? this.#walkGroup() : undefined;
    this.#group = [entry];
    return failure && this.#walk.report(failure);
  }

  end(): AuditChainVerification {
    const failure = this.#group.length > 0 ? this.#walkGroup() : undefined;
    return failure ? this.#walk.report(failure) : this.#walk.finish(this.#next - 1);
  }

  #walkGroup(): Failure | undefined {
    const seq = this.#group[0]!.seq;
    if (!this.#anchored) {
      this.#anchored = true;
      const failure = this.#walk.anchor(this.#anchor);
      if (failure) return failure;
    }
    if (seq > this.#next) return this.#walk.step(this.#next, undefined);
    this.#next = seq + 1;
    return this.#walk.step(seq, this.#group);
  }
}

/** The entries in ascending seq order, the candidates of one seq in their given order; every seq is checked first, since the walk may end at the first failure. */
function sortedEntries(entries: readonly AuditEntry[]): AuditEntry[] {
  for (const entry of entries) seqOf(entry);
  return [...entries].sort((a, b) => a.seq - b.seq);
}

/** The pass on the calling thread, digests included: the reference verifyChainParallel and verifyChainPages report the same as. */
export function verifyChain(input: VerifyChainInput): AuditChainVerification {
  const walk = new AscendingWalk(input, new EntryDigests());
  for (const entry of sortedEntries(input.entries)) {
    const report = walk.add(entry);
    if (report) return report;
  }
  return walk.end();
}

/**
 * verifyChain over entries read in pages (ascending seq, as the read model returns them), a few
 * pages in memory at a time; the same findings in the same order. Unless the first page is small,
 * worker threads digest entries ahead of the pass (`parallel`); rejects with AuditVerifyError when
 * a worker fails.
 */
export async function verifyChainPages(options: VerifyChainOptions, pages: AsyncIterable<readonly AuditEntry[]>, parallel?: ParallelVerification): Promise<AuditChainVerification> {
  const digests = new RecordedDigests();
  const walk = new AscendingWalk(options, digests);
  for await (const { entries, records } of digestedPages(pages, options.hmacKeys, parallel)) {
    if (records) digests.push({ entries, records });
    for (const entry of entries) {
      const report = walk.add(entry);
      if (report) return report;
    }
  }
  return walk.end();
}

/** verifyChain with the digests of a large window computed on worker threads as well, as verifyChainPages does. */
export async function verifyChainParallel(input: VerifyChainInput, parallel?: ParallelVerification): Promise<AuditChainVerification> {
  const { entries, ...options } = input;
  windowOf(options);
  const sorted = sortedEntries(entries);
  return verifyChainPages(options, (async function* () {
    yield sorted;
  })(), parallel);
}
