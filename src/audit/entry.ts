/**
 * The audit log entry of spec §2.5: one row of a project's hash chain, built from a
 * StatementDecided or AuditGapRecorded event. Every field but prev_hash and entry_hash is covered
 * by the entry's hash, so the entry is exactly what an export shows.
 */
import { createHash } from 'node:crypto';
import { sha256Latin1 } from '../crypto/sha256.js';
import { base32Id } from '../ids.js';
import { z } from 'zod';
import { AuditEventKind, type AuditGapRecorded, type DecisionRecord, StatementDecided } from '../events/audit.js';
import { AuditEntryId, KeyId, ProjectId, Region, Sha256Hex, text, Timestamp } from '../events/fields.js';

const decision = StatementDecided.schema.shape;

/** Gap markers (spec §2.4, §6) are entries of their own kind, outside the §6 decision events. */
export const GAP_MARKER = 'gap_marker';

export const AuditEntryEvent = AuditEventKind.or(z.literal(GAP_MARKER));
export type AuditEntryEvent = z.infer<typeof AuditEntryEvent>;

/** int64 fields are JSON integers, so they must be exact in IEEE doubles to be hashed as written. */
const Count = z.int().min(0);
const ChainHash = Sha256Hex.or(z.literal(''));

export const AuditLogEntry = z.strictObject({
  /** `aud_` and 26 characters derived from project_id and seq. */
  id: AuditEntryId,
  project_id: ProjectId,
  /** Position in the project's chain, dense from 1. */
  seq: z.int().min(1),
  event: AuditEntryEvent,
  ts: Timestamp,
  credential_id: decision.credential_id,
  session_id: decision.session_id,
  source: decision.source,
  /** '' on gap markers, which no data-plane region wrote. */
  region: Region.or(z.literal('')),
  client_ip: decision.client_ip,
  sql: decision.sql,
  normalized_sql: decision.normalized_sql,
  query_hash: decision.query_hash,
  statement_kind: decision.statement_kind,
  decision_rule: decision.decision_rule,
  /** The decision's explanation, or a gap marker's machine-readable reason. */
  reason: text(2_000),
  cache_status: decision.cache_status,
  rows_returned: Count,
  bytes_out: Count,
  /** latency_us / 1000; 0 when the statement did not run or its latency was not finite. */
  latency_ms: z.number().min(0),
  /** The decision's exact latency in microseconds; null when latency_ms is not a measurement. */
  latency_us: decision.latency_us,
  tables_read: decision.tables_read,
  tables_written: decision.tables_written,
  tables_blocked: decision.tables_blocked,
  parsed: decision.parsed,
  proxy_id: decision.proxy_id,
  boot_epoch: decision.boot_epoch,
  /** The emitting proxy's own sequence number (not the chain's seq). */
  proxy_seq: Count.nullable(),
  approval_id: decision.approval_id,
  /**
   * Where the statement ran (StatementDecided v2): absent on entries of v1 decisions and on gap
   * markers, and then left out of the hash, so those hash as they always did.
   */
  ran_on: decision.ran_on.optional(),
  replica_id: decision.replica_id.optional(),
  upstream_region: decision.upstream_region.optional(),
  /** On gap markers: the lost range and count as AuditGapRecorded gives them; null otherwise. */
  gap: z.strictObject({ from_seq: Count, to_seq: Count, count: Count.nullable() }).nullable(),
  /** The HMAC key the entry hash was computed with; null for a plain SHA-256 (or legacy) entry. */
  key_id: KeyId.nullable(),
  /** Hex entry_hash of the previous chained entry, or the project's genesis hash; '' on legacy entries. */
  prev_hash: ChainHash,
  /** Hex SHA-256 or HMAC-SHA-256 of prev_hash bytes ‖ canonical entry bytes; '' on legacy entries. */
  entry_hash: ChainHash,
});
export type AuditEntry = z.infer<typeof AuditLogEntry>;

/** An entry before chaining. */
export type AuditEntryContent = Omit<AuditEntry, 'key_id' | 'prev_hash' | 'entry_hash'>;

/**
 * What entryFromDecision and entryFromGap build: an entry not keyed or linked yet, its chain fields
 * first, so that prepareOwnEntry keys it in place (chain fields added after 30 others would make it
 * a slow dictionary).
 */
export type UnchainedEntry = AuditEntry & { key_id: null; prev_hash: ''; entry_hash: '' };

/** The entry as its hash covers it: everything but prev_hash and entry_hash. */
export type HashedEntryContent = Omit<AuditEntry, 'prev_hash' | 'entry_hash'>;

/** An event value that the entry cannot carry exactly. */
export class AuditEntryError extends Error {
  override readonly name = 'AuditEntryError';
}

function checkSeq(seq: number): void {
  if (!Number.isSafeInteger(seq) || seq < 1) throw new AuditEntryError('seq must be a positive safe integer');
}

/** The entry id: `aud_` and 26 base32 characters (130 bits) of SHA-256 over project id and seq. */
export function auditEntryId(projectId: string, seq: number): string {
  checkSeq(seq);
  // The digest as a latin1 string: its bytes without a Buffer.
  return base32Id('aud_', sha256Latin1(`pgward-audit-id\0${projectId}\0${seq}`));
}

