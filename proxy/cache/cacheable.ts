import { isObject } from '../policy/ast.js';
import { VETTED_FUNCTIONS } from '../policy/functions.js';
import type { StatementDecision } from '../policy/hook.js';

type Allowed = Extract<StatementDecision, { action: 'allow' }>;

/** The comment an agent writes to keep one statement out of the result cache: `/* pgward:no-cache *\/`, anywhere in the text. */
export const NO_CACHE_HINT = /\/\*\s*pgward:no-cache\s*\*\//i;

/**
 * Vetted functions whose result is not fixed by their arguments within a statement's snapshot
 * (volatile), or that depend on which server or session runs them: never cached.
 */
const UNCACHEABLE_FUNCTIONS: ReadonlySet<string> = new Set([
  'random', 'random_normal', 'clock_timestamp', 'timeofday', 'gen_random_uuid', 'array_sample', 'array_shuffle', 'pg_is_in_recovery',
]);

/** Functions the masking rewrite calls besides vetted ones (hash masks). */
const REWRITE_FUNCTIONS: ReadonlySet<string> = new Set(['byteacat']);

/** SQL value functions that read the session (its role, database or search path) rather than the clock. */
const SESSION_VALUE_OPS: ReadonlySet<string> = new Set([
  'SVFOP_CURRENT_ROLE', 'SVFOP_CURRENT_USER', 'SVFOP_USER', 'SVFOP_SESSION_USER', 'SVFOP_CURRENT_CATALOG', 'SVFOP_CURRENT_SCHEMA',
]);

/** Why a statement is not cached ('bypass'), or undefined when it may be. */
export type Uncacheable = 'hint' | 'not_a_read' | 'in_transaction' | 'session_state' | 'function';

/** What the session knows beyond the decision: whether a transaction is open, and whether its upstream carries session state (SET). */
export interface CacheSituation {
  readonly inTransaction: boolean;
  readonly pinned: boolean;
}

/**
 * Whether the result of an allowed statement may be served from the cache: a read with no effect
 * (readsOnly: SELECTs only, no lock, write, setting, cursor), outside an explicit transaction, on
 * a connection with no session state of the client's, calling only immutable or stable functions
 * that do not read the session, and with no opt-out hint in the text the agent sent.
 */
export function uncacheable(sql: string, decision: Allowed, situation: CacheSituation): Uncacheable | undefined {
  if (!decision.readsOnly || decision.statementCount !== 1) return 'not_a_read';
  // Only a text with a block comment can hold the hint: most have none, and are not scanned by the expression.
  if (sql.includes('/*') && NO_CACHE_HINT.test(sql)) return 'hint';
  if (situation.inTransaction) return 'in_transaction';
  if (situation.pinned || decision.changesSession) return 'session_state';
  // A view among what it reads calls code whose reads are not followed, or whose result varies (reach.ts).
  return decision.stableCalls && decision.readsReach !== 'unbounded' ? undefined : 'function';
}

/** Every call in the tree is of a vetted, non-volatile function; no session value, cursor position or sampled table. */
export function stableTree(tree: unknown): boolean {
  if (Array.isArray(tree)) return tree.every(stableTree);
  if (!isObject(tree)) return true;
  for (const [key, value] of Object.entries(tree)) {
    if (key === 'FuncCall' && !stableCall(value)) return false;
    if (key === 'SQLValueFunction' && isObject(value) && SESSION_VALUE_OPS.has(String(value.op))) return false;
    if (key === 'RangeTableSample' || key === 'CurrentOfExpr') return false;
    if (!stableTree(value)) return false;
  }
  return true;
}

function stableCall(call: unknown): boolean {
  if (!isObject(call) || !Array.isArray(call.funcname)) return false;
  const parts = call.funcname.map((part: unknown) => (isObject(part) && isObject(part.String) ? String(part.String.sval) : ''));
  const name = parts.at(-1) ?? '';
  const schema = parts.length > 1 ? parts[0] : 'pg_catalog';
  if (schema !== 'pg_catalog' || parts.length > 2) return false;
  return cacheableBuiltin(name);
}

/** Whether a call of pg_catalog's `name` leaves a result cacheable: vetted (or a mask's) and neither volatile nor server-dependent. */
export function cacheableBuiltin(name: string): boolean {
  return (VETTED_FUNCTIONS.has(name) || REWRITE_FUNCTIONS.has(name)) && !UNCACHEABLE_FUNCTIONS.has(name);
}

/** The version of the catalog a decision was made on, for the key; '' when none was at hand. */
export function catalogVersionOf(catalog: { readonly version: string } | { readonly unavailable: string }): string {
  return 'version' in catalog ? catalog.version : '';
}
