/**
 * The policy's max_rows on the wire. The cap holds per statement result (per portal), whatever the
 * number of Executes and their row limits: the server is asked for no more rows than the portal has
 * left (portal-rows.ts), and where it stops because of the cap the client sees a NOTICE and a
 * normal completion for the rows it got instead of a suspended portal.
 *
 * A simple query has no row limit: under a cap, one that returns rows runs as one extended-protocol
 * pipeline (Parse, Bind, Describe, Execute with the cap for each statement, a single Sync: the
 * same implicit transaction and the same stop at the first error), with the replies a simple query
 * never shows hidden. FETCH and MOVE of a cursor are bounded by the rows the cursor has left (cursors.ts).
 */
import { serialize } from 'pg-protocol';
import { parseStatements } from './policy/parser.js';
import { resultRows, type ResultRows } from './policy/result-rows.js';
import { nodeType } from './policy/ast.js';
import { statementShape } from './policy/statements.js';
import { encodeCommandComplete, encodeNoticeResponse } from './protocol/backend.js';
import { encodeQuery } from './protocol/rename.js';
import { cappedCursorRead } from './cursors.js';
import type { PortalRows } from './portal-rows.js';
import type { Rewrite, Statement } from './pipeline.js';

/** Replies an extended turn adds that a simple query never shows: ParseComplete, BindComplete, CloseComplete, NoData. */
const EXTENDED_ONLY: ReadonlySet<string> = new Set(['1', '2', '3', 'n']);

/** What follows each statement's Parse in a capped pipeline (Bind, Describe, Execute of `rows`), by cap: a policy has one. */
const afterParse = new Map<number, Buffer>();
const AFTER_PARSE_CAPS = 64;
/** What ends every capped pipeline: the unnamed portal and statement closed, and the Sync. */
const PIPELINE_END = Buffer.concat([serialize.close({ type: 'P', name: '' }), serialize.close({ type: 'S', name: '' }), serialize.sync()]);

function afterParseOf(rows: number): Buffer {
  let known = afterParse.get(rows);
  if (!known) {
    known = Buffer.concat([serialize.bind({}), serialize.describe({ type: 'P' }), serialize.execute({ rows })]);
    if (afterParse.size >= AFTER_PARSE_CAPS) afterParse.clear();
    afterParse.set(rows, known);
  }
  return known;
}

/** Type, length, the unnamed statement's empty name, the text's terminator and a zero parameter count around a Parse's text. */
const PARSE_OVERHEAD = 1 + 4 + 1 + 1 + 2;

/**
 * A simple query's statements as one extended-protocol pipeline (unnamed statement and portal, text
 * results), each Execute returning at most `rows` rows. The unnamed statement and portal are closed
 * at the end, as a simple query leaves neither behind. Written into one buffer: it is built for
 * every capped simple query.
 */
export function cappedPipeline(statements: readonly string[], rows: number): Buffer {
  const after = afterParseOf(rows);
  const lengths = statements.map((text) => Buffer.byteLength(text, 'utf8'));
  const size = lengths.reduce((sum, length) => sum + PARSE_OVERHEAD + length + after.length, PIPELINE_END.length);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  statements.forEach((text, index) => {
    const length = lengths[index]!;
    out[at] = 0x50; // 'P'
    out.writeInt32BE(PARSE_OVERHEAD - 1 + length, at + 1);
    out[at + 5] = 0;
    out.write(text, at + 6, length, 'utf8');
    at += 6 + length;
    out[at] = 0;
    out.writeInt16BE(0, at + 1);
    at += 3;
    at += after.copy(out, at);
  });
  PIPELINE_END.copy(out, at);
  return out;
}

export function capNotice(cap: number): Buffer {
  return encodeNoticeResponse({
    severity: 'NOTICE',
    code: '01000',
    message: `pgward: the result was cut at ${cap} rows by this credential’s policy (max_rows); aggregate or filter to see what lies beyond`,
  });
}

/**
 * Rewrites the replies to capped Executes (one Execute message, or a capped simple query's
 * pipeline): counts each result's rows and, when the server suspends a portal because the cap is
 * reached, marks the statement truncated and answers with the cap's NOTICE and a CommandComplete.
 * A suspension below the cap is the client's own fetch size and passes through. `before` is what
 * the portal may already have delivered.
 */
export function capRewrite(statement: Statement, cap: number, before: number, options: { readonly simple: boolean }): Rewrite {
  let rows = 0;
  return (message) => {
    if (message.kind === 'Run' && message.type === 'D') {
      rows += message.count;
      return undefined;
    }
    if (options.simple && EXTENDED_ONLY.has(message.type)) return null;
    if (message.type === 'C') rows = 0;
    if (message.type !== 's') return undefined;
    const got = rows;
    rows = 0;
    if (before + got < cap) return undefined;
    statement.truncated = true;
    return Buffer.concat([capNotice(cap), encodeCommandComplete(`SELECT ${got}`)]);
  };
}

