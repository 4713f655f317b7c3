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
import { AuditEventKind, AuditSource, CacheStatus, RanOn, StatementDecided, StatementDecidedV1, type DecisionRecord } from '../events/audit.js';
import { parseJson } from '../events/envelope.js';
import { isInt64, isNatural } from '../events/statement-decided-check.js';

const V1_FIELDS = Object.keys(StatementDecidedV1.schema.shape).length;
const V2_FIELDS = Object.keys(StatementDecided.schema.shape).length;
const RAN_ON: ReadonlySet<unknown> = new Set(RanOn.options);
const EVENTS: ReadonlySet<unknown> = new Set(AuditEventKind.options);
const SOURCES: ReadonlySet<unknown> = new Set(AuditSource.options);
const CACHE: ReadonlySet<unknown> = new Set(CacheStatus.options);
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const isString = (value: unknown): value is string => typeof value === 'string';
const isStrings = (value: unknown): boolean => Array.isArray(value) && value.every(isString);

const isStringOrNull = (value: unknown): boolean => value === null || isString(value);

/** v2's placement members with their JSON types. */
const looksPlaced = (d: Record<string, unknown>): boolean => (d.ran_on === null || RAN_ON.has(d.ran_on)) && isStringOrNull(d.replica_id) && isStringOrNull(d.upstream_region);

function looksStored(d: Record<string, unknown>, v2: boolean): boolean {
  return (
    Object.keys(d).length === (v2 ? V2_FIELDS : V1_FIELDS) &&
    (!v2 || looksPlaced(d)) &&
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

/**
 * A StatementDecided payload of either version as the store returns it (JSON), checked
 * structurally; the full parse of its version when that fails. A v1 payload is upcast as
 * `upcastDecision` says: as it stands, its placement members absent.
 */
export function storedDecision(type: string, data: Uint8Array): DecisionRecord {
  const value = parseJson(data);
  const v2 = type === StatementDecided.type;
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && looksStored(value as Record<string, unknown>, v2)) return value as DecisionRecord;
  return v2 ? StatementDecided.schema.parse(value) : StatementDecidedV1.schema.parse(value);
}
