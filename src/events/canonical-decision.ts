/**
 * RFC 8785 canonical JSON of a StatementDecided payload (what ingest stores for every decision),
 * its members copied in JCS key order instead of sorting keys per payload. The bytes are
 * those of `canonicalize` (test/unit/canonical-decision.unit.test.ts compares both on random
 * payloads); an object of any other shape takes the generic path.
 */
import { canonicalize } from '../crypto/canonical-json.js';
import { orderedText, shapeCheck } from '../crypto/canonical-fields.js';

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


/** The payload's members in JCS key order. */
// prettier-ignore
const ordered = (p: DecisionMembers): Record<string, unknown> => ({
  approval_id: p.approval_id, boot_epoch: p.boot_epoch, bytes_out: p.bytes_out, cache_status: p.cache_status, client_ip: p.client_ip,
  credential_id: p.credential_id, decision_rule: p.decision_rule, event: p.event, latency_us: p.latency_us, normalized_sql: p.normalized_sql,
  parsed: p.parsed, project_id: p.project_id, proxy_id: p.proxy_id, query_hash: p.query_hash, ran_on: p.ran_on, reason: p.reason, region: p.region,
  replica_id: p.replica_id, rows_returned: p.rows_returned, seq: p.seq, session_id: p.session_id, source: p.source, sql: p.sql,
  statement_kind: p.statement_kind, tables_blocked: p.tables_blocked, tables_read: p.tables_read, tables_written: p.tables_written, ts: p.ts,
  upstream_region: p.upstream_region,
});

export function canonicalDecisionText(payload: DecisionMembers): string {
  const v2 = hasV2Keys(payload);
  if (!v2 && !hasV1Keys(payload)) return canonicalize(payload);
  return orderedText(ordered(payload), v2 ? [] : CANONICAL_PLACEMENT_FIELDS) ?? canonicalize(payload);
}