/** Passes every reply, and calls `then` when one of type `type` goes by (a BindComplete, a CloseComplete). */
export function onReply(type: string, then: () => void): Rewrite {
  return (message) => {
    if (message.type === type) then();
    return undefined;
  };
}

interface PlannedStatement {
  readonly sql: string;
  readonly rows: ResultRows;
}

/** Each allowed text's statements, split once: an allowed decision is cached per text, so its text keys them. */
const plans = new Map<string, readonly PlannedStatement[]>();
const PLAN_CACHE = 1_000;

/** What the policy engine said of a message: its text to run, its first statement's kind, how many statements it holds. */
export interface DecidedText {
  readonly sql: string;
  readonly statementKind: string;
  readonly statementCount: number;
}

function planOf(decided: DecidedText): readonly PlannedStatement[] {
  const { sql } = decided;
  // A lone SELECT (WITH, VALUES, TABLE), the common case, needs no second parse.
  if (decided.statementCount === 1 && decided.statementKind === 'select') return [{ sql, rows: { kind: 'rows' } }];
  const known = plans.get(sql);
  if (known) return known;
  const parsed = parseStatements(sql);
  // An allowed text parses; were it not to, it runs as one Parse, which the server refuses if it holds several statements.
  const plan = parsed.ok ? parsed.statements.map((s) => ({ sql: s.sql, rows: resultRows(s.stmt, statementShape(nodeType(s.stmt)).kind) })) : [{ sql, rows: { kind: 'rows' } as const }];
  if (plans.size >= PLAN_CACHE) plans.delete(plans.keys().next().value as string);
  plans.set(sql, plan);
  return plan;
}

/**
 * The cursors a message's statements declare or close, and the portals a ROLLBACK TO SAVEPOINT
 * brings back, noted as it is sent; what it returns confirms them once the message ran.
 */
function cursorEffects(plan: readonly PlannedStatement[], portals: PortalRows): ((ok: boolean) => void) | undefined {
  const confirms: (() => void)[] = [];
  for (const { rows } of plan) {
    if (rows.kind === 'declare') confirms.push(portals.made(rows.cursor));
    if (rows.kind === 'close') confirms.push(portals.closed(rows.cursor));
    if (rows.kind === 'rollback_to') portals.revived();
  }
  return confirms.length === 0 ? undefined : (ok) => void (ok && confirms.forEach((confirm) => confirm()));
}

const CURSOR_KINDS: ReadonlySet<string> = new Set(['declare', 'close', 'transaction']);

/** An Execute under a cap of a portal running `decided`: DECLARE, CLOSE and ROLLBACK TO SAVEPOINT on the extended protocol count too. */
export function executedUnderCap(decided: DecidedText, portals: PortalRows): ((ok: boolean) => void) | undefined {
  return CURSOR_KINDS.has(decided.statementKind) ? cursorEffects(planOf(decided), portals) : undefined;
}

/** How a simple query runs under a cap: the message to send (undefined: as sent), the rewrite of its replies, and what to do once it ends. */
export interface CappedQuery {
  readonly message: Buffer | undefined;
  readonly rewrite: Rewrite | undefined;
  /** Called when the query ended, `ok` when it did not fail: confirms the cursors it declared or closed. */
  readonly settled: ((ok: boolean) => void) | undefined;
  /** Why it cannot run under the cap after all (rule max_rows.uncapped), when it cannot. */
  readonly refused?: string;
}

/**
 * A simple query under a row cap of `cap`: statements that return no rows run as sent; a FETCH or
 * MOVE reads no further than its cursor's rows left; anything else runs as a capped pipeline. The
 * policy engine refused beforehand what cannot be capped (hook.ts `capRefusal`).
 */
export function cappedQuery(decided: DecidedText, cap: number, portals: PortalRows, statement: Statement): CappedQuery {
  const plan = planOf(decided);
  const settled = cursorEffects(plan, portals);
  const only = plan.length === 1 ? plan[0]!.rows : undefined;
  if (only?.kind === 'fetch') {
    const read = cappedCursorRead(only, portals.left(only.cursor, cap), cap, statement);
    if ('refused' in read) return { message: undefined, rewrite: undefined, settled, refused: read.refused };
    portals.take(only.cursor, read.takes);
    return { message: read.sql === undefined ? undefined : encodeQuery(read.sql), rewrite: read.rewrite, settled };
  }
  if (plan.every(({ rows }) => rows.kind !== 'rows' && rows.kind !== 'fetch')) return { message: undefined, rewrite: undefined, settled };
  return {
    message: cappedPipeline(plan.map((s) => s.sql), cap),
    rewrite: capRewrite(statement, cap, 0, { simple: true }),
    settled,
  };
}
