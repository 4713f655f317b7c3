import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contiguous } from '../../proxy/socket-write.js';

/** `bytes` cut at the given points into views of it. */
function cut(bytes: Buffer, points: readonly number[]): Buffer[] {
  const sorted = [...new Set(points.map((point) => point % (bytes.length + 1)))].sort((a, b) => a - b);
  const bounds = [0, ...sorted.filter((point) => point > 0 && point < bytes.length), bytes.length];
  return bounds.slice(1).map((end, index) => bytes.subarray(bounds[index], end));
}

describe('contiguous', () => {
  it('makes one view of the same memory from views that follow each other, whatever the cuts', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.array(fc.nat(), { maxLength: 12 }), fc.nat(50), (content, points, offset) => {
        const backing = Buffer.alloc(offset + content.length + 7);
        backing.set(content, offset);
        const bytes = backing.subarray(offset, offset + content.length);
        const whole = contiguous(cut(bytes, points));
        expect(whole?.equals(bytes)).toBe(true);
        expect(whole?.buffer).toBe(backing.buffer);
        expect(whole?.byteOffset).toBe(bytes.byteOffset);
      }),
    );
  });

  it('refuses pieces with a gap, out of order, or from another buffer', () => {
    const bytes = Buffer.from('PBDES');
    expect(contiguous([bytes.subarray(0, 1), bytes.subarray(2, 5)])).toBeUndefined();
    expect(contiguous([bytes.subarray(1, 2), bytes.subarray(0, 1)])).toBeUndefined();
    expect(contiguous([bytes.subarray(0, 1), Buffer.from('BDES')])).toBeUndefined();
    expect(contiguous([])).toBeUndefined();
  });
});
