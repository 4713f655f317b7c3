/**
 * What each statement of a message does with rows, as a policy's row cap (max_rows) sees it:
 * which results an Execute row limit bounds, which cannot be bounded, and which statements open,
 * move or close a cursor whose rows the gateway counts across statements.
 */
import { nodeType, type Node } from './ast.js';

/** libpg_query's FETCH ALL (LONG_MAX of its 32-bit build); a count this large reads to the end. */
export const FETCH_ALL = 2_147_483_647;

export type ResultRows =
  /** No rows of table data (SET, SHOW, EXPLAIN's plan, transaction control, ...). */
  | { readonly kind: 'none' }
  /** Rows an Execute row limit bounds: run as an extended-protocol Execute, the cap holds. */
  | { readonly kind: 'rows' }
  | { readonly kind: 'copy'; readonly out: boolean }
  | { readonly kind: 'declare'; readonly cursor: string }
  /** ROLLBACK TO SAVEPOINT: portals made after the savepoint go, and those a failed Bind or DECLARE left in place live again. */
  | { readonly kind: 'rollback_to' }
  /** CLOSE of one cursor, or of all (`cursor` null). */
  | { readonly kind: 'close'; readonly cursor: string | null }
  /** FETCH or MOVE; `forward` when it only reads ahead (FORWARD n with n >= 0, NEXT, ALL), which the cap can bound. */
  | { readonly kind: 'fetch'; readonly cursor: string; readonly move: boolean; readonly forward: boolean; readonly count: number };

/** Kinds that return no rows, or one row of no table's data (SHOW, EXPLAIN's plan). */
const ROWLESS_KINDS: ReadonlySet<string> = new Set(['transaction', 'set', 'show', 'explain', 'lock', 'truncate', 'ddl', 'listen', 'unlisten', 'notify', 'prepare', 'deallocate', 'discard']);

export function resultRows(stmt: Node, kind: string): ResultRows {
  const type = nodeType(stmt);
  const fields = (stmt[type] ?? {}) as Record<string, unknown>;
  const name = typeof fields.portalname === 'string' ? fields.portalname : '';
  switch (type) {
    case 'CopyStmt':
      return { kind: 'copy', out: fields.is_from !== true };
    case 'TransactionStmt':
      return fields.kind === 'TRANS_STMT_ROLLBACK_TO' ? { kind: 'rollback_to' } : { kind: 'none' };
    case 'DeclareCursorStmt':
      return { kind: 'declare', cursor: name };
    case 'ClosePortalStmt':
      return { kind: 'close', cursor: name === '' ? null : name };
    case 'FetchStmt': {
      // The parser omits a count of 0 (FETCH 0: the current row again).
      const count = typeof fields.howMany === 'number' ? fields.howMany : 0;
      return { kind: 'fetch', cursor: name, move: fields.ismove === true, forward: fields.direction === 'FETCH_FORWARD' && count >= 0, count };
    }
    case 'InsertStmt':
    case 'UpdateStmt':
    case 'DeleteStmt':
      return Array.isArray(fields.returningList) && fields.returningList.length > 0 ? { kind: 'rows' } : { kind: 'none' };
    default:
      return ROWLESS_KINDS.has(kind) ? { kind: 'none' } : { kind: 'rows' };
  }
}

/** Why a row cap cannot hold for a message, and what to send instead; null when it can. */
export interface Uncappable {
  readonly rule: 'max_rows.multi_statement' | 'max_rows.uncapped';
  /** Uncappable on the extended protocol only, or on both. */
  readonly on: 'extended' | 'always';
  readonly because: string;
  readonly instead: string;
}

/** What of a message's statements a row cap cannot bound (null when it bounds them all). */
export function uncappable(rows: readonly ResultRows[]): Uncappable | null {
  const several = rows.length > 1;
  for (const row of rows) {
    if (row.kind === 'copy' && several) {
      return { rule: 'max_rows.multi_statement', on: 'always', because: 'COPY cannot run together with other statements in one query string under the cap', instead: 'send COPY as a query of its own' };
    }
    if (row.kind === 'copy' && row.out) {
      return { rule: 'max_rows.uncapped', on: 'always', because: 'the gateway cannot cut COPY ... TO STDOUT', instead: 'read the rows with a SELECT (its result is cut at the cap) or aggregate them in SQL' };
    }
    if (row.kind !== 'fetch') continue;
    const verb = row.move ? 'MOVE' : 'FETCH';
    if (!row.forward) {
      return {
        rule: 'max_rows.uncapped',
        on: 'always',
        because: `the gateway counts a cursor's rows forward only, and cannot bound ${verb} BACKWARD, PRIOR, FIRST, LAST, ABSOLUTE, RELATIVE or a negative count`,
        instead: `read the cursor with ${verb} FORWARD n (or NEXT); the cursor yields at most the cap's rows in all`,
      };
    }
    if (several) {
      return { rule: 'max_rows.multi_statement', on: 'always', because: `${verb} must be counted against the cursor's rows on its own`, instead: `send each ${verb} as a query of its own` };
    }
    return {
      rule: 'max_rows.uncapped',
      on: 'extended',
      because: `the gateway counts a cursor's rows only when ${verb} is sent as a simple query`,
      instead: `send ${verb} FORWARD n as a simple (unparameterized) query, or Execute the cursor's portal with a row limit`,
    };
  }
  return null;
}
