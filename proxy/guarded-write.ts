/**
 * A write under max_affected_rows or write_mode rollback on the wire. It runs as an extended-protocol
 * Execute followed by a Flush and nothing else, so its transaction (implicit, or the client's own)
 * is still open when its CommandComplete arrives: nothing commits before a Sync. Its command tag
 * decides: within the cap it stands; past the cap the client gets an error (54000) instead of the
 * tag; under rollback the client gets the tag and a NOTICE. In both of the latter the gateway then
 * fails the transaction upstream (a Parse that cannot succeed, its error hidden)
 * before the Sync, so the Sync rolls it back: an implicit transaction ends with nothing changed,
 * and a client's explicit transaction is failed, as any error fails it.
 */
import { serialize } from 'pg-protocol';
import { commandTag, encodeCommandComplete, encodeErrorResponse, encodeNoticeResponse } from './protocol/backend.js';
import type { Rewrite, Statement } from './pipeline.js';
import { guardBroken, ROLLED_BACK_NOTICE, ROLLED_BACK_RULE, taggedRows, type WriteGuard } from './policy/write-guard.js';

/**
 * Fails the transaction it is sent in, whatever the connection holds: a named Parse of text that
 * does not parse (a syntax error, or a duplicate name) creates nothing and touches no other statement.
 */
const FAIL_TRANSACTION = serialize.parse({ name: 'pgward_write_guard', text: 'pgward: roll back this write' });

/** What follows a guarded write's Execute: a Flush, so its replies come before any Sync. */
export const FLUSH = serialize.flush();

/** A simple query's one write as an extended-protocol Execute, its transaction left open (see above). */
export function guardedSimpleWrite(sql: string): Buffer {
  return Buffer.concat([serialize.parse({ text: sql }), serialize.bind({}), serialize.describe({ type: 'P' }), serialize.execute({ rows: 0 }), FLUSH]);
}

/** How a guarded simple query ends: the transaction failed when `undo`, the unnamed portal and statement closed, and the Sync. */
export function guardedSimpleEnd(undo: boolean): Buffer {
  const close = [serialize.close({ type: 'P', name: '' }), serialize.close({ type: 'S', name: '' }), serialize.sync()];
  return Buffer.concat(undo ? [FAIL_TRANSACTION, ...close] : close);
}

const PORTAL_SUSPENDED = Buffer.from([0x73, 0, 0, 0, 4]);

/** Replies an extended turn adds that a simple query never shows: ParseComplete, BindComplete, CloseComplete, NoData. */
const EXTENDED_ONLY: ReadonlySet<string> = new Set(['1', '2', '3', 'n']);

/** What the gateway must do once a guarded write's replies went by. */
export interface GuardedOutcome {
  /** Its transaction must be failed so that the Sync rolls it back. */
  undo: boolean;
  /** The client was answered with an error (the cap): the rest of an extended batch is skipped until Sync. */
  refused: boolean;
}

/**
 * The rewrite of a guarded write's replies: its CommandComplete stands, becomes the cap's error, or
 * gains the rollback NOTICE; `simple` hides what a simple query never shows.
 */
export function guardedReplies(statement: Statement, guard: WriteGuard, outcome: GuardedOutcome, options: { readonly simple: boolean }): Rewrite {
  return (message) => {
    if (options.simple && EXTENDED_ONLY.has(message.type)) return null;
    // A result suspended at the client's row limit has no tag yet: its rows cannot be counted.
    if (message.kind !== 'CommandComplete' && message.type !== 's') return undefined;
    const tag = message.kind === 'CommandComplete' ? commandTag(message) : undefined;
    const rows = tag === undefined ? undefined : taggedRows(tag);
    const exceeded = guardBroken(guard, rows);
    if (exceeded) {
      statement.verdict = { event: 'blocked', rule: exceeded.rule, reason: exceeded.reason, rows: rows ?? 0 };
      outcome.undo = true;
      outcome.refused = true;
      return encodeErrorResponse({ severity: 'ERROR', code: exceeded.sqlstate, message: exceeded.reason });
    }
    if (!guard.rollback) return undefined;
    statement.verdict = { event: statement.event, rule: ROLLED_BACK_RULE, reason: `${ROLLED_BACK_NOTICE}. ${statement.reason}`.trim(), rows: rows ?? 0 };
    outcome.undo = true;
    const notice = encodeNoticeResponse({ severity: 'NOTICE', code: '01000', message: ROLLED_BACK_NOTICE });
    return Buffer.concat([notice, tag === undefined ? PORTAL_SUSPENDED : encodeCommandComplete(tag)]);
  };
}

/**
 * The replies to a guarded simple query's end: when undone, only the ReadyForQuery (the failing
 * Parse's error is the gateway's own); else what a simple query shows, an error at commit included.
 */
export function simpleEndReplies(undo: boolean): Rewrite {
  return undo ? (message) => (message.type === 'Z' ? undefined : null) : (message) => (EXTENDED_ONLY.has(message.type) ? null : undefined);
}

/**
 * A client's Sync preceded by the failing Parse, as one request: the Parse's error (none when the
 * transaction had failed already, and the server skips it) is hidden, the ReadyForQuery passes.
 */
export function undoneSync(sync: Buffer): Buffer {
  return Buffer.concat([FAIL_TRANSACTION, sync]);
}

export const errorsHidden: Rewrite = (message) => (message.kind === 'ErrorResponse' ? null : undefined);

/** Resolves once the statement ended (or was lost), keeping what its `settled` already did. */
export function settledOf(statement: Statement): Promise<void> {
  return new Promise((resolve) => {
    const prior = statement.settled;
    statement.settled = (ok) => {
      prior?.(ok);
      resolve();
    };
  });
}
