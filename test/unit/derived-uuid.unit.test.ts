import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { derivedUuid } from '../../src/crypto/derived-uuid.js';
import { eventIdFor } from '../../src/ingest/ingest.js';

describe('derived event ids', () => {
  it('stay what earlier versions derived, so a record redelivered across an upgrade is still appended once', () => {
    expect(eventIdFor('decision:px-1:1:42')).toBe('6c21f0c3-afb0-46b9-866f-d44cbdde0a8e');
  });

  it('are the UUID layout of the SHA-256 of the key, for any key', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (key) => {
        const hex = createHash('sha256').update(key).digest('hex');
        expect(derivedUuid(key)).toBe(`${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`);
      }),
    );
  });
});
