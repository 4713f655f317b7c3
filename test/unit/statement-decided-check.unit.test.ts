import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import { StatementDecided, StatementDecidedV1 } from '../../src/events/audit.js';
import { isStatementDecided, parseStatementDecided } from '../../src/events/statement-decided-check.js';
import { decision, decisionV1 } from '../support/decisions.js';
import { mutatedRecords } from '../support/mutations.js';

const FIELDS = Object.keys(StatementDecided.schema.shape);
const V1_FIELDS = Object.keys(StatementDecidedV1.schema.shape);

/** Values at the edges of the members' formats and bounds, and of other types. */
const EDGES: unknown[] = [
  '', 'a', 'A', ' ', 'prj_' + 'a'.repeat(19), 'prj_' + 'a'.repeat(20), 'prj_' + 'a'.repeat(40), 'prj_' + 'a'.repeat(41), 'prj_' + 'A'.repeat(20), 'agt_' + '0'.repeat(24),
  'apr_' + 'z'.repeat(26), 'px.1.7', 'x'.repeat(128), 'x'.repeat(129), 's p', '10.0.0.1', '255.255.255.255', '256.1.1.1', '01.2.3.4', '1.2.3', '::1', '::', '2001:db8::1',
  '::1\n', '::@1\\', 'g::1', '1::2::3', '2026-01-01T00:00:00.000Z', '2024-02-29T23:59:59.999Z', '2026-02-29T00:00:00.000Z', '2026-02-30T00:00:00.000Z', '2026-01-01T00:00:00Z',
  '2026-01-01T00:00:00.0000Z', '2026-01-01T24:00:00.000Z', '2026-01-01 00:00:00.000Z', '2026-01-01T00:00:00.000+00:00', 'select', 'Select', 'a'.repeat(32), 'a'.repeat(33), 'a_b',
  'deny', 'rule:x.y-z', 'DENY', 'r'.repeat(128), 'r'.repeat(129), '0123456789abcdef', '0123456789abcde', 'f'.repeat(64), 'f'.repeat(65), '0123456789ABCDEF', '0', '00', '01', '-1',
  '1e3', ' 1', '9223372036854775807', '9223372036854775808', '9999999999999999999', '10000000000000000000', 'a\u0000b', '\ud800', 'x\udfff', '\ud83d\ude00', 'é', 'x'.repeat(255),
  'x'.repeat(256), 'x'.repeat(2000), 'x'.repeat(2001), 'x'.repeat(4096), 'x'.repeat(4097), 'eu-west-1', '-eu', 'bench-proxy', '_proxy', 'p'.repeat(64), 'p'.repeat(65), 'query',
  'masked', 'approval_requested', 'rejected', 'wire', 'mcp', 'rest', 'control', 'smtp', 'hit', 'none', 'warm', 'public.orders', 'true',
  'primary', 'replica', 'cache', 'relay', 'edge', 'rep_' + 'a'.repeat(20), 'rep_' + 'a'.repeat(19), 'local',
  0, -0, 1, -1, 1.5, 2 ** 31, 2 ** 53 - 1, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, 1e21, 1n,
  null, undefined, true, false, {}, [], ['public.orders'], [''], ['x'.repeat(255)], ['x'.repeat(256)], ['a\u0000'], ['\ud800'], [1], [null], new Array(1).fill(undefined),
  new Array(1_000).fill('t'), new Array(1_001).fill('t'),
];
/** A decision with up to three members replaced by edge values, deleted, or joined by an unknown member. */
const mutated = mutatedRecords(decision, FIELDS, EDGES);
const mutatedV1 = mutatedRecords(decisionV1, V1_FIELDS, EDGES);

function outcome(parse: () => unknown): unknown {
  try {
    return { value: parse() };
  } catch (error) {
    if (error instanceof ZodError) return { issues: error.issues };
    throw error;
  }
}

/** The schema of the version a record is: v2's when it has `ran_on`, else v1's (a proxy of an earlier release). */
const schemaOf = (value: unknown) => (typeof value === 'object' && value !== null && 'ran_on' in value ? StatementDecided.schema : StatementDecidedV1.schema);

function expectSameAsSchema(value: unknown): void {
  const schema = schemaOf(value);
  const parsed = schema.safeParse(value);
  expect(isStatementDecided(value)).toBe(parsed.success);
  if (parsed.success) expect(parsed.data).toEqual(value);
  expect(outcome(() => parseStatementDecided(value))).toEqual(outcome(() => schema.parse(value)));
}

describe('the hand-written StatementDecided check', () => {
  it('accepts every decision the schema accepts, and the schema gives it back unchanged', () => {
    fc.assert(
      fc.property(decision, (d) => {
        expect(StatementDecided.schema.safeParse(d).success).toBe(true);
        expect(isStatementDecided(d)).toBe(true);
        expect(parseStatementDecided(d)).toBe(d);
      }),
      { numRuns: 1_000 },
    );
  });

  it('accepts exactly what the schema accepts for decisions with edited, missing or unknown members', () => {
    fc.assert(fc.property(mutated, expectSameAsSchema), { numRuns: 5_000 });
  });

  it('accepts v1 records (a proxy of an earlier release) exactly as the v1 schema does, edited or not', () => {
    fc.assert(
      fc.property(decisionV1, (d) => {
        expect(isStatementDecided(d)).toBe(true);
        expect(parseStatementDecided(d)).toBe(d);
      }),
      { numRuns: 300 },
    );
    fc.assert(fc.property(mutatedV1, expectSameAsSchema), { numRuns: 3_000 });
  });

  it('accepts exactly what the schema accepts for any JSON value', () => {
    fc.assert(fc.property(fc.jsonValue(), expectSameAsSchema), { numRuns: 500 });
  });

  it('refuses each cross-member rule the schema refines, with the schema issues', () => {
    const base = fc.sample(decision.filter((d) => d.proxy_id !== null && d.event === 'query'), { numRuns: 1, seed: 7 })[0]!;
    const broken = [
      { ...base, seq: null },
      { ...base, proxy_id: null, boot_epoch: null, seq: null, source: 'wire' },
      { ...base, proxy_id: null, boot_epoch: null, seq: null, source: 'mcp' },
      { ...base, event: 'approved', approval_id: null },
      [base],
      null,
      'decision',
    ];
    for (const value of broken) {
      expect(isStatementDecided(value)).toBe(false);
      expectSameAsSchema(value);
    }
  });
});
