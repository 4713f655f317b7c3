/**
 * The policy's max_rows on the wire: the server is asked for no more rows than the cap allows (the
 * Execute row limit), and where it stops early the client sees a NOTICE and a normal completion
 * for the rows it got instead of a suspended portal.
 */
import { serialize } from 'pg-protocol';
import { encodeCommandComplete, encodeNoticeResponse } from './protocol/backend.js';
import type { Rewrite, Statement } from './pipeline.js';

/** Statement kinds whose results a cap limits on the simple protocol, where they run as an extended turn. */
export const ROW_KINDS: ReadonlySet<string> = new Set(['select', 'with', 'values', 'table']);

/** Replies an extended turn adds that a simple query never shows: ParseComplete, BindComplete, NoData. */
const EXTENDED_ONLY: ReadonlySet<string> = new Set(['1', '2', 'n']);

/** A simple query as one extended-protocol turn (unnamed statement and portal, text results) that returns at most `rows` rows. */
export function cappedQuery(sql: string, rows: number): Buffer {
  return Buffer.concat([serialize.parse({ text: sql }), serialize.bind({}), serialize.describe({ type: 'P' }), serialize.execute({ rows }), serialize.sync()]);
}

export function capNotice(cap: number): Buffer {
  return encodeNoticeResponse({
    severity: 'NOTICE',
    code: '01000',
    message: `pgward: the result was cut at ${cap} rows by this credential’s policy (max_rows); aggregate or filter to see what lies beyond`,
  });
}

/**
 * Rewrites the replies to one capped Execute (or capped simple query): counts its rows and, when
 * the server suspends the portal because the cap is reached, marks the statement truncated and
 * answers with the cap's NOTICE and a CommandComplete. A suspension below the cap is the client's
 * own fetch size and passes through. `before` is what the portal already delivered.
 */
export function capRewrite(statement: Statement, cap: number, before: number, options: { readonly simple: boolean; readonly onRows?: (total: number) => void }): Rewrite {
  let rows = 0;
  return (message) => {
    if (message.kind === 'Run' && message.type === 'D') {
      rows += message.count;
      return undefined;
    }
    if (options.simple && EXTENDED_ONLY.has(message.type)) return null;
    if (message.type !== 's') return undefined;
    const total = before + rows;
    options.onRows?.(total);
    if (total < cap) return undefined;
    statement.truncated = true;
    return Buffer.concat([capNotice(cap), encodeCommandComplete(`SELECT ${rows}`)]);
  };
}
