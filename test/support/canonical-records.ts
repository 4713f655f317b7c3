/** Arbitraries for comparing a fixed-order canonical JSON encoder with the generic `canonicalize`. */
import fc from 'fast-check';
import { canonicalize } from '../../src/crypto/canonical-json.js';

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
export const anyValue = fc.oneof({ weight: 4, arbitrary: scalar }, { weight: 1, arbitrary: fc.array(text, { maxLength: 4 }) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });
/** Values JSON.stringify writes as canonicalize does (scalars, and arrays of them): records of only these take an encoder's fast path. */
export const exactValue = fc.oneof({ weight: 4, arbitrary: scalar }, { weight: 1, arbitrary: fc.array(scalar, { maxLength: 4 }) });

/** Records of `fields`, member values of `value` (any), any key insertion order, with any of `optional` (set to `optionalValue`). */
export function recordsOf(fields: readonly string[], optional: readonly string[] = [], optionalValue: unknown = 'ab'.repeat(32), value: fc.Arbitrary<unknown> = anyValue): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .record({
      values: fc.tuple(...fields.map(() => value)),
      present: fc.subarray([...optional]),
      order: fc.shuffledSubarray([...fields, ...optional], { minLength: fields.length + optional.length }),
    })
    .map(({ values, present, order }) => {
      const members = new Map<string, unknown>(fields.map((key, i) => [key, values[i]]));
      for (const key of present) members.set(key, optionalValue);
      return Object.fromEntries(order.filter((key) => members.has(key)).map((key) => [key, members.get(key)]));
    });
}

/** `records` reshaped: a field dropped, made undefined, swapped for another key, or an extra key added. */
export function reshaped(records: fc.Arbitrary<Record<string, unknown>>, fields: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  return fc.tuple(records, fc.constantFrom('drop', 'undefined', 'extra', 'swap'), fc.constantFrom(...fields), fc.constantFrom('extra', 'zzz', '', 'AAA', 'sql2'), anyValue).map(([record, how, field, other, extra]) => {
    const copy: Record<string, unknown> = { ...record };
    if (how === 'drop' || how === 'swap') delete copy[field];
    if (how === 'undefined') copy[field] = undefined;
    if (how === 'extra' || how === 'swap') copy[other] = extra;
    return copy;
  });
}

/** What `encode` gives, or the error it throws. */
export function outcome(encode: () => string): string | Error {
  try {
    return encode();
  } catch (error) {
    return error as Error;
  }
}

/** canonicalize of `record` without `left` (members an encoding leaves out), or the error it throws. */
export function genericOutcome(record: Record<string, unknown>, left: readonly string[] = []): string | Error {
  return outcome(() => canonicalize(Object.fromEntries(Object.entries(record).filter(([key]) => !left.includes(key)))));
}
