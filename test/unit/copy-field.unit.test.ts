import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { copyField } from '../../src/pg/copy-in.js';

const ESCAPED: Readonly<Record<string, string>> = { '\\': '\\', n: '\n', r: '\r', t: '\t' };

/** A field as COPY's text format reads it back (the escapes copyField writes, and \N for NULL). */
function readField(field: string): string | null {
  if (field === '\\N') return null;
  return field.replace(/\\(.)/g, (_, c: string) => ESCAPED[c] ?? c);
}

const text = fc.oneof(fc.string({ unit: 'grapheme' }), fc.string({ unit: fc.constantFrom('\\', '\n', '\r', '\t', 'N', '.', 'a', '"') }), fc.constantFrom('', '\\N', '\\.', 'NULL', '\\\\x00'));

describe('fields of COPY text format', () => {
  it('read back as String(value), with no raw separator, line break or lone backslash', () => {
    fc.assert(
      fc.property(fc.oneof(text, fc.integer(), fc.double({ noNaN: true }), fc.boolean()), (value) => {
        const field = copyField(value);
        expect(field).not.toMatch(/[\t\n\r]/);
        expect(readField(field)).toBe(String(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('write null as \\N, which no string is written as', () => {
    expect(copyField(null)).toBe('\\N');
    expect(copyField('\\N')).not.toBe('\\N');
  });
});
