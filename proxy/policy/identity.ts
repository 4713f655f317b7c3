import { hash } from 'node:crypto';
import { AUDIT_SQL_MAX } from '../../src/events/audit.js';
import { auditSql } from '../audit-text.js';
import { deparseStatements, normalize } from './parser.js';
import { numericShape, withOtherNumbers } from './shape.js';

/** How a statement is grouped in the audit trail: its text with literals as `$N`, and a hash of that text. */
export interface StatementIdentity {
  readonly normalized_sql: string;
  readonly query_hash: string;
}

const NONE: StatementIdentity = { normalized_sql: '', query_hash: '' };
const CAPACITY = 10_000;
const known = new Map<string, StatementIdentity>();
/** Identities by numeric shape, for texts that differ only in their numbers (the simple protocol's literals). */
const byShape = new Map<string, StatementIdentity>();

function remember(map: Map<string, StatementIdentity>, key: string, identity: StatementIdentity): void {
  map.set(key, identity);
  if (map.size > CAPACITY) map.delete(map.keys().next().value as string);
}

/**
 * The normalized text an entry keeps. Normalizing keeps comments, which can be any length: a text
 * too long to keep whole is normalized again from its parse tree (no comments), then abridged.
 */
function keptNormalized(sql: string, normalized: string): string {
  if (normalized.length <= AUDIT_SQL_MAX) return normalized;
  const bare = deparseStatements(sql);
  return auditSql((bare !== null ? normalize(bare) : null) ?? normalized);
}

/**
 * The audit identity of a message's text, empty when it does not parse. `query_hash` is the first
 * 64 bits of SHA-256 over the normalized text (one libpg_query call, not a second one for its
 * fingerprint). Normalizing costs a parse (tens of µs), so identities are kept by exact text, and
 * by numeric shape when the numbers are what normalizing replaces; the oldest go first beyond CAPACITY.
 */
export function statementIdentity(sql: string): StatementIdentity {
  if (sql === '') return NONE;
  const hit = known.get(sql);
  if (hit) return hit;
  const shape = numericShape(sql);
  const shaped = shape && byShape.get(shape.key);
  if (shaped) return shaped;
  const normalized = normalize(sql);
  const identity = normalized === null ? NONE : { normalized_sql: keptNormalized(sql, normalized), query_hash: hash('sha256', normalized).slice(0, 16) };
  remember(known, sql, identity);
  // A shape serves its other texts only if normalizing replaced its numbers (a variant normalizes the same).
  if (shape && normalized !== null && normalize(withOtherNumbers(sql, shape)) === normalized) remember(byShape, shape.key, identity);
  return identity;
}
