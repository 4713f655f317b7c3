/**
 * RFC 8785 canonical JSON of a StatementDecided payload (what ingest stores for every decision),
 * written member by member in JCS key order instead of sorting keys per payload. The bytes are
 * those of `canonicalize` (test/unit/canonical-decision.unit.test.ts compares both on random
 * payloads); an object of any other shape takes the generic path.
 */
import { canonicalize } from '../crypto/canonical-json.js';
import { member, numberMember, presentMember, shapeCheck, stringMember, UNDEFINED } from '../crypto/canonical-fields.js';

/** The v1 payload's fields (the unit test compares them with the schema's), sorted by UTF-16 code units: the order canonicalDecisionText writes them in. */
export const CANONICAL_DECISION_FIELDS = [
  'approval_id',
  'boot_epoch',
  'bytes_out',
  'cache_status',
  'client_ip',
  'credential_id',
  'decision_rule',
  'event',
  'latency_us',
  'normalized_sql',
  'parsed',
  'project_id',
  'proxy_id',
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
] as const;

/** The members v2 adds (where the statement ran), written in their key-order places among v1's. */
export const CANONICAL_PLACEMENT_FIELDS = ['ran_on', 'replica_id', 'upstream_region'] as const;

const hasV1Keys = shapeCheck(CANONICAL_DECISION_FIELDS);
const hasV2Keys = shapeCheck([...CANONICAL_DECISION_FIELDS, ...CANONICAL_PLACEMENT_FIELDS]);

/** The payload's members: v1's and, on v2, the placement; typed apart from StatementDecided, whose definitions use this encoder. */
export type DecisionMembers = Readonly<Record<(typeof CANONICAL_DECISION_FIELDS)[number], unknown> & Partial<Record<(typeof CANONICAL_PLACEMENT_FIELDS)[number], unknown>>>;


export function canonicalDecisionText(payload: DecisionMembers): string {
  const v2 = hasV2Keys(payload);
  if (!v2 && !hasV1Keys(payload)) return canonicalize(payload);
  const text =
    `{"approval_id":${stringMember(payload.approval_id)}` +
    `,"boot_epoch":${numberMember(payload.boot_epoch)}` +
    `,"bytes_out":${stringMember(payload.bytes_out)}` +
    `,"cache_status":${stringMember(payload.cache_status)}` +
    `,"client_ip":${stringMember(payload.client_ip)}` +
    `,"credential_id":${stringMember(payload.credential_id)}` +
    `,"decision_rule":${stringMember(payload.decision_rule)}` +
    `,"event":${stringMember(payload.event)}` +
    `,"latency_us":${numberMember(payload.latency_us)}` +
    `,"normalized_sql":${stringMember(payload.normalized_sql)}` +
    `,"parsed":${member(payload.parsed)}` +
    `,"project_id":${stringMember(payload.project_id)}` +
    `,"proxy_id":${stringMember(payload.proxy_id)}` +
    `,"query_hash":${stringMember(payload.query_hash)}` +
    presentMember(v2, 'ran_on', payload.ran_on) +
    `,"reason":${stringMember(payload.reason)}` +
    `,"region":${stringMember(payload.region)}` +
    presentMember(v2, 'replica_id', payload.replica_id) +
    `,"rows_returned":${stringMember(payload.rows_returned)}` +
    `,"seq":${stringMember(payload.seq)}` +
    `,"session_id":${stringMember(payload.session_id)}` +
    `,"source":${stringMember(payload.source)}` +
    `,"sql":${stringMember(payload.sql)}` +
    `,"statement_kind":${stringMember(payload.statement_kind)}` +
    `,"tables_blocked":${member(payload.tables_blocked)}` +
    `,"tables_read":${member(payload.tables_read)}` +
    `,"tables_written":${member(payload.tables_written)}` +
    `,"ts":${stringMember(payload.ts)}` +
    presentMember(v2, 'upstream_region', payload.upstream_region) +
    '}';
  return text.includes(UNDEFINED) ? canonicalize(payload) : text;
}
