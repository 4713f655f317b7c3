/**
 * The gateway's statement timeout for agent sessions: the smaller of the policy's
 * statement_timeout_ms and the database's query_timeout_ms (0: none). The proxy enforces it with
 * its own timer, so a `SET statement_timeout` of the agent's can lower it but never lift it: past
 * the limit the running statement is cancelled upstream (CancelRequest, SQLSTATE 57014), and if
 * it has still not ended a grace period later (a backend blocked writing a result the client does
 * not read cannot be cancelled), the session is ended and its upstream connection dropped.
 */
import { DEFAULT_STATEMENT_TIMEOUT_MS } from '../src/events/policies.js';
import type { ErrorEdit } from './pipeline.js';

/** The audit rule of a statement the gateway cancelled at its statement timeout. */
export const STATEMENT_TIMEOUT_RULE = 'statement_timeout';

/** The audit reason's note for such a statement. */
export function timeoutNote(limitMs: number): string {
  return `the gateway cancelled it at the statement timeout (${limitMs} ms; rule ${STATEMENT_TIMEOUT_RULE}).`;
}

/** How long a cancelled statement may take to end before the session is ended instead. */
export const CANCEL_GRACE_MS = 5_000;

/** The limit in force for a policy's statements on a database; a policy without one gets the default. */
export function statementTimeoutMs(policy: { readonly statement_timeout_ms?: number } | undefined, databaseQueryTimeoutMs: number): number {
  const own = policy?.statement_timeout_ms ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  return databaseQueryTimeoutMs > 0 ? Math.min(own, databaseQueryTimeoutMs) : own;
}

export interface DeadlineEvents {
  /** The statement ran past its limit: cancel it upstream. */
  expired(limitMs: number): void;
  /** It ran on for CANCEL_GRACE_MS after that: end the session. */
  stuck(limitMs: number): void;
}

/**
 * Times the upstream work of one session, from the moment it is sent until the upstream is done
 * with it. Cheap on the hot path: starting and stopping store a time; one timer, armed at most
 * once per limit period, checks whether the work it was armed for is still running when it fires.
 */
export class StatementDeadline {
  #startedAt = 0;
  #limitMs = 0;
  #running = false;
  /** Set once the running work was cancelled: the next firing ends the session. */
  #cancelled = false;
  #timer: NodeJS.Timeout | undefined;
  /** performance.now() when the timer fires. */
  #timerAt = 0;

  constructor(private readonly events: DeadlineEvents) {}

  get running(): boolean {
    return this.#running;
  }

  /** The limit the last work ran past, once it was cancelled for it (until other work starts). */
  get cancelledAtMs(): number | undefined {
    return this.#cancelled ? this.#limitMs : undefined;
  }

  /** Work was sent upstream with nothing else running: the clock starts. */
  start(limitMs: number): void {
    this.#running = true;
    this.#cancelled = false;
    this.#startedAt = performance.now();
    this.#limitMs = limitMs;
    // A timer armed for later (the grace period of a statement cancelled before) would be late for this one.
    if (this.#timer && this.#timerAt <= this.#startedAt + limitMs) return;
    clearTimeout(this.#timer);
    this.#arm(limitMs);
  }

  /** The upstream is done with what it was sent. */
  stop(): void {
    this.#running = false;
  }

  /** The session is over. */
  close(): void {
    this.#running = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(delayMs: number): void {
    const delay = Math.max(1, Math.ceil(delayMs));
    this.#timerAt = performance.now() + delay;
    this.#timer = setTimeout(this.#fire, delay);
    this.#timer.unref();
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    if (!this.#running) return;
    const due = this.#startedAt + this.#limitMs + (this.#cancelled ? CANCEL_GRACE_MS : 0);
    const left = due - performance.now();
    if (left > 0) return this.#arm(left);
    if (this.#cancelled) return this.events.stuck(this.#limitMs);
    this.#cancelled = true;
    this.#arm(CANCEL_GRACE_MS);
    this.events.expired(this.#limitMs);
  };
}

/**
 * How server errors reach an agent: without their DETAIL under a policy that masks columns (the
 * DETAIL of a failed write can print the whole row), and the cancel the gateway sent at the
 * statement timeout reported as such, not as PostgreSQL's "due to user request".
 */
export function agentErrorEdit(hideDetail: boolean, cancelledAtMs: number | undefined): ErrorEdit | undefined {
  if (!hideDetail && cancelledAtMs === undefined) return undefined;
  return (error) => {
    const timedOut = cancelledAtMs !== undefined && error.code === '57014';
    if (!timedOut && (!hideDetail || error.detail === undefined)) return error;
    return {
      ...error,
      ...(hideDetail ? { detail: undefined } : {}),
      ...(timedOut
        ? {
            message: `canceling statement due to statement timeout: this credential’s statements may run ${cancelledAtMs} ms (policy statement_timeout_ms, or the database’s query_timeout_ms when smaller), which SET statement_timeout cannot raise; filter, aggregate or LIMIT the query so it finishes sooner`,
          }
        : {}),
    };
  };
}
