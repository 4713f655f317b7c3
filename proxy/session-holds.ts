import type { BoundParams } from './approval-extended.js';
import type { Hold } from './approval-hold.js';
import { holdOnWire } from './approval-wire.js';
import type { Statement } from './pipeline.js';
import type { Allowed } from './session-audit.js';
import type { Protocol, SessionHost } from './session-host.js';
import type { UpstreamAccess } from './session-acquire.js';
import type { StatementGate } from './statement-gate.js';

/**
 * A session's statements held for approval (approval-wire.ts), simple queries and Executes of the
 * extended protocol (bound to their Bind's parameters): one waits at a time, with no upstream
 * connection held, until a reviewer decides, it expires, or the wait is ended (the client cancelled
 * it, or the session ended).
 */
export class SessionHolds {
  private wait: AbortController | undefined;

  constructor(
    private readonly host: SessionHost,
    private readonly gate: StatementGate,
    private readonly access: UpstreamAccess,
  ) {}

  /** Waits for the held statement's decision: what to run once approved, or undefined once the client was answered why not. */
  async held(sql: string, decision: Allowed['decision'], hold: Hold, protocol: Protocol = 'simple', bound?: BoundParams, ranInBatch = false): Promise<{ readonly decision: Allowed['decision']; readonly statement: Statement } | undefined> {
    const { host, gate } = this;
    const { context } = host;
    const wait = new AbortController();
    this.wait = wait;
    try {
      return await holdOnWire({
        services: context.approvals,
        credential: host.credential!,
        policies: context.policies,
        sql,
        ...(bound ? { bound } : {}),
        decision,
        hold,
        sessionId: host.id,
        region: context.identity.region,
        // An extended batch that ran a statement before this one is an implicit transaction block: holding would commit it early.
        inTransaction: host.status !== 'I' || ranInBatch,
        wait: wait.signal,
        publish: (record) => context.decisions.publish(record),
        publishStrict: (record) => context.decisions.publishStrict(record),
        notice: (bytes) => host.pipeline.expect({ kind: 'synthetic', reply: bytes }),
        released: () => host.releaseIfIdle(),
        pool: () => this.access.poolFor({ sql, decision }),
        closed: () => host.closed,
        refuse: (refusal) => gate.refuse(sql, protocol, refusal),
        answer: (code, message) => host.refuse({ severity: 'ERROR', code, message }, protocol),
        redecide: () => gate.decide(sql, protocol),
      });
    } finally {
      if (this.wait === wait) this.wait = undefined;
    }
  }

  /** Ends the wait under way, if any: `reason` is 'cancel' or 'closed'. */
  end(reason: 'cancel' | 'closed'): void {
    this.wait?.abort(reason);
  }
}
