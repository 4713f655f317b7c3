/**
 * Entries as a digest worker receives them: one JSON text per chunk, each entry the array of its
 * canonical fields' values (CANONICAL_ENTRY_FIELDS order) and its prev_hash. About half the cost of
 * posting the objects (structured clone writes every key of every entry) on each side. JSON
 * carries only some values exactly, so an entry holding any other (a non-finite number, undefined,
 * a class instance, another shape) goes as null, and the walk digests it on the calling thread.
 */
import { jsonScalar, shapeCheck } from '../crypto/canonical-fields.js';
import { CANONICAL_ENTRY_FIELDS, CANONICAL_PLACEMENT_FIELDS } from './canonical-entry.js';
import type { RecordedEntry } from './digest-records.js';

const hasEntryKeys = shapeCheck(CANONICAL_ENTRY_FIELDS, ['prev_hash', 'entry_hash']);
const hasPlacedEntryKeys = shapeCheck([...CANONICAL_ENTRY_FIELDS, ...CANONICAL_PLACEMENT_FIELDS], ['prev_hash', 'entry_hash']);
/** The values of an entry without placement: its canonical fields and prev_hash. An entry with them carries three more, at the end. */
const PLAIN_VALUES = CANONICAL_ENTRY_FIELDS.length + 1;
/** Deeper values are left to the calling thread, whose canonical JSON refuses cycles. */
const MAX_DEPTH = 16;

/** True when JSON.parse(JSON.stringify(value)) has the canonical JSON of value. */
function exactInJson(value: unknown, depth: number): boolean {
  if (typeof value !== 'object' || value === null) return jsonScalar(value);
  if (depth === MAX_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!exactInJson(value[i], depth + 1)) return false;
    return true;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  // An undefined member is absent from both JSON and canonical JSON.
  for (const member of Object.values(value)) if (member !== undefined && !exactInJson(member, depth + 1)) return false;
  return true;
}

/**
 * The values in CANONICAL_ENTRY_FIELDS order, then prev_hash, then (on an entry of a v2 decision)
 * its CANONICAL_PLACEMENT_FIELDS; null when JSON would not carry one exactly. Written out: a loop
 * over the field names costs a keyed load each.
 */
function wireValues(e: RecordedEntry): unknown[] | null {
  const placed = hasPlacedEntryKeys(e);
  if ((!placed && !hasEntryKeys(e)) || typeof e.prev_hash !== 'string') return null;
  // prettier-ignore
  const values: unknown[] = [
    e.approval_id, e.boot_epoch, e.bytes_out, e.cache_status, e.client_ip, e.credential_id, e.decision_rule, e.event, e.gap, e.id, e.key_id,
    e.latency_ms, e.latency_us, e.normalized_sql, e.parsed, e.project_id, e.proxy_id, e.proxy_seq, e.query_hash, e.reason, e.region,
    e.rows_returned, e.seq, e.session_id, e.source, e.sql, e.statement_kind, e.tables_blocked, e.tables_read, e.tables_written, e.ts, e.prev_hash,
  ];
  if (placed) values.push(e.ran_on, e.replica_id, e.upstream_region);
  for (const value of values) if (typeof value !== 'string' && value !== null && !exactInJson(value, 0)) return null;
  return values;
}

/** wireValues, or null when reading the entry throws (a getter): the walk then throws on the calling thread where the pass would. */
function wireValuesOrNull(entry: RecordedEntry): unknown[] | null {
  try {
    return wireValues(entry);
  } catch {
    return null;
  }
}

/** True when digests of the entry can be taken ahead on any thread: its canonical text is then sure not to throw, on any stack. */
export function carriedByWire(entry: RecordedEntry): boolean {
  return wireValuesOrNull(entry) !== null;
}

export function encodeEntries(entries: readonly RecordedEntry[]): string {
  return JSON.stringify(entries.map(wireValuesOrNull));
}

/** An entry of wireValues, its members in canonical order as canonicalEntryText writes them. */
function wireEntry(v: unknown[]): RecordedEntry {
  // prettier-ignore
  const entry = {
    approval_id: v[0], boot_epoch: v[1], bytes_out: v[2], cache_status: v[3], client_ip: v[4], credential_id: v[5], decision_rule: v[6], event: v[7],
    gap: v[8], id: v[9], key_id: v[10], latency_ms: v[11], latency_us: v[12], normalized_sql: v[13], parsed: v[14], project_id: v[15], proxy_id: v[16],
    proxy_seq: v[17], query_hash: v[18], reason: v[19], region: v[20], rows_returned: v[21], seq: v[22], session_id: v[23], source: v[24], sql: v[25],
    statement_kind: v[26], tables_blocked: v[27], tables_read: v[28], tables_written: v[29], ts: v[30], prev_hash: v[31],
  } as RecordedEntry;
  return v.length === PLAIN_VALUES ? entry : ({ ...entry, ran_on: v[32], replica_id: v[33], upstream_region: v[34] } as RecordedEntry);
}

/** The entries of encodeEntries, each with exactly the canonical fields and prev_hash; null where one was left to the calling thread. */
export function decodeEntries(text: string): (RecordedEntry | null)[] {
  return (JSON.parse(text) as (unknown[] | null)[]).map((values) => values && wireEntry(values));
}
