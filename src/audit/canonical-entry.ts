/**
 * RFC 8785 canonical JSON of an audit entry without prev_hash and entry_hash (what its hash
 * covers), written field by field in JCS key order instead of sorting keys per entry. The bytes
 * are those of `canonicalize` (test/unit/canonical-entry.unit.test.ts compares both on random
 * entries); an object of any other shape than the entry's takes the generic path.
 */
import { canonicalize } from '../crypto/canonical-json.js';
import { member, numberMember, presentMember, shapeCheck, stringMember, UNDEFINED } from '../crypto/canonical-fields.js';
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

export function canonicalEntryText(entry: CanonicalEntryInput): string {
  const v2 = hasPlacedEntryKeys(entry);
  if (!v2 && !hasEntryKeys(entry)) return generic(entry);
  const text =
    `{"approval_id":${stringMember(entry.approval_id)}` +
    `,"boot_epoch":${numberMember(entry.boot_epoch)}` +
    `,"bytes_out":${numberMember(entry.bytes_out)}` +
    `,"cache_status":${stringMember(entry.cache_status)}` +
    `,"client_ip":${stringMember(entry.client_ip)}` +
    `,"credential_id":${stringMember(entry.credential_id)}` +
    `,"decision_rule":${stringMember(entry.decision_rule)}` +
    `,"event":${stringMember(entry.event)}` +
    `,"gap":${member(entry.gap)}` +
    `,"id":${stringMember(entry.id)}` +
    `,"key_id":${stringMember(entry.key_id)}` +
    `,"latency_ms":${numberMember(entry.latency_ms)}` +
    `,"latency_us":${numberMember(entry.latency_us)}` +
    `,"normalized_sql":${stringMember(entry.normalized_sql)}` +
    `,"parsed":${member(entry.parsed)}` +
    `,"project_id":${stringMember(entry.project_id)}` +
    `,"proxy_id":${stringMember(entry.proxy_id)}` +
    `,"proxy_seq":${numberMember(entry.proxy_seq)}` +
    `,"query_hash":${stringMember(entry.query_hash)}` +
    presentMember(v2, 'ran_on', entry.ran_on) +
    `,"reason":${stringMember(entry.reason)}` +
    `,"region":${stringMember(entry.region)}` +
    presentMember(v2, 'replica_id', entry.replica_id) +
    `,"rows_returned":${numberMember(entry.rows_returned)}` +
    `,"seq":${numberMember(entry.seq)}` +
    `,"session_id":${stringMember(entry.session_id)}` +
    `,"source":${stringMember(entry.source)}` +
    `,"sql":${stringMember(entry.sql)}` +
    `,"statement_kind":${stringMember(entry.statement_kind)}` +
    `,"tables_blocked":${member(entry.tables_blocked)}` +
    `,"tables_read":${member(entry.tables_read)}` +
    `,"tables_written":${member(entry.tables_written)}` +
    `,"ts":${stringMember(entry.ts)}` +
    presentMember(v2, 'upstream_region', entry.upstream_region) +
    '}';
  return text.includes(UNDEFINED) ? generic(entry) : text;
}
