import { z } from 'zod';
import type { TimeCursor } from '../../queries/cursor.js';
import { Problem } from './problem.js';

const invalidToken = () =>
  new Problem('INVALID_INPUT', 'page_token is not a token this API issued; start again without it', { errors: [{ field: 'page_token', message: 'is not a valid page token' }] });

export const PageQuery = z.object({
  page_size: z.coerce.number().int().min(1).max(100).default(20).describe('Items per page, 1-100'),
  page_token: z
    .string()
    .regex(/^[a-zA-Z0-9_.-]*$/)
    .max(512)
    .optional()
    .describe('Opaque token from the previous page’s next_page_token'),
});
export type PageQuery = z.infer<typeof PageQuery>;

/** Page tokens carry the sort key of the last item served; opaque to clients. */
export function encodePageToken(lastKey: string): string {
  return Buffer.from(JSON.stringify({ k: lastKey }), 'utf8').toString('base64url');
}

export function decodePageToken(token: string | undefined): string | undefined {
  if (!token) return undefined;
  try {
    const parsed = z.object({ k: z.string() }).parse(JSON.parse(Buffer.from(token, 'base64url').toString('utf8')));
    return parsed.k;
  } catch {
    throw invalidToken();
  }
}

/** Fetch `size + 1` rows to learn whether another page exists; returns the page and the next token ('' at the end). */
export function paginate<T>(rows: T[], size: number, keyOf: (row: T) => string): { items: T[]; next_page_token: string } {
  const items = rows.slice(0, size);
  const more = rows.length > size;
  return { items, next_page_token: more && items.length > 0 ? encodePageToken(keyOf(items[items.length - 1]!)) : '' };
}

export function timeCursorKey(createdAt: string, id: string): string {
  return `${createdAt} ${id}`;
}

/** The cursor a newest-first list's page token carries, refused with 400 INVALID_INPUT when it is not one. */
export function decodeTimeCursor(token: string | undefined): TimeCursor | undefined {
  const key = decodePageToken(token);
  if (key === undefined) return undefined;
  const [createdAt, id, ...rest] = key.split(' ');
  if (rest.length > 0 || !createdAt || !id || !isIssuedTime(createdAt)) throw invalidToken();
  return { createdAt, id };
}

/**
 * Whether `text` is a time as the API writes one (Date#toISOString). Date.parse alone also reads
 * `1`, `Jan` or `2026-02-30`, which PostgreSQL refuses: a forged token would be a 500.
 */
export function isIssuedTime(text: string): boolean {
  const time = Date.parse(text);
  return /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/.test(text) && !Number.isNaN(time) && new Date(time).toISOString() === text;
}

/** The event or row position a page token carries (a bigint, as text); 400 INVALID_INPUT when it is not one. */
export function decodePositionCursor(token: string | undefined): string | undefined {
  const key = decodePageToken(token);
  // 18 digits stay below bigint's maximum, so PostgreSQL never refuses the cast.
  if (key !== undefined && !/^[0-9]{1,18}$/.test(key)) throw invalidToken();
  return key;
}
