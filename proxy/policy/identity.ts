import { AUDIT_SQL_MAX } from '../../src/events/audit.js';
import { fingerprint, normalize } from './parser.js';

/** How a statement is grouped in the audit trail: its text with literals as `$N`, and libpg_query's fingerprint. */
export interface StatementIdentity {
  readonly normalized_sql: string;
  readonly query_hash: string;
}

const NONE: StatementIdentity = { normalized_sql: '', query_hash: '' };
const CAPACITY = 10_000;
const known = new Map<string, StatementIdentity>();

/**
 * The audit identity of a message's text, empty when it does not parse. Computing it costs a parse
 * (tens of µs), so identities are kept by exact text; the oldest go first beyond CAPACITY.
 */
export function statementIdentity(sql: string): StatementIdentity {
  if (sql === '') return NONE;
  const hit = known.get(sql);
  if (hit) return hit;
  const normalized = normalize(sql);
  const hash = fingerprint(sql);
  const identity = normalized === null || hash === null ? NONE : { normalized_sql: normalized.slice(0, AUDIT_SQL_MAX), query_hash: hash };
  known.set(sql, identity);
  if (known.size > CAPACITY) known.delete(known.keys().next().value as string);
  return identity;
}
