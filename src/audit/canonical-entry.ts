/**
 * RFC 8785 canonical JSON of an audit entry without prev_hash and entry_hash (what its hash
 * covers), written field by field in JCS key order instead of sorting keys per entry. The bytes
 * are those of `canonicalize` (test/unit/canonical-entry.unit.test.ts compares both on random
 * entries); an object of any other shape than the entry's takes the generic path.
 */
import { canonicalize } from '../crypto/canonical-json.js';
import type { AuditEntry, HashedEntryContent } from './entry.js';

export type CanonicalEntryInput = HashedEntryContent & Partial<Pick<AuditEntry, 'prev_hash' | 'entry_hash'>>;

/** The entry's fields, sorted by UTF-16 code units: the order canonicalEntryText writes them in. */
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

const HASHES = ['prev_hash', 'entry_hash'];
const KNOWN = new Set<string>([...CANONICAL_ENTRY_FIELDS, ...HASHES]);

/** True when the entry's own properties are its fields and maybe its hashes: nothing the generic path would add. */
function hasEntryKeys(entry: Readonly<Record<string, unknown>>): boolean {
  const own = Object.keys(entry);
  return own.length === CANONICAL_ENTRY_FIELDS.length + HASHES.filter((key) => Object.hasOwn(entry, key)).length && own.every((key) => KNOWN.has(key));
}

function generic(entry: CanonicalEntryInput): string {
  const { prev_hash: _prev, entry_hash: _hash, ...content } = entry;
  return canonicalize(content);
}

/** Stands for an undefined field, which the generic path omits: canonical JSON never holds a raw control character. */
const UNDEFINED = '\u0000';

function member(value: unknown): string {
  return value === undefined ? UNDEFINED : canonicalize(value);
}

export function canonicalEntryText(entry: CanonicalEntryInput): string {
  if (!hasEntryKeys(entry)) return generic(entry);
  const text =
    `{"approval_id":${member(entry.approval_id)}` +
    `,"boot_epoch":${member(entry.boot_epoch)}` +
    `,"bytes_out":${member(entry.bytes_out)}` +
    `,"cache_status":${member(entry.cache_status)}` +
    `,"client_ip":${member(entry.client_ip)}` +
    `,"credential_id":${member(entry.credential_id)}` +
    `,"decision_rule":${member(entry.decision_rule)}` +
    `,"event":${member(entry.event)}` +
    `,"gap":${member(entry.gap)}` +
    `,"id":${member(entry.id)}` +
    `,"key_id":${member(entry.key_id)}` +
    `,"latency_ms":${member(entry.latency_ms)}` +
    `,"latency_us":${member(entry.latency_us)}` +
    `,"normalized_sql":${member(entry.normalized_sql)}` +
    `,"parsed":${member(entry.parsed)}` +
    `,"project_id":${member(entry.project_id)}` +
    `,"proxy_id":${member(entry.proxy_id)}` +
    `,"proxy_seq":${member(entry.proxy_seq)}` +
    `,"query_hash":${member(entry.query_hash)}` +
    `,"reason":${member(entry.reason)}` +
    `,"region":${member(entry.region)}` +
    `,"rows_returned":${member(entry.rows_returned)}` +
    `,"seq":${member(entry.seq)}` +
    `,"session_id":${member(entry.session_id)}` +
    `,"source":${member(entry.source)}` +
    `,"sql":${member(entry.sql)}` +
    `,"statement_kind":${member(entry.statement_kind)}` +
    `,"tables_blocked":${member(entry.tables_blocked)}` +
    `,"tables_read":${member(entry.tables_read)}` +
    `,"tables_written":${member(entry.tables_written)}` +
    `,"ts":${member(entry.ts)}` +
    '}';
  return text.includes(UNDEFINED) ? generic(entry) : text;
}
