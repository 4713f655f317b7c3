import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/crypto/canonical-json.js';
import { StatementDecided, StatementDecidedV1 } from '../../src/events/audit.js';
import { CANONICAL_DECISION_FIELDS, CANONICAL_PLACEMENT_FIELDS, canonicalDecisionText, type DecisionMembers } from '../../src/events/canonical-decision.js';
import { placed } from '../support/decisions.js';
import { canonicalMetadataText, encodeEvent, EventMetadata } from '../../src/events/envelope.js';
import { exactValue, genericOutcome, outcome, recordsOf, reshaped } from '../support/canonical-records.js';

const FIELDS = Object.keys(StatementDecided.schema.shape);
const V1_FIELDS = Object.keys(StatementDecidedV1.schema.shape);
/** Objects of v2's fields, or of v1's (stores hold both). */
const payload = fc.oneof(recordsOf(FIELDS), recordsOf(V1_FIELDS));
const specialized = (record: Record<string, unknown>) => outcome(() => canonicalDecisionText(record as DecisionMembers));

/** Text a payload may carry: any code unit but NUL and lone surrogates, which the schema refuses. */
const text = (maxLength: number) => fc.string({ unit: 'grapheme', maxLength }).map((s) => s.replaceAll('\u0000', ''));
const count = fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }).map(String);
const names = fc.array(fc.constantFrom('orders', 'public.customers', 'x'), { maxLength: 3 });
const id = (prefix: string) => fc.stringMatching(/^[a-z0-9]{20,40}$/).map((s) => `${prefix}${s}`);

/** Payloads the schema accepts, with their values varied where the schema lets them vary. */
const decision = fc
  .record({
    event: fc.constantFrom('query', 'blocked', 'masked', 'truncated', 'migration_flagged'),
    credential_id: fc.option(id('agt_'), { nil: null }),
    source: fc.constantFrom('wire', 'mcp'),
    ts: fc.date({ min: new Date('2000-01-01T00:00:00.000Z'), max: new Date('2099-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString()),
    sql: text(200),
    normalized_sql: text(200),
    reason: text(50),
    cache_status: fc.constantFrom('hit', 'stale', 'miss', 'bypass', 'none'),
    rows_returned: count,
    bytes_out: count,
    latency_us: fc.option(fc.nat(), { nil: null }),
    tables_read: names,
    tables_written: names,
    tables_blocked: names,
    parsed: fc.boolean(),
    boot_epoch: fc.nat(),
    seq: count,
  })
  .map((values) =>
    StatementDecidedV1.schema.parse({
      project_id: 'prj_01j9zq8x4m7k2n5p6r3s8t0v1w',
      session_id: 'px1:42',
      region: 'eu-west-1',
      client_ip: '203.0.113.9',
      query_hash: 'c0ffee00c0ffee00',
      statement_kind: 'select',
      decision_rule: '',
      proxy_id: 'px-1',
      approval_id: null,
      ...values,
    }),
  );

describe('canonical JSON of a StatementDecided payload', () => {
  it('writes every field of the payload, in JCS key order', () => {
    expect([...CANONICAL_DECISION_FIELDS]).toEqual([...V1_FIELDS].sort());
    expect([...CANONICAL_DECISION_FIELDS, ...CANONICAL_PLACEMENT_FIELDS].sort()).toEqual([...FIELDS].sort());
  });

  it('is byte-identical to the generic canonical JSON for v1 payloads the schema accepts', () => {
    fc.assert(
      fc.property(decision, (parsed) => {
        expect(canonicalDecisionText(parsed)).toBe(canonicalize(parsed));
        expect(Buffer.from(encodeEvent(StatementDecidedV1, parsed, { event_id: '0195509a-3c00-7000-8000-000000000001', correlation_id: 'c', actor: 'a', at: parsed.ts }).data).toString('utf8')).toBe(canonicalize(parsed));
      }),
      { numRuns: 300 },
    );
  });

  it('is byte-identical to the generic canonical JSON for v2 payloads the schema accepts', () => {
    fc.assert(
      fc.property(decision.map((d) => StatementDecided.schema.parse(placed(d))), (parsed) => {
        expect(canonicalDecisionText(parsed)).toBe(canonicalize(parsed));
        expect(Buffer.from(encodeEvent(StatementDecided, parsed, { event_id: '0195509a-3c00-7000-8000-000000000001', correlation_id: 'c', actor: 'a', at: parsed.ts }).data).toString('utf8')).toBe(canonicalize(parsed));
      }),
      { numRuns: 500 },
    );
  });

  it('is byte-identical to the generic canonical JSON for objects of its fields with any values and key order', () => {
    fc.assert(
      fc.property(payload, (record) => {
        expect(specialized(record)).toEqual(genericOutcome(record));
      }),
      { numRuns: 2_000 },
    );
  });

  it('is byte-identical to the generic canonical JSON for objects of its fields whose every value JSON.stringify writes as canonicalize does', () => {
    fc.assert(
      fc.property(fc.oneof(recordsOf(FIELDS, [], undefined, exactValue), recordsOf(V1_FIELDS, [], undefined, exactValue)), (record) => {
        expect(specialized(record)).toEqual(genericOutcome(record));
      }),
      { numRuns: 2_000 },
    );
  });

  it('writes an array with a toJSON as canonicalize does, not as JSON.stringify would', () => {
    const tables = Object.assign(['b', 'a'], { toJSON: () => 'not the array' });
    const record = Object.fromEntries(V1_FIELDS.map((key) => [key, key === 'tables_read' ? tables : 'x']));
    expect(specialized(record)).toEqual(genericOutcome(record));
    expect(specialized(record)).toContain('"tables_read":["b","a"]');
  });

  it('leaves out placement a v1 payload inherits from its prototype, as canonicalize does', () => {
    const record = Object.assign(Object.create({ ran_on: 'replica', replica_id: 'r1', upstream_region: 'eu' }) as object, Object.fromEntries(V1_FIELDS.map((key) => [key, 'x'])));
    expect(specialized(record)).toEqual(genericOutcome(record));
    expect(specialized(record)).not.toContain('ran_on');
  });

  it('is byte-identical to the generic canonical JSON for objects of another shape', () => {
    fc.assert(
      fc.property(fc.oneof(reshaped(recordsOf(FIELDS), FIELDS), reshaped(recordsOf(V1_FIELDS), V1_FIELDS)), (record) => {
        expect(specialized(record)).toEqual(genericOutcome(record));
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('canonical JSON of event metadata', () => {
  it('is byte-identical to the generic canonical JSON for any metadata the schema accepts', () => {
    const metadata = fc.record({
      event_id: fc.uuid(),
      correlation_id: fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }),
      actor: fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }),
      at: fc.date({ min: new Date('2000-01-01T00:00:00.000Z'), max: new Date('2099-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString()),
    });
    fc.assert(
      fc.property(metadata, (meta) => {
        const parsed = EventMetadata.parse(meta);
        expect(canonicalMetadataText(parsed)).toBe(canonicalize(parsed));
      }),
      { numRuns: 1_000 },
    );
  });
});
