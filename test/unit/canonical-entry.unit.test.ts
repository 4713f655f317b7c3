import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CANONICAL_ENTRY_FIELDS, canonicalEntryText, type CanonicalEntryInput } from '../../src/audit/canonical-entry.js';
import { AuditLogEntry } from '../../src/audit/entry.js';
import { canonicalize } from '../../src/crypto/canonical-json.js';

const FIELDS = Object.keys(AuditLogEntry.shape).filter((key) => key !== 'prev_hash' && key !== 'entry_hash');

/** Any UTF-16 code unit, weighted towards those JSON escapes or that sit at the edges of its ranges. */
const codeUnit = fc.oneof(fc.nat(0xffff).map((code) => String.fromCharCode(code)), fc.constantFrom('"', '\\', '/', '\u0000', '\u001f', ' ', '\u007f', '\u2028', '\ud800', '\udbff', '\udc00', '\udfff', 'a', '\u00e9'));
const anyText = fc.string({ unit: codeUnit, maxLength: 40 });
const text = fc.oneof(anyText, fc.string({ unit: 'grapheme' }), fc.constantFrom('', '"', '\\', '\u2028', '\ud83d\ude00', '\ud800', 'select * from "t" where a = \'\\n\''));
const number = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 2 ** 53 - 1, -(2 ** 53), 1e21, 1e-7, 333333333.3333333, Number.MAX_VALUE, Number.MIN_VALUE),
);
const scalar = fc.oneof(text, number, fc.boolean(), fc.constant(null));
const value = fc.oneof({ weight: 4, arbitrary: scalar }, { weight: 1, arbitrary: fc.array(text, { maxLength: 4 }) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });

/** Entries of the fixed shape, any field value, any key insertion order, with or without their hashes. */
const entry = fc
  .record({
    values: fc.tuple(...FIELDS.map(() => value)),
    hashes: fc.subarray(['prev_hash', 'entry_hash']),
    order: fc.shuffledSubarray([...FIELDS, 'prev_hash', 'entry_hash'], { minLength: FIELDS.length + 2 }),
  })
  .map(({ values, hashes, order }) => {
    const fields = new Map<string, unknown>(FIELDS.map((key, i) => [key, values[i]]));
    for (const key of hashes) fields.set(key, 'ab'.repeat(32));
    return Object.fromEntries(order.filter((key) => fields.has(key)).map((key) => [key, fields.get(key)]));
  });

/** What the generic path gives, or the error it throws. */
function generic(record: Record<string, unknown>): string | Error {
  const { prev_hash: _prev, entry_hash: _hash, ...content } = record;
  try {
    return canonicalize(content);
  } catch (error) {
    return error as Error;
  }
}

function specialized(record: Record<string, unknown>): string | Error {
  try {
    return canonicalEntryText(record as CanonicalEntryInput);
  } catch (error) {
    return error as Error;
  }
}

describe('canonical JSON of an audit entry', () => {
  it('writes every field of the entry but its hashes, in JCS key order', () => {
    expect([...CANONICAL_ENTRY_FIELDS]).toEqual([...FIELDS].sort());
  });

  it('is byte-identical to the generic canonical JSON for entries of any field values and key order', () => {
    fc.assert(
      fc.property(entry, (record) => {
        expect(specialized(record)).toEqual(generic(record));
      }),
      { numRuns: 2_000 },
    );
  });

  it('is byte-identical to the generic canonical JSON for objects of another shape', () => {
    const reshaped = fc.tuple(entry, fc.constantFrom('drop', 'undefined', 'extra', 'swap'), fc.constantFrom(...FIELDS), fc.constantFrom('extra', 'zzz', '', 'AAA', 'sql2'), value).map(([record, how, field, other, extra]) => {
      const copy: Record<string, unknown> = { ...record };
      if (how === 'drop' || how === 'swap') delete copy[field];
      if (how === 'undefined') copy[field] = undefined;
      if (how === 'extra' || how === 'swap') copy[other] = extra;
      return copy;
    });
    fc.assert(
      fc.property(reshaped, (record) => {
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
