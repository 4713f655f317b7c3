import type { BaseLogger } from 'pino';

/**
 * The log lines an operator alerts on: each carries a stable `event` (docs/operations.md lists
 * them), is logged at one level, and holds ids and reasons, never a secret or statement text.
 */
const EVENTS = {
  /** An agent's statement touched a honeytoken. */
  honeytoken_tripped: 'warn',
  /** A kill-switch, revocation or rotation ended a credential's live wire sessions, or the project's IP rules ended one. */
  sessions_closed: 'warn',
  /** A policy profile was created, changed or deleted. */
  policy_changed: 'info',
  /** A statement was refused because a query budget is spent. */
  budget_exhausted: 'warn',
  /** A wire login or an MCP request's agent token was refused. */
  login_refused: 'warn',
  /** A connection to the proxy was closed before its login: a PROXY protocol header from an untrusted peer, a malformed one, or none from a trusted proxy. */
  connection_refused: 'warn',
  /** A credential past its expires_at was refused at login or its session ended. */
  credential_expired: 'info',
  /** A connection to an upstream database could not be opened (the cause, classified). */
  upstream_connect_failed: 'warn',
  /** No upstream connection could be had for a statement or login (the pool was busy, closed, or connecting failed). */
  upstream_unavailable: 'info',
  /** A webhook message was given up after its retry horizon: its endpoint is marked failing. */
  webhook_failing: 'warn',
  /** A read replica joined or left the rotation of its database's reads (its health probes). */
  replica_health_changed: 'warn',
  /** An anomaly detector raised an alert (docs/anomalies.md). */
  anomaly_raised: 'warn',
} as const satisfies Record<string, 'info' | 'warn'>;

export type LogEvent = keyof typeof EVENTS;

export const LOG_EVENTS = Object.keys(EVENTS) as readonly LogEvent[];

/** Writes one event line: `event` first, then `fields`, at the event's level. */
export function logEvent(logger: Pick<BaseLogger, 'info' | 'warn'>, event: LogEvent, fields: Record<string, unknown>, message: string): void {
  logger[EVENTS[event]]({ event, ...fields }, message);
}