/** The prev_hash of a project's first chained entry: hex SHA-256("pgward-audit-genesis\0" ‖ project id). */
export function genesisHash(projectId: string): string {
  return createHash('sha256').update(`pgward-audit-genesis\0${projectId}`, 'utf8').digest('hex');
}

/** The gap marker reason of a decision whose counters an entry cannot carry exactly (see entryFromDecision). */
export const COUNTER_OUT_OF_RANGE = 'counter_out_of_range';

const isExactCount = (value: string | null): boolean => value === null || Number.isSafeInteger(Number(value));

/**
 * The entry of a decision. An entry hashes its counts as JSON numbers, exact up to 2^53 - 1; the
 * proxy never records more (proxy/audit-count.ts), but the event schema takes any int64. A decision
 * with a larger count becomes a gap marker (`counter_out_of_range`, the proxy's sequence number as
 * its range when that is exact) instead of an error: an error here would stop the projection and
 * the checkpointer at that event for good. The event keeps the decision's values exactly, and a
 * rebuild or `audit verify --from-events` makes the same marker.
 */
export function entryFromDecision(d: DecisionRecord, seq: number): UnchainedEntry {
  if (!isExactCount(d.rows_returned) || !isExactCount(d.bytes_out) || !isExactCount(d.seq)) return markerOfDecision(d, seq);
  const entry: UnchainedEntry = {
    key_id: null,
    prev_hash: '',
    entry_hash: '',
    id: auditEntryId(d.project_id, seq),
    project_id: d.project_id,
    seq,
    event: d.event,
    ts: d.ts,
    credential_id: d.credential_id,
    session_id: d.session_id,
    source: d.source,
    region: d.region,
    client_ip: d.client_ip,
    sql: d.sql,
    normalized_sql: d.normalized_sql,
    query_hash: d.query_hash,
    statement_kind: d.statement_kind,
    decision_rule: d.decision_rule,
    reason: d.reason,
    cache_status: d.cache_status,
    rows_returned: Number(d.rows_returned),
    bytes_out: Number(d.bytes_out),
    latency_ms: d.latency_us === null ? 0 : d.latency_us / 1000,
    latency_us: d.latency_us,
    tables_read: d.tables_read,
    tables_written: d.tables_written,
    tables_blocked: d.tables_blocked,
    parsed: d.parsed,
    proxy_id: d.proxy_id,
    boot_epoch: d.boot_epoch,
    proxy_seq: d.seq === null ? null : Number(d.seq),
    approval_id: d.approval_id,
    gap: null,
  };
  if (d.ran_on !== undefined) {
    entry.ran_on = d.ran_on;
    entry.replica_id = d.replica_id ?? null;
    entry.upstream_region = d.upstream_region ?? null;
  }
  return entry;
}

function markerOfDecision(d: DecisionRecord, seq: number): UnchainedEntry {
  const marker = entryFromGap({ project_id: d.project_id, proxy_id: d.proxy_id, boot_epoch: d.boot_epoch, from_seq: '0', to_seq: '0', count: '1', reason: COUNTER_OUT_OF_RANGE, ts: d.ts }, seq);
  const proxySeq = d.seq !== null && isExactCount(d.seq) ? Number(d.seq) : null;
  return { ...marker, gap: proxySeq === null ? null : { from_seq: proxySeq, to_seq: proxySeq, count: 1 } };
}

/** A gap's range and count, or null when one of them is beyond 2^53 - 1 (the event holds them exactly). */
function gapOf(g: Pick<AuditGapRecorded, 'from_seq' | 'to_seq' | 'count'>): AuditEntryContent['gap'] {
  if (!isExactCount(g.from_seq) || !isExactCount(g.to_seq) || !isExactCount(g.count)) return null;
  return { from_seq: Number(g.from_seq), to_seq: Number(g.to_seq), count: g.count === null ? null : Number(g.count) };
}

/** A gap marker: no credential, no statement, zero latency, written by the control plane. */
export function entryFromGap(g: AuditGapRecorded, seq: number): UnchainedEntry {
  return {
    key_id: null,
    prev_hash: '',
    entry_hash: '',
    id: auditEntryId(g.project_id, seq),
    project_id: g.project_id,
    seq,
    event: GAP_MARKER,
    ts: g.ts,
    credential_id: null,
    session_id: '',
    source: 'control',
    region: '',
    client_ip: '',
    sql: '',
    normalized_sql: '',
    query_hash: '',
    statement_kind: '',
    decision_rule: '',
    reason: g.reason,
    cache_status: 'none',
    rows_returned: 0,
    bytes_out: 0,
    latency_ms: 0,
    latency_us: null,
    tables_read: [],
    tables_written: [],
    tables_blocked: [],
    parsed: true,
    proxy_id: g.proxy_id,
    boot_epoch: g.boot_epoch,
    proxy_seq: null,
    approval_id: null,
    gap: gapOf(g),
  };
}
