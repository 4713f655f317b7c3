/**
 * How many rows a held write would affect, made before it is held (spec §2.8 `estimated_rows`):
 * the exact count of a trial run in a transaction that is rolled back, under a short
 * statement_timeout; when the trial runs out of time, the planner's estimate (EXPLAIN). Made on an
 * upstream connection of its own, released before any wait.
 */
import type { EstimateMethod } from '../src/events/approvals.js';
import { runStatement, StatementFailed, type StatementRun } from '../src/mcp/agent/statement.js';
import { taggedRows } from './policy/write-guard.js';
import type { UpstreamConnection } from './upstream/connection.js';
import type { UpstreamHandle } from './upstreams.js';

export interface Estimate {
  readonly rows: number;
  readonly method: EstimateMethod;
}

/** The longest a trial run may take before the planner is asked instead. */
export const TRIAL_TIMEOUT_MS = 2_000;

/** Runs one statement in its own transaction (runStatement on a held connection, or the MCP's run), answering its tag and rows. */
export type RunStatement = (run: StatementRun) => Promise<{ readonly command: string; readonly rows: readonly (readonly unknown[])[] }>;

const CANCELLED = '57014';

/**
 * Rows of the planner's estimate in EXPLAIN (FORMAT JSON) output: of the rows a ModifyTable node is
 * fed (its own count is of rows it returns, 0 without RETURNING), else of the top node.
 */
export function planRows(explained: unknown): number | undefined {
  const document: unknown = typeof explained === 'string' ? JSON.parse(explained) : explained;
  const plan = Array.isArray(document) ? (document[0] as { Plan?: Record<string, unknown> } | undefined)?.Plan : undefined;
  if (!plan) return undefined;
  const fed = plan['Node Type'] === 'ModifyTable' && Array.isArray(plan.Plans) ? (plan.Plans[0] as Record<string, unknown> | undefined) : plan;
  const rows = fed?.['Plan Rows'];
  return typeof rows === 'number' && Number.isFinite(rows) && rows >= 0 ? Math.round(rows) : undefined;
}

/**
 * The estimate of one counted write (`sql` as it would run, `params` as bound), or null when none
 * could be made (the trial failed, or neither it nor the plan answered in time). Never commits.
 */
export async function estimateRows(run: RunStatement, sql: string, params: readonly (string | null)[], timeoutMs = TRIAL_TIMEOUT_MS): Promise<Estimate | null> {
  try {
    const trial = await run({ sql, params, readOnly: false, maxRows: 1, timeoutMs, commitIf: () => false });
    const rows = taggedRows(trial.command);
    return rows === undefined ? null : { rows, method: 'trial' };
  } catch (error) {
    if (!(error instanceof StatementFailed) || error.sqlstate !== CANCELLED) return null;
  }
  try {
    const plan = await run({ sql: `EXPLAIN (FORMAT JSON) ${sql}`, params, readOnly: true, maxRows: 1, timeoutMs });
    const rows = planRows(plan.rows[0]?.[0]);
    return rows === undefined ? null : { rows, method: 'plan' };
  } catch {
    return null;
  }
}

/** The estimate made on a connection of the session's own pool, acquired for it and handed back at once (within `timeoutMs` to get one, else null). */
export async function estimateOnPool(handle: UpstreamHandle | undefined, owner: string, sql: string, params: readonly (string | null)[], timeoutMs = TRIAL_TIMEOUT_MS): Promise<Estimate | null> {
  if (!handle || handle.pool.isClosed) return null;
  let connection: UpstreamConnection;
  try {
    connection = await handle.pool.acquire({ owner, signal: AbortSignal.timeout(timeoutMs) });
  } catch {
    return null;
  }
  // A statement PostgreSQL refused leaves the connection idle; any other failure leaves it unusable.
  let usable = true;
  const run: RunStatement = async (statement) => {
    try {
      return await runStatement(connection, statement);
    } catch (error) {
      if (!(error instanceof StatementFailed)) usable = false;
      throw error;
    }
  };
  try {
    return await estimateRows(run, sql, params, timeoutMs);
  } finally {
    if (usable) void handle.pool.release(connection, { reset: false });
    else handle.pool.destroy(connection);
  }
}
