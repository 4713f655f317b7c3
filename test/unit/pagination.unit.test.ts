import { describe, expect, it } from 'vitest';
import { decodePositionCursor, decodeTimeCursor, encodePageToken, isIssuedTime, timeCursorKey } from '../../src/http/pagination.js';
import { Problem } from '../../src/http/problem.js';

const refused = (decode: () => unknown) => {
  try {
    decode();
  } catch (error) {
    return error instanceof Problem ? error.code : 'other';
  }
  return 'accepted';
};

describe('page tokens a client forged', () => {
  it('reads only times as the API writes them (toISOString), not what Date.parse also takes', () => {
    expect(isIssuedTime('2026-11-26T17:00:00.123Z')).toBe(true);
    for (const text of ['1', 'Jan', '2026-02-30T00:00:00.000Z', '+275760-09-13T00:00:00.000Z', '2026-11-26T17:00:00Z', '2026-11-26 17:00:00.000Z', '2026-11-26T17:00:00.000+00:00']) expect([text, isIssuedTime(text)]).toEqual([text, false]);
    expect(refused(() => decodeTimeCursor(encodePageToken(timeCursorKey('1', 'cmp_x'))))).toBe('INVALID_INPUT');
    expect(decodeTimeCursor(encodePageToken(timeCursorKey('2026-11-26T17:00:00.123Z', 'cmp_x')))).toEqual({ createdAt: '2026-11-26T17:00:00.123Z', id: 'cmp_x' });
  });

  it('reads a position of up to 18 digits (below bigint’s maximum), nothing else', () => {
    expect(decodePositionCursor(encodePageToken('123456789012345678'))).toBe('123456789012345678');
    expect(decodePositionCursor(undefined)).toBeUndefined();
    for (const key of ['9999999999999999999', '-1', '1e3', '', ' 1']) expect([key, refused(() => decodePositionCursor(encodePageToken(key)))]).toEqual([key, 'INVALID_INPUT']);
  });
});
