/**
 * What a message writes, as the gateway can count it, and what a policy's max_affected_rows and
 * write_mode make of that. Pure. The gateway counts a write's rows from its command tag
 * (`DELETE 12`), which counts only the outer statement: a data-modifying WITH query, a TRUNCATE or a
 * COPY FROM affect rows no tag of theirs counts, so under a cap they are refused (fail closed).
 */
import type { PolicyRow } from '../../projections/policies.js';
import { isObject, nodeType, type Node } from './ast.js';
import { statementKinds } from './kinds.js';

/** What a message writes: no rows; one INSERT, UPDATE or DELETE whose command tag counts them; or rows no tag counts (`what`). */
export type WriteShape =
  | { readonly rows: 'none'; readonly ddl: boolean }
  | { readonly rows: 'counted'; readonly ddl: boolean; readonly returning: boolean; readonly bound?: RowBounds }
  | { readonly rows: 'uncounted'; readonly ddl: boolean; readonly what: string };

const WRITE_NODES: ReadonlySet<string> = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt']);
const COUNTED_TOPS: ReadonlySet<string> = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt']);

/** How many data-modifying statements a tree holds, itself included. */
function writeNodes(tree: unknown): number {
  if (Array.isArray(tree)) return tree.reduce((sum: number, item) => sum + writeNodes(item), 0);
  if (!isObject(tree)) return 0;
  let count = 0;
  for (const [key, value] of Object.entries(tree)) count += (WRITE_NODES.has(key) ? 1 : 0) + writeNodes(value);
  return count;
}

function copiesIn(stmt: Node): boolean {
  const fields = stmt.CopyStmt;
  return isObject(fields) && fields.is_from === true;
}

/** What one statement's rows written are, when it writes any: '' for a lone counted write. */
function uncountedWrite(stmt: Node): string | undefined {
  const type = nodeType(stmt);
  const nested = writeNodes(stmt);
  if (type === 'TruncateStmt') return 'TRUNCATE';
  if (type === 'CopyStmt' && copiesIn(stmt)) return 'COPY FROM';
  if (nested === 0) return undefined;
  if (COUNTED_TOPS.has(type) && nested === 1) return '';
  if (type === 'MergeStmt') return 'MERGE';
  // EXPLAIN without ANALYZE runs nothing: its operand is an explain only (kinds.ts).
  if (type === 'ExplainStmt') return statementKinds(stmt).length === 1 ? undefined : 'EXPLAIN ANALYZE of a write';
  if (type === 'CopyStmt') return 'COPY of a data-modifying statement';
  return 'a data-modifying WITH query (its command tag counts only the outer statement’s rows)';
}

export function writeShape(statements: readonly { readonly stmt: Node }[]): WriteShape {
  const ddl = statements.some(({ stmt }) => statementKinds(stmt).includes('ddl'));
  const writes = statements.map(({ stmt }) => uncountedWrite(stmt)).filter((what) => what !== undefined);
  if (writes.length === 0) return { rows: 'none', ddl };
  if (statements.length > 1) return { rows: 'uncounted', ddl, what: 'a write in a query string of several statements' };
  return writes[0] === '' ? { rows: 'counted', ddl, returning: returns(statements[0]!.stmt) } : { rows: 'uncounted', ddl, what: writes[0]! };
}

function returns(stmt: Node): boolean {
  const fields = stmt[nodeType(stmt)];
  return isObject(fields) && Array.isArray(fields.returningList) && fields.returningList.length > 0;
}

/**
 * The rows a write that runs under an approval rule must affect, or it is rolled back: an approved
 * write within its tolerance of the trial count its reviewer saw, an auto-approved one within its
 * ceiling (approval-hold.ts). Set on the write's shape for that one execution.
 */
export interface RowBounds {
  readonly min: number;
  readonly max: number;
  readonly rule: 'approval.count_drift' | 'approval.auto_approve_exceeded';
  /** What the bounds come from, as the refusal says it. */
  readonly why: string;
}

/** How a policy has the gateway run a counted write: under a cap of rows, rolled back, or both, and within bounds; undefined when it runs as sent. */
export interface WriteGuard {
  readonly cap: number | undefined;
  readonly rollback: boolean;
  readonly bound?: RowBounds;
}

export function writeGuardOf(policy: Pick<PolicyRow, 'read_only' | 'max_affected_rows' | 'write_mode'> | undefined, shape: WriteShape): WriteGuard | undefined {
  if (!policy || policy.read_only || shape.rows !== 'counted') return undefined;
  const cap = policy.max_affected_rows ?? undefined;
  const rollback = policy.write_mode === 'rollback';
  if (shape.bound) return { cap, rollback, bound: shape.bound };
  return cap === undefined && !rollback ? undefined : { cap, rollback };
}

/** Why a guarded write must be rolled back and refused, once its rows are known (undefined: not counted); undefined when it may stand. */
export function guardBroken(guard: WriteGuard, rows: number | undefined): { readonly rule: string; readonly sqlstate: string; readonly reason: string } | undefined {
  if (guard.cap !== undefined && (rows === undefined || rows > guard.cap)) return capExceeded(guard.cap, rows);
  const bound = guard.bound;
  if (bound && (rows === undefined || rows < bound.min || rows > bound.max)) return boundsBroken(bound, rows);
  return undefined;
}

