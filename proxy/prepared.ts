import { createHash } from 'node:crypto';
import type { UpstreamConnection } from './upstream/connection.js';

/** Server-side statements each upstream connection holds, whoever prepared them. */
const preparedOn = new WeakMap<UpstreamConnection, Set<string>>();

export function preparedStatements(connection: UpstreamConnection): Set<string> {
  let names = preparedOn.get(connection);
  if (!names) preparedOn.set(connection, (names = new Set()));
  return names;
}

/** After DISCARD ALL the connection holds no statements. */
export function forgetPrepared(connection: UpstreamConnection): void {
  preparedOn.delete(connection);
}

/** The server-side name of a statement: equal text and parameter types share one name on a connection. */
export function serverStatementName(sql: string, paramTypes: readonly number[]): string {
  return `pgw_${createHash('sha256').update(`${paramTypes.join(',')}\0${sql}`).digest('hex').slice(0, 32)}`;
}
