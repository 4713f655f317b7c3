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
  if (rest.length > 0 || !createdAt || !id || Number.isNaN(Date.parse(createdAt))) throw invalidToken();
  return { createdAt, id };
}
