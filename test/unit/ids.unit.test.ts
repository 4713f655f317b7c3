/**
 * Ids of 26 base32 characters (src/ids.ts): the derived ones (an audit entry's, an anomaly's) are
 * part of what the chain hashes and what a replay reproduces, so they stay what earlier versions
 * derived; every id is the prefix and one character of the low 5 bits of each of 26 bytes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anomalyId } from '../../src/anomalies/detect.js';
import { auditEntryId } from '../../src/audit/entry.js';
import { base32Id, newId } from '../../src/ids.js';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const plainly = (prefix: string, bytes: readonly number[]): string => prefix + bytes.slice(0, 26).map((byte) => ALPHABET[byte & 31]).join('');

describe('ids', () => {
  it('derive what earlier versions derived (the audit entry id is hashed into its entry)', () => {
    expect(auditEntryId('prj_mkmm7qq5m7ghbviys7adjq6tef', 1)).toBe('aud_duva45ecvaqf475m7bq2a7ilop');
    expect(auditEntryId('prj_mkmm7qq5m7ghbviys7adjq6tef', Number.MAX_SAFE_INTEGER)).toBe('aud_pllvuqs7a67t6yflo7lhdxsjb2');
    expect(auditEntryId('prj_é', 42)).toBe('aud_jqfexj42anqty7okmvyvmwkqjy');
    expect(anomalyId('prj_a', 'agt_b', 'volume_spike', '2026-03-05T09:00:00.000Z')).toBe('ano_xnxjdenaftexxajvmsoxe7o42z');
  });

  it('are the prefix and the low 5 bits of each of the first 26 bytes, given as bytes or as a latin1 string', () => {
    fc.assert(
      fc.property(fc.constantFrom('aud_', 'ano_', 'agt_', 'x_'), fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 26, maxLength: 40 }), (prefix, bytes) => {
        const expected = plainly(prefix, bytes);
        expect(base32Id(prefix, Uint8Array.from(bytes))).toBe(expected);
        expect(base32Id(prefix, String.fromCharCode(...bytes))).toBe(expected);
      }),
    );
  });

  it('refuse fewer than 26 bytes and a prefix that is not short visible ASCII (a space included), rather than write a short or wrong id', () => {
    expect(() => base32Id('aud_', new Uint8Array(25))).toThrow(RangeError);
    expect(() => base32Id('aud_', 'x'.repeat(25))).toThrow(RangeError);
    expect(() => base32Id('é_€', new Uint8Array(26))).toThrow(RangeError);
    expect(() => base32Id('a b_', new Uint8Array(26))).toThrow(RangeError);
    expect(() => base32Id('p'.repeat(39), new Uint8Array(26))).toThrow(RangeError);
    expect(base32Id('p'.repeat(38), new Uint8Array(26))).toBe(`${'p'.repeat(38)}${'a'.repeat(26)}`);
  });

  it('new ones are random, of the prefix and the alphabet', () => {
    const ids = Array.from({ length: 200 }, () => newId('agt_'));
    for (const id of ids) expect(id).toMatch(/^agt_[a-z2-7]{26}$/);
    expect(new Set(ids).size).toBe(200);
  });
});