function boundsBroken(bound: RowBounds, rows: number | undefined): { readonly rule: string; readonly sqlstate: '55000'; readonly reason: string } {
  const affected = rows === undefined ? 'its rows could not be counted' : `it affected ${rows} rows`;
  const range = bound.min === bound.max ? `exactly ${bound.min}` : `${bound.min} to ${bound.max}`;
  return {
    rule: bound.rule,
    sqlstate: '55000',
    reason: `${bound.why}, so it had to affect ${range} rows; ${affected}, so it was rolled back and nothing changed (rule ${bound.rule})`,
  };
}

export interface WriteRefusal {
  readonly rule: 'write_mode.sandbox_unavailable' | 'write_cap.unbounded' | 'write_mode.rollback_unsupported' | 'max_rows.returning';
  readonly sqlstate: '0A000';
  readonly reason: string;
}

/**
 * What a write-capable policy's write_mode and max_affected_rows refuse before anything runs.
 * `sandboxed`: the session runs on a sandbox branch, where write_mode sandbox lets writes run.
 */
export function writeRefusal(policy: Pick<PolicyRow, 'read_only' | 'max_affected_rows' | 'write_mode' | 'max_rows'>, shape: WriteShape, sandboxed = false): WriteRefusal | undefined {
  if (policy.read_only || (shape.rows === 'none' && !shape.ddl)) return undefined;
  if (policy.write_mode === 'sandbox' && !sandboxed) {
    return {
      rule: 'write_mode.sandbox_unavailable',
      sqlstate: '0A000',
      reason: 'this credential’s policy runs writes on a sandbox branch (write_mode sandbox), and this session has none (no branch of its database was ready when it connected, or this is not a wire session), so the gateway refuses every write and schema change (rule write_mode.sandbox_unavailable); reads run as usual; ask the policy’s owner to create a branch (POST /v1/projects/{project_id}/branches), then reconnect',
    };
  }
  const cap = policy.max_affected_rows;
  if (cap && shape.rows === 'uncounted') {
    return {
      rule: 'write_cap.unbounded',
      sqlstate: '0A000',
      reason: `this credential’s policy caps every write at ${cap} rows (max_affected_rows), and the gateway cannot count the rows ${shape.what} affects, so it refuses it (rule write_cap.unbounded); send one INSERT, UPDATE or DELETE per query, with a WHERE clause that touches at most ${cap} rows`,
    };
  }
  if (policy.write_mode === 'rollback' && (shape.rows === 'uncounted' || shape.ddl)) {
    const what = shape.rows === 'uncounted' ? shape.what : 'a schema change';
    return {
      rule: 'write_mode.rollback_unsupported',
      sqlstate: '0A000',
      reason: `this credential’s policy rehearses writes (write_mode rollback): each runs and is rolled back, and the gateway can rehearse only one INSERT, UPDATE or DELETE per query, not ${what} (rule write_mode.rollback_unsupported); send one INSERT, UPDATE or DELETE per query`,
    };
  }
  if (policy.max_rows && shape.rows === 'counted' && shape.returning && writeGuardOf(policy, shape)) {
    return {
      rule: 'max_rows.returning',
      sqlstate: '0A000',
      reason: `this credential’s policy caps results at ${policy.max_rows} rows (max_rows), and a write it guards (max_affected_rows or write_mode rollback) cannot have its RETURNING rows cut (rule max_rows.returning); send the write without RETURNING and read the rows with a SELECT`,
    };
  }
  return undefined;
}

/** The refusal of a counted write that affected more rows than the cap: it was rolled back. */
export function capExceeded(cap: number, rows: number | undefined): { readonly rule: 'write_cap.exceeded'; readonly sqlstate: '54000'; readonly reason: string } {
  const affected = rows === undefined ? 'the write’s rows could not be counted (its result stopped at a row limit before its end)' : `the write affected ${rows} rows`;
  return {
    rule: 'write_cap.exceeded',
    sqlstate: '54000',
    reason: `${affected}, and this credential’s policy allows at most ${cap} in one statement (max_affected_rows ${cap}), so it was rolled back and nothing changed (rule write_cap.exceeded); narrow its WHERE clause to at most ${cap} rows and send it again, in several statements if need be`,
  };
}

/** write_mode rollback on the wire rehearses a write by failing the transaction it ran in: never a client's own transaction. */
export function rollbackInTransaction(): { readonly rule: 'write_mode.rollback_in_transaction'; readonly sqlstate: '25001'; readonly reason: string } {
  return {
    rule: 'write_mode.rollback_in_transaction',
    sqlstate: '25001',
    reason: 'this credential’s policy rehearses writes (write_mode rollback), which the gateway does outside transaction blocks only (rule write_mode.rollback_in_transaction); end the transaction (COMMIT or ROLLBACK) and send the write on its own',
  };
}

/** The audit rule of a write that ran and was rolled back (write_mode rollback). */
export const ROLLED_BACK_RULE = 'write_mode.rolled_back';

/** What a rolled-back write's result says (write_mode rollback). */
export const ROLLED_BACK_NOTICE = 'pgward: this write ran and was rolled back (write_mode rollback): the result shows what it would have done, and nothing changed';

/** Rows affected, from a command tag: `INSERT 0 5` → 5, `UPDATE 3` → 3. */
export function taggedRows(tag: string): number | undefined {
  const match = /^(?:INSERT \d+|UPDATE|DELETE|MERGE) (\d+)$/.exec(tag);
  return match ? Number(match[1]) : undefined;
}
