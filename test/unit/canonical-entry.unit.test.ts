import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CANONICAL_ENTRY_FIELDS, CANONICAL_PLACEMENT_FIELDS, canonicalEntryText, type CanonicalEntryInput } from '../../src/audit/canonical-entry.js';
import { AuditLogEntry } from '../../src/audit/entry.js';
import { exactValue, genericOutcome, outcome, recordsOf, reshaped } from '../support/canonical-records.js';

const FIELDS = Object.keys(AuditLogEntry.shape).filter((key) => key !== 'prev_hash' && key !== 'entry_hash');

/** The fields of an entry without placement: a v1 decision's, or a gap marker's. */
const UNPLACED_FIELDS = FIELDS.filter((key) => !(CANONICAL_PLACEMENT_FIELDS as readonly string[]).includes(key));

const HASHES = ['prev_hash', 'entry_hash'];
const entry = fc.oneof(recordsOf(FIELDS, HASHES), recordsOf(UNPLACED_FIELDS, HASHES));

const generic = (record: Record<string, unknown>) => genericOutcome(record, HASHES);
const specialized = (record: Record<string, unknown>) => outcome(() => canonicalEntryText(record as CanonicalEntryInput));

describe('canonical JSON of an audit entry', () => {
  it('writes every field of the entry but its hashes, in JCS key order', () => {
    expect([...CANONICAL_ENTRY_FIELDS]).toEqual([...UNPLACED_FIELDS].sort());
    expect([...CANONICAL_ENTRY_FIELDS, ...CANONICAL_PLACEMENT_FIELDS].sort()).toEqual([...FIELDS].sort());
  });

  it('is byte-identical to the generic canonical JSON for entries of any field values and key order', () => {
    fc.assert(
      fc.property(entry, (record) => {
        expect(specialized(record)).toEqual(generic(record));
      }),
      { numRuns: 2_000 },
    );
  });

  it('is byte-identical to the generic canonical JSON for entries whose every value JSON.stringify writes as canonicalize does', () => {
    const exact = fc.oneof(recordsOf(FIELDS, HASHES, undefined, exactValue), recordsOf(UNPLACED_FIELDS, HASHES, undefined, exactValue));
    fc.assert(
      fc.property(exact, (record) => {
        expect(specialized(record)).toEqual(generic(record));
      }),
      { numRuns: 2_000 },
    );
  });

  it('writes an object member, and an array with a toJSON, as canonicalize does, not as JSON.stringify would', () => {
    const tables = Object.assign(['b', 'a'], { toJSON: () => 'not the array' });
    const withArray = Object.fromEntries(FIELDS.map((key) => [key, key === 'gap' ? null : key === 'tables_read' ? tables : 'x']));
    expect(specialized(withArray)).toEqual(generic(withArray));
    expect(specialized(withArray)).toContain('"tables_read":["b","a"]');
    const withObject = Object.fromEntries(FIELDS.map((key) => [key, key === 'gap' ? { to: 2, from: 1 } : 'x']));
    expect(specialized(withObject)).toEqual(generic(withObject));
    expect(specialized(withObject)).toContain('"gap":{"from":1,"to":2}');
  });

  it('leaves out placement an entry without it inherits from its prototype, as canonicalize does', () => {
    const record = Object.assign(Object.create({ ran_on: 'replica', replica_id: 'r1', upstream_region: 'eu' }) as object, Object.fromEntries(UNPLACED_FIELDS.map((key) => [key, 'x'])));
    expect(specialized(record)).toEqual(generic(record));
    expect(specialized(record)).not.toContain('ran_on');
  });

  it('is byte-identical to the generic canonical JSON for objects of another shape', () => {
    fc.assert(
      fc.property(fc.oneof(reshaped(recordsOf(FIELDS, HASHES), FIELDS), reshaped(recordsOf(UNPLACED_FIELDS, HASHES), UNPLACED_FIELDS)), (record) => {
        expect(specialized(record)).toEqual(generic(record));
      }),
      { numRuns: 1_000 },
    );
  });

  it('refuses a non-finite number as the generic path does', () => {
    const record = Object.fromEntries(FIELDS.map((key) => [key, key === 'latency_ms' ? Number.POSITIVE_INFINITY : '']));
    expect(specialized(record)).toEqual(new TypeError('canonical JSON cannot carry Infinity'));
  });
});
