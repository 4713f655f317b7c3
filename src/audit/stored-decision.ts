/**
 * Reading StatementDecided payloads back from the event store, which the projection and the
 * checkpointer do for every entry. Only encodeEvent writes them, after a full zod parse, and the
 * store returns their bytes unchanged; parsing them again cost about 8 µs an entry, each time.
 *
 * Read back, a payload gets a structural check instead: every field present with its JSON type,
 * the enums the read model and the rollups group by, and the counts and timestamp in the exact
 * format the entry and the insert convert. A payload that fails it takes the full parse, which
 * names what is wrong (or accepts it). Integrity does not rest on this check: an entry's hash and
 * Merkle leaf cover the bytes of whatever payload the store holds, so an event edited after a
 * checkpoint was signed over it is a root mismatch however well-formed it is. See docs/audit.md.
 */
import { AuditEventKind, AuditSource, CacheStatus, StatementDecided } from '../events/audit.js';
import { parseJson } from '../events/envelope.js';
import { isInt64, isNatural } from '../events/statement-decided-check.js';

const FIELDS = Object.keys(StatementDecided.schema.shape).length;
const EVENTS: ReadonlySet<unknown> = new Set(AuditEventKind.options);
const SOURCES: ReadonlySet<unknown> = new Set(AuditSource.options);
const CACHE: ReadonlySet<unknown> = new Set(CacheStatus.options);
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const isString = (value: unknown): value is string => typeof value === 'string';
const isStrings = (value: unknown): boolean => Array.isArray(value) && value.every(isString);

function looksStored(d: Record<string, unknown>): boolean {
  return (
    Object.keys(d).length === FIELDS &&
    EVENTS.has(d.event) &&
    SOURCES.has(d.source) &&
    CACHE.has(d.cache_status) &&
    isString(d.project_id) &&
    (d.credential_id === null || isString(d.credential_id)) &&
    isString(d.session_id) &&
    isString(d.region) &&
    isString(d.client_ip) &&
    isString(d.ts) &&
    TIMESTAMP.test(d.ts) &&
    isString(d.sql) &&
    isString(d.normalized_sql) &&
    isString(d.query_hash) &&
    isString(d.statement_kind) &&
    isString(d.decision_rule) &&
    isString(d.reason) &&
    isInt64(d.rows_returned) &&
    isInt64(d.bytes_out) &&
    (d.latency_us === null || isNatural(d.latency_us)) &&
    isStrings(d.tables_read) &&
    isStrings(d.tables_written) &&
    isStrings(d.tables_blocked) &&
    typeof d.parsed === 'boolean' &&
    (d.proxy_id === null || isString(d.proxy_id)) &&
    (d.boot_epoch === null || isNatural(d.boot_epoch)) &&
    (d.seq === null || isInt64(d.seq)) &&
    (d.approval_id === null || isString(d.approval_id))
  );
}

/** A StatementDecided payload as the store returns it (JSON), checked structurally; the full parse when that fails. */
export function storedDecision(data: Uint8Array): StatementDecided {
  const value = parseJson(data);
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && looksStored(value as Record<string, unknown>)) return value as StatementDecided;
  return StatementDecided.schema.parse(value);
}
