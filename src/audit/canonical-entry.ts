/**
 * RFC 8785 canonical JSON of an audit entry without prev_hash and entry_hash (what its hash
 * covers), its fields copied in JCS key order instead of sorting keys per entry. The bytes
 * are those of `canonicalize` (test/unit/canonical-entry.unit.test.ts compares both on random
 * entries); an object of any other shape than the entry's takes the generic path.
 */
import { canonicalize } from '../crypto/canonical-json.js';
import { orderedText, shapeCheck } from '../crypto/canonical-fields.js';
import type { AuditEntry, HashedEntryContent } from './entry.js';

export type CanonicalEntryInput = HashedEntryContent & Partial<Pick<AuditEntry, 'prev_hash' | 'entry_hash'>>;

/** The fields of every entry, sorted by UTF-16 code units: the order canonicalEntryText writes them in. */
export const CANONICAL_ENTRY_FIELDS = [
  'approval_id',
  'boot_epoch',
  'bytes_out',
  'cache_status',
  'client_ip',
  'credential_id',
  'decision_rule',
  'event',
  'gap',
  'id',
  'key_id',
  'latency_ms',
  'latency_us',
  'normalized_sql',
  'parsed',
  'project_id',
  'proxy_id',
  'proxy_seq',
  'query_hash',
  'reason',
  'region',
  'rows_returned',
  'seq',
  'session_id',
  'source',
  'sql',
  'statement_kind',
  'tables_blocked',
  'tables_read',
  'tables_written',
  'ts',
] as const satisfies readonly (keyof HashedEntryContent)[];

/** The fields an entry of a StatementDecided v2 adds (where it ran), written in their key-order places; absent from every other entry and its hash. */
export const CANONICAL_PLACEMENT_FIELDS = ['ran_on', 'replica_id', 'upstream_region'] as const satisfies readonly (keyof HashedEntryContent)[];

const hasEntryKeys = shapeCheck(CANONICAL_ENTRY_FIELDS, ['prev_hash', 'entry_hash']);
const hasPlacedEntryKeys = shapeCheck([...CANONICAL_ENTRY_FIELDS, ...CANONICAL_PLACEMENT_FIELDS], ['prev_hash', 'entry_hash']);


function generic(entry: CanonicalEntryInput): string {
  const { prev_hash: _prev, entry_hash: _hash, ...content } = entry;
  return canonicalize(content);
}

/** The entry's fields in JCS key order. */
// prettier-ignore
const ordered = (e: CanonicalEntryInput): Record<string, unknown> => ({
  approval_id: e.approval_id, boot_epoch: e.boot_epoch, bytes_out: e.bytes_out, cache_status: e.cache_status, client_ip: e.client_ip,
  credential_id: e.credential_id, decision_rule: e.decision_rule, event: e.event, gap: e.gap, id: e.id, key_id: e.key_id, latency_ms: e.latency_ms,
  latency_us: e.latency_us, normalized_sql: e.normalized_sql, parsed: e.parsed, project_id: e.project_id, proxy_id: e.proxy_id, proxy_seq: e.proxy_seq,
  query_hash: e.query_hash, ran_on: e.ran_on, reason: e.reason, region: e.region, replica_id: e.replica_id, rows_returned: e.rows_returned, seq: e.seq,
  session_id: e.session_id, source: e.source, sql: e.sql, statement_kind: e.statement_kind, tables_blocked: e.tables_blocked, tables_read: e.tables_read,
  tables_written: e.tables_written, ts: e.ts, upstream_region: e.upstream_region,
});

export function canonicalEntryText(entry: CanonicalEntryInput): string {
  const placed = hasPlacedEntryKeys(entry);
  if (!placed && !hasEntryKeys(entry)) return generic(entry);
  return orderedText(ordered(entry), placed ? [] : CANONICAL_PLACEMENT_FIELDS) ?? generic(entry);
}
