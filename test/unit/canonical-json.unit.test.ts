import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/crypto/canonical-json.js';

/** Any UTF-16 code unit, weighted towards those JSON escapes or that sit at the edges of its ranges. */
const codeUnit = fc.oneof(fc.nat(0xffff).map((code) => String.fromCharCode(code)), fc.constantFrom('"', '\\', '/', '\u0000', '\u001f', ' ', '\u007f', '\u2028', '\ud800', '\udbff', '\udc00', '\udfff', 'a', '\u00e9'));

describe('RFC 8785 canonical JSON', () => {
  it('sorts keys by UTF-16 code units and escapes strings as JCS specifies (RFC 8785 §3.2.3 example)', () => {
    const input = { '\u20ac': 'Euro Sign', '\r': 'Carriage Return', '\ufb33': 'Hebrew Letter Dalet With Dagesh', '1': 'One', '\ud83d\ude00': 'Emoji: Grinning Face', '\u0080': 'Control', '\u00f6': 'Latin Small Letter O With Diaeresis' };
    expect(canonicalize(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('serializes numbers the ECMAScript way and literals as-is (RFC 8785 §3.2.2 example)', () => {
    // The RFC's own input literal; that it rounds when parsed is what the example shows.
    // eslint-disable-next-line no-loss-of-precision
    expect(canonicalize({ numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001], string: '\u20ac$\u000f\u000aA\'\u0042\u0022\u005c\\"/', literals: [null, true, false] })).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('omits undefined properties and refuses what JSON cannot carry', () => {
    expect(canonicalize({ b: undefined, a: 1 })).toBe('{"a":1}');
    expect(() => canonicalize({ a: Number.NaN })).toThrow('cannot carry');
    expect(() => canonicalize({ a: 1n })).toThrow('cannot carry a bigint');
    expect(() => canonicalize([() => 1])).toThrow('cannot carry a function');
  });

  it('writes every string as JSON.stringify does, whichever UTF-16 code units it holds', () => {
    fc.assert(
      fc.property(fc.string({ unit: codeUnit }), (text) => {
        expect(canonicalize(text)).toBe(JSON.stringify(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('is independent of key insertion order and parses back to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalize(value);
        const reordered = JSON.parse(JSON.stringify(value, (_k, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v)));
        expect(canonicalize(reordered)).toBe(text);
        expect(canonicalize(JSON.parse(text))).toBe(text);
      }),
    );
  });
});
