import { FLUSH, guardedReplies, guardedSimpleEnd, guardedSimpleWrite, settledOf, simpleEndReplies, type GuardedOutcome } from './guarded-write.js';
import type { Statement } from './pipeline.js';
import { rollbackInTransaction, type WriteGuard } from './policy/write-guard.js';
import type { Allowed } from './session-audit.js';
import type { UpstreamAccess } from './session-acquire.js';
import type { Protocol, SessionHost } from './session-host.js';
import type { StatementGate } from './statement-gate.js';

/**
 * A session's writes under max_affected_rows or write_mode rollback (guarded-write.ts on the wire):
 * each is sent, its command tag awaited, and only then is its transaction let end, committed or
 * failed. The client's next message waits meanwhile.
 */
export class GuardedWrites {
  constructor(
    private readonly host: SessionHost,
    private readonly gate: StatementGate,
    private readonly access: UpstreamAccess,
  ) {}

  /** A write of a simple query: run as an extended Execute, then ended (and undone when it must be) with a Sync. */
  query(sql: string, decision: Allowed['decision'], statement: Statement, guard: WriteGuard): Promise<void> | void {
    const { host } = this;
    if (guard.rollback && host.status !== 'I') return this.refuseInTransaction(sql, decision, 'simple');
    host.context.budgets.admit(host.credential!);
    const outcome: GuardedOutcome = { undo: false, refused: false };
    return this.run(statement, 'simple', () => {
      // The Parse replaces the connection's unnamed statement.
      host.statements.unnamedOn = undefined;
      host.send(guardedSimpleWrite(decision.sql), { ends: 'CI', statement, rewrite: guardedReplies(statement, guard, outcome, { simple: true }) });
    }, () => {
      host.unsynced = false;
      const undo = outcome.undo && !statement.failed;
      host.send(guardedSimpleEnd(undo), { ends: 'Z', rewrite: simpleEndReplies(undo) });
    });
  }

  /** An Execute of a write: its batch's Sync is held back until its tag decided. */
  execute(allowed: Allowed, statement: Statement, guard: WriteGuard, raw: Buffer): Promise<void> | void {
    const { host } = this;
    if (guard.rollback && host.status !== 'I') return this.refuseInTransaction(allowed.sql, allowed.decision, 'extended');
    host.context.budgets.admit(host.credential!);
    const outcome: GuardedOutcome = { undo: false, refused: false };
    return this.run(statement, 'extended', () => {
      host.send(raw, { ends: 'CIs', statement, rewrite: guardedReplies(statement, guard, outcome, { simple: false }) });
      host.forward(FLUSH);
    }, () => {
      if (outcome.refused) host.skipUntilSync = true;
      if (outcome.undo && !statement.failed) host.undoAtSync = true;
    });
  }

  /**
   * Sends a guarded write with `start` and, once its replies went by, does `then`; the client's
   * next message waits until then. The transaction stays open meanwhile (`unsynced`), so the
   * connection is not handed back.
   */
  private async run(statement: Statement, protocol: Protocol, start: () => void, then: () => void): Promise<void> {
    const { host } = this;
    const ended = settledOf(statement);
    let sent = false;
    host.unsynced = true;
    await this.access.withServer(() => {
      sent = true;
      start();
    }, protocol, () => statement);
    if (!sent) {
      if (protocol === 'simple') host.unsynced = false;
      return;
    }
    host.flow.flush();
    await ended;
    if (!host.closed && host.upstream.server) then();
  }

  private refuseInTransaction(sql: string, decision: Allowed['decision'], protocol: Protocol): undefined {
    return this.gate.refuse(sql, protocol, { event: 'blocked', ...rollbackInTransaction(), kind: decision.statementKind, tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten, tablesBlocked: [] });
  }
}
