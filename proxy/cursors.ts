/**
 * FETCH and MOVE of a cursor under a row cap (the simple protocol; psycopg2's named cursors, say).
 * The cursor's rows are counted across statements (portal-rows.ts): each FETCH FORWARD n or MOVE
 * FORWARD n is rewritten, through the parse tree, to ask for no more than the cursor has left, so
 * no row past the cap is ever delivered; FETCH ALL asks for the remainder. A FETCH once the cap is
 * reached is answered with no rows and the cap's NOTICE: the server is asked for one row, which is
 * withheld, for the RowDescription a driver needs (FETCH FORWARD 0 would need a SCROLL cursor).
 * Other directions are refused by the policy engine (result-rows.ts `uncappable`).
 */
import { deparseSync } from 'pgsql-deparser';
import { nodeType } from './policy/ast.js';
import { parseOne } from './policy/parser.js';
import { FETCH_ALL, resultRows, type ResultRows } from './policy/result-rows.js';
import { encodeCommandComplete } from './protocol/backend.js';
import type { Rewrite, Statement } from './pipeline.js';
import { capNotice } from './row-cap.js';

type Fetch = Extract<ResultRows, { kind: 'fetch' }>;

/**
 * What to send for a FETCH or MOVE (undefined: as sent), how to rewrite its replies, and how many
 * rows of the cursor it asks for; or why it is refused (its rewrite did not parse back into itself).
 */
export type CursorRead = { readonly sql: string | undefined; readonly rewrite: Rewrite | undefined; readonly takes: number } | { readonly refused: string };

/** A FETCH or MOVE that reads forward from a cursor with `left` of its `cap` rows left. */
export function cappedCursorRead(read: Fetch, left: number, cap: number, statement: Statement): CursorRead {
  // Past the cap the server's cursor may stand on a row withheld from the client: nothing more is read, FETCH 0 included.
  if (left === 0) return within(forwardText(read, 1), (sql) => ({ sql, rewrite: pastCap(statement, cap, read.move ? 'MOVE' : 'FETCH'), takes: 0 }));
  const wanted = read.count >= FETCH_ALL ? Number.POSITIVE_INFINITY : read.count;
  // FETCH 0 gives the current row again: one the cursor already passed, within the cap.
  if (wanted === 0) return { sql: undefined, rewrite: undefined, takes: 0 };
  const asked = Math.min(wanted, left);
  // A MOVE cut short says so only once the cursor has nothing left to give (its tag is the server's own).
  return within(forwardText(read, asked), (sql) => ({ sql, rewrite: asked < wanted && !read.move ? cutAtCap(statement, cap, asked) : undefined, takes: asked }));
}

function within(sql: string | undefined, read: (sql: string) => CursorRead): CursorRead {
  return sql === undefined ? { refused: 'the gateway could not bound this cursor read to the rows the cap leaves (rule max_rows.uncapped); read the cursor with FETCH FORWARD n' } : read(sql);
}

/** `FETCH|MOVE FORWARD n FROM cursor` deparsed from a parse tree; undefined unless it parses back into exactly that. */
function forwardText(read: Fetch, count: number): string | undefined {
  const sql = deparseSync({ FetchStmt: { direction: 'FETCH_FORWARD', howMany: count, portalname: read.cursor, ismove: read.move } } as Parameters<typeof deparseSync>[0], { pretty: false });
  const back = parseOne(sql);
  const again = back ? resultRows(back, nodeType(back) === 'FetchStmt' ? 'fetch' : '') : undefined;
  const same = again?.kind === 'fetch' && again.forward && again.count === count && again.cursor === read.cursor && again.move === read.move;
  return same ? sql : undefined;
}

/** The FETCH asked for fewer rows than wanted: when it got them all, the cap cut it (NOTICE, truncated). */
function cutAtCap(statement: Statement, cap: number, asked: number): Rewrite {
  let rows = 0;
  return (message) => {
    if (message.kind === 'Run' && message.type === 'D') rows += message.count;
    if (message.type !== 'C' || rows < asked) return undefined;
    statement.truncated = true;
    return Buffer.concat([capNotice(cap), encodeCommandComplete(`FETCH ${rows}`)]);
  };
}

/** The cursor gave all the cap allows: the row read is withheld (a driver still gets the RowDescription), then the NOTICE and a count of 0. */
function pastCap(statement: Statement, cap: number, verb: string): Rewrite {
  return (message) => {
    if (message.kind === 'Run' && message.type === 'D') return null;
    if (message.type !== 'C') return undefined;
    statement.truncated = true;
    return Buffer.concat([capNotice(cap), encodeCommandComplete(`${verb} 0`)]);
  };
}
