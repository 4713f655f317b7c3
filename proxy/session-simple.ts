import { holdFor, type Hold } from './approval-hold.js';
import type { Statement } from './pipeline.js';
import { writeGuardOf } from './policy/write-guard.js';
import { encodeQuery } from './protocol/rename.js';
import { cappedQuery } from './row-cap.js';
import { statementOf, type Allowed } from './session-audit.js';
import type { GuardedWrites } from './session-guarded.js';
import type { SessionHolds } from './session-holds.js';
import type { SessionHost } from './session-host.js';
import type { StatementGate } from './statement-gate.js';
import { missHooks, type SessionResults } from './cache/session-results.js';

/**
 * A session's simple queries: decided by the policy, held for approval when its rules say so
 * (session-holds.ts), then run as sent (or as the policy rewrote them), under the row cap, or as a
 * guarded write (session-guarded.ts).
 */
export class SimpleQuery {
  constructor(
    private readonly host: SessionHost,
    private readonly gate: StatementGate,
    private readonly guarded: GuardedWrites,
    private readonly holds: SessionHolds,
    private readonly results: SessionResults,
  ) {}

  query(sql: string, raw: Buffer): Promise<void> | void {
    const fresher = this.gate.fresher(sql, 'simple');
    if (fresher) return fresher.then(() => this.decided(sql, raw));
    return this.decided(sql, raw);
  }

  private decided(sql: string, raw: Buffer): Promise<void> | void {
    const { host } = this;
    if (host.closed) return;
    const decision = this.gate.decide(sql, 'simple');
    if (!decision) return;
    const hold = holdFor(host.context.policies.get(host.credential!.policy_profile_id), decision, host.catalog?.current());
    if (hold) return this.held(sql, raw, decision, hold);
    return this.run(sql, raw, decision, statementOf({ sql, decision }));
  }

  /** Waits with no upstream connection held, then runs once approved, or answers why not. */
  private async held(sql: string, raw: Buffer, decision: Allowed['decision'], hold: Hold): Promise<void> {
    const run = await this.holds.held(sql, decision, hold);
    if (run && !this.host.closed) await this.run(sql, raw, run.decision, run.statement);
  }

  private run(sql: string, raw: Buffer, decision: Allowed['decision'], statement: Statement): Promise<void> | void {
    const { host, gate } = this;
    const guard = writeGuardOf(host.context.policies.get(host.credential!.policy_profile_id), decision.writes);
    if (guard) return this.guarded.query(sql, decision, statement, guard);
    const cap = gate.rowCap(decision);
    const capped = cap === undefined ? undefined : cappedQuery(decision, cap, host.portalRows, statement);
    if (capped?.refused) return gate.refuse(sql, 'simple', { event: 'blocked', rule: 'max_rows.uncapped', reason: capped.refused, sqlstate: '0A000', kind: decision.statementKind, tablesRead: [], tablesWritten: [], tablesBlocked: [] });
    const plan = cap === undefined ? this.results.plan(sql, decision, 'simple', statement) : undefined;
    if (plan?.outcome === 'hit' || plan?.outcome === 'stale') return this.results.answer(statement, plan, 'simple');
    const miss = missHooks(plan);
    const own = statement.settled;
    const cappedSettled = capped?.settled ?? miss?.settled;
    if (cappedSettled) statement.settled = own ? (ok) => (cappedSettled(ok), own(ok)) : cappedSettled;
    host.context.budgets.admit(host.credential!);
    return host.toServer(capped?.message ?? (decision.sql === sql ? raw : encodeQuery(decision.sql)), { ends: 'Z', statement, rewrite: capped?.rewrite, tap: miss?.tap });
  }
}
