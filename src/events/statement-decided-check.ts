/**
 * StatementDecided's schema as a hand-written predicate, for ingest, which checks every decision
 * at the trust boundary: about a quarter of the cost of the zod parse, which is left to name what
 * is wrong with the records it refuses. It accepts exactly what the schema accepts, member by
 * member with the schema's own patterns and bounds, and the schema's output of an accepted record
 * equals the record (test/unit/statement-decided-check.unit.test.ts compares both on random and
 * mutated records). IPv6 client addresses, rare, are left to their member schema.
 */
import { z } from 'zod';
import {
  AuditEventKind,
  AuditSource,
  CacheStatus,
  DECISION_RULE_PATTERN,
  DECISION_TABLES_MAX,
  decisionRules,
  placementRules,
  PROXY_ID_PATTERN,
  QUERY_HASH_PATTERN,
  RanOn,
  StatementDecided,
  StatementDecidedV1,
  type DecisionRecord,
} from './audit.js';
import { idPattern, INT64_MAX, INT64_PATTERN, REGION_PATTERN, SESSION_ID_PATTERN, STATEMENT_KIND_PATTERN, TableName, TEXT_PATTERN, Timestamp } from './fields.js';

const shape = StatementDecidedV1.schema.shape;
const V1_MEMBERS: ReadonlySet<string> = new Set(Object.keys(shape));
const V2_MEMBERS: ReadonlySet<string> = new Set(Object.keys(StatementDecided.schema.shape));
const RAN_ON: ReadonlySet<unknown> = new Set(RanOn.options);
const REPLICA_ID = idPattern('rep_');
const EVENTS: ReadonlySet<unknown> = new Set(AuditEventKind.options);
const SOURCES: ReadonlySet<unknown> = new Set(AuditSource.options);
const CACHE: ReadonlySet<unknown> = new Set(CacheStatus.options);
const PROJECT_ID = idPattern('prj_');
const CREDENTIAL_ID = idPattern('agt_');
const APPROVAL_ID = idPattern('apr_');
const TIMESTAMP = Timestamp.def.pattern!;
const SQL_MAX = shape.sql.maxLength!;
const REASON_MAX = shape.reason.maxLength!;
const TABLE_MIN = TableName.minLength!;
const TABLE_MAX = TableName.maxLength!;

const matches = (pattern: RegExp, value: unknown): boolean => typeof value === 'string' && pattern.test(value);
const isText = (value: unknown, max: number): boolean => typeof value === 'string' && value.length <= max && TEXT_PATTERN.test(value);
export const isNatural = (value: unknown): boolean => Number.isSafeInteger(value) && (value as number) >= 0;
/** An Int64String. */
export const isInt64 = (value: unknown): boolean => matches(INT64_PATTERN, value) && BigInt(value as string) <= INT64_MAX;
const isClientIp = (value: unknown): boolean => value === '' || matches(z.regexes.ipv4, value) || (typeof value === 'string' && shape.client_ip.safeParse(value).success);

function isTables(value: unknown): boolean {
  if (!Array.isArray(value) || value.length > DECISION_TABLES_MAX) return false;
  for (let i = 0; i < value.length; i++) {
    const table: unknown = value[i];
    if (typeof table !== 'string' || table.length < TABLE_MIN || !isText(table, TABLE_MAX)) return false;
  }
  return true;
}

function hasOnlyMembers(record: object, members: ReadonlySet<string>): boolean {
  // for-in, as the schema looks for unknown keys.
  for (const key in record) if (!members.has(key)) return false;
  return true;
}

/** Whether v2's placement members hold what its schema accepts. */
function isPlaced(d: Readonly<Record<'ran_on' | 'replica_id' | 'upstream_region' | 'cache_status', unknown>>): boolean {
  return (
    (d.ran_on === null || RAN_ON.has(d.ran_on)) &&
    (d.replica_id === null || matches(REPLICA_ID, d.replica_id)) &&
    (d.upstream_region === null || matches(REGION_PATTERN, d.upstream_region)) &&
    placementRules.ranWhenCached(d) &&
    placementRules.replicaNamed(d) &&
    placementRules.upstreamRegionNamed(d)
  );
}

/**
 * Whether the StatementDecided schema of the record's version accepts `value`: v2's when it has
 * the placement members (`ran_on` among them), v1's otherwise (a proxy of an earlier release).
 */
export function isStatementDecided(value: unknown): value is DecisionRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const d = value as Readonly<Record<keyof typeof StatementDecided.schema.shape, unknown>>;
  const v2 = 'ran_on' in d;
  return (
    hasOnlyMembers(d, v2 ? V2_MEMBERS : V1_MEMBERS) &&
    (!v2 || isPlaced(d)) &&
    EVENTS.has(d.event) &&
    matches(PROJECT_ID, d.project_id) &&
    (d.credential_id === null || matches(CREDENTIAL_ID, d.credential_id)) &&
    (d.session_id === '' || matches(SESSION_ID_PATTERN, d.session_id)) &&
    SOURCES.has(d.source) &&
    matches(REGION_PATTERN, d.region) &&
    isClientIp(d.client_ip) &&
    matches(TIMESTAMP, d.ts) &&
    isText(d.sql, SQL_MAX) &&
    isText(d.normalized_sql, SQL_MAX) &&
    matches(QUERY_HASH_PATTERN, d.query_hash) &&
    (d.statement_kind === '' || matches(STATEMENT_KIND_PATTERN, d.statement_kind)) &&
    matches(DECISION_RULE_PATTERN, d.decision_rule) &&
    isText(d.reason, REASON_MAX) &&
    CACHE.has(d.cache_status) &&
    isInt64(d.rows_returned) &&
    isInt64(d.bytes_out) &&
    (d.latency_us === null || isNatural(d.latency_us)) &&
    isTables(d.tables_read) &&
    isTables(d.tables_written) &&
    isTables(d.tables_blocked) &&
    typeof d.parsed === 'boolean' &&
    (d.proxy_id === null || matches(PROXY_ID_PATTERN, d.proxy_id)) &&
    (d.boot_epoch === null || isNatural(d.boot_epoch)) &&
    (d.seq === null || isInt64(d.seq)) &&
    (d.approval_id === null || matches(APPROVAL_ID, d.approval_id)) &&
    decisionRules.proxyFieldsTogether(d) &&
    decisionRules.proxiedSourcesCarryProxy(d) &&
    decisionRules.approvalsCarryApprovalId(d)
  );
}

/** The parse of the record's version, through isStatementDecided: an accepted record is returned as it is; a refused one gets the schema's ZodError. */
export function parseStatementDecided(value: unknown): DecisionRecord {
  if (isStatementDecided(value)) return value;
  const v2 = typeof value === 'object' && value !== null && 'ran_on' in value;
  return v2 ? StatementDecided.schema.parse(value) : StatementDecidedV1.schema.parse(value);
}
