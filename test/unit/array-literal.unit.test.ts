import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../src/pg/array-literal.js';

const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue: (value: unknown) => unknown };

describe('PostgreSQL array literals', () => {
  it('are the text node-postgres sends for an array of scalars', () => {
    const scalar = fc.oneof(fc.string({ unit: 'grapheme' }), fc.constantFrom('', '"', '\\', '\\"', 'NULL', '{a,b}', ' x ', '\\\\x00'), fc.integer(), fc.double({ noNaN: true }), fc.boolean(), fc.constant(null));
    fc.assert(
      fc.property(fc.array(scalar, { maxLength: 20 }), (values) => {
        expect(arrayLiteral(values)).toBe(prepareValue(values));
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses objects, which node-postgres would write as JSON', () => {
    expect(() => arrayLiteral([{ a: 1 }])).toThrow(TypeError);
  });
});
