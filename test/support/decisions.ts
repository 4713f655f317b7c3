/** Arbitrary StatementDecided payloads for property tests. */
import fc from 'fast-check';
import { AuditEventKind, AuditSource, CacheStatus, DECISION_RULE_PATTERN, PROXY_ID_PATTERN, type StatementDecided, type StatementDecidedV1 } from '../../src/events/audit.js';
import { idPattern, REGION_PATTERN, SESSION_ID_PATTERN, STATEMENT_KIND_PATTERN } from '../../src/events/fields.js';

const APPROVAL_EVENTS = ['approval_requested', 'approved', 'rejected', 'approval_expired'];
const INT64_MAX = 2n ** 63n - 1n;

const text = (maxLength: number) => fc.oneof(fc.string({ maxLength: Math.min(maxLength, 60) }), fc.string({ unit: 'grapheme', maxLength: Math.min(maxLength, 60) }));

/** v1 decisions (as stores hold them from before v2) the v1 schema accepts: every member in its format, the cross-member rules kept. */
export const decisionV1: fc.Arbitrary<StatementDecidedV1> = fc
  .record({
    event: fc.constantFrom(...AuditEventKind.options),
    project_id: fc.stringMatching(idPattern('prj_')),
    credential_id: fc.option(fc.stringMatching(idPattern('agt_')), { nil: null }),
    session_id: fc.oneof(fc.constant(''), fc.stringMatching(SESSION_ID_PATTERN)),
    region: fc.stringMatching(REGION_PATTERN),
    client_ip: fc.oneof(fc.constant(''), fc.ipV4(), fc.constantFrom('::1', '2001:db8::8a2e:370:7334', 'fe80::1', '::ffff:10.0.0.1')),
    ts: fc.date({ min: new Date('1970-01-01T00:00:00.000Z'), max: new Date('2199-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString()),
    sql: text(4096),
    normalized_sql: text(4096),
    query_hash: fc.oneof(fc.constant(''), fc.stringMatching(/^[0-9a-f]{16,64}$/)),
    statement_kind: fc.oneof(fc.constant(''), fc.stringMatching(STATEMENT_KIND_PATTERN)),
    decision_rule: fc.stringMatching(DECISION_RULE_PATTERN),
    reason: text(2000),
    cache_status: fc.constantFrom(...CacheStatus.options),
    rows_returned: fc.bigInt({ min: 0n, max: INT64_MAX }).map(String),
    bytes_out: fc.bigInt({ min: 0n, max: INT64_MAX }).map(String),
    latency_us: fc.option(fc.maxSafeNat(), { nil: null }),
    tables_read: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 3 }),
    tables_written: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 3 }),
    tables_blocked: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 3 }),
    parsed: fc.boolean(),
    proxy: fc.option(fc.tuple(fc.stringMatching(PROXY_ID_PATTERN), fc.nat(), fc.bigInt({ min: 0n, max: INT64_MAX }).map(String)), { nil: null }),
    source: fc.constantFrom(...AuditSource.options),
    approval_id: fc.stringMatching(idPattern('apr_')),
  })
  .map(({ proxy, source, approval_id, ...rest }) => ({
    ...rest,
    source: proxy === null && (source === 'wire' || source === 'mcp') ? 'rest' : source,
    proxy_id: proxy?.[0] ?? null,
    boot_epoch: proxy?.[1] ?? null,
    seq: proxy?.[2] ?? null,
    approval_id: APPROVAL_EVENTS.includes(rest.event) ? approval_id : null,
  }));

/** Decisions the (v2) schema accepts: every member in its format, the cross-member rules kept; where it ran agrees with its cache status. */
export const decision: fc.Arbitrary<StatementDecided> = fc
  .record({ d: decisionV1, on: fc.constantFrom('primary' as const, 'replica' as const, 'relay' as const), replica: fc.stringMatching(idPattern('rep_')), region: fc.stringMatching(REGION_PATTERN) })
  .map(({ d, on, replica, region }) => {
    if (d.cache_status === 'none' || d.cache_status === 'hit' || d.cache_status === 'stale') return placed(d);
    return { ...d, ran_on: on, replica_id: on === 'replica' ? replica : null, upstream_region: region };
  });

/** A v1-shaped decision with where it ran as v2's rules derive it from its cache status: a statement that ran upstream ran on the primary of `region` (the decision's own by default). */
export function placed<D extends Pick<StatementDecidedV1, 'cache_status' | 'region'>>(d: D, region: string = d.region): D & Pick<StatementDecided, 'ran_on' | 'replica_id' | 'upstream_region'> {
  if (d.cache_status === 'none') return { ...d, ran_on: null, replica_id: null, upstream_region: null };
  if (d.cache_status === 'hit' || d.cache_status === 'stale') return { ...d, ran_on: 'cache', replica_id: null, upstream_region: null };
  return { ...d, ran_on: 'primary', replica_id: null, upstream_region: region };
}
