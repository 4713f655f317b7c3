/**
 * The statement text an audit entry keeps. Entries hold at most AUDIT_SQL_MAX characters, and a
 * plain cut would keep only what comes first: a long leading comment would push the statement
 * itself out of the record. A text that does not fit is written again from its parse tree (what
 * PostgreSQL runs: no comments, no layout); if that still does not fit, its middle goes. A marker
 * says what was changed and gives the SHA-256 of the whole text as sent, so the record shows
 * what ran and names the exact text.
 */
import { hash } from 'node:crypto';
import { AUDIT_SQL_MAX } from '../src/events/audit.js';
import { deparseStatements } from './policy/parser.js';

/** The marker standing for what an abridged text left out. */
function marker(sql: string, omitted: string): string {
  return ` /* pgward: ${omitted}; sha256 of the whole text: ${hash('sha256', sql)} */ `;
}

/** `text` cut to `length` UTF-16 units at most, never between the halves of a surrogate pair. */
function head(text: string, length: number): string {
  const end = Math.max(0, length);
  return /[\uD800-\uDBFF]/.test(text.charAt(end - 1)) ? text.slice(0, end - 1) : text.slice(0, end);
}

function tail(text: string, length: number): string {
  const start = text.length - Math.max(0, length);
  return /[\uDC00-\uDFFF]/.test(text.charAt(start)) ? text.slice(start + 1) : text.slice(start);
}

const utf8Bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

const CAPACITY = 256;
/** Texts too long to keep whole, as kept: a long statement an agent repeats is written again once. */
const kept = new Map<string, string>();

/**
 * The text as an audit entry keeps it (at most `max` characters): the text itself when it fits;
 * else its statements written again from the parse tree, and if that is still too long (or the
 * text does not parse) the head and tail of it around a marker. Whatever was changed, the marker
 * carries the SHA-256 of the text as sent.
 */
export function auditSql(sql: string, max = AUDIT_SQL_MAX): string {
  if (sql.length <= max) return sql;
  const known = kept.get(sql);
  if (known !== undefined) return known;
  const abridged = abridge(sql, max);
  kept.set(sql, abridged);
  if (kept.size > CAPACITY) kept.delete(kept.keys().next().value as string);
  return abridged;
}

function abridge(sql: string, max: number): string {
  const bare = deparseStatements(sql) ?? sql;
  if (bare !== sql) {
    const note = marker(sql, `written from its parse tree, without comments or layout; ${utf8Bytes(sql)} bytes as sent`).trimEnd();
    if (bare.length + note.length <= max) return bare + note;
  }
  // The marker's length depends on the count it states; a count of the same number of digits fits the same budget.
  const probe = marker(sql, `${utf8Bytes(sql)} of ${utf8Bytes(sql)} bytes left out here`);
  const room = max - probe.length;
  const first = head(bare, Math.ceil(room / 2));
  const last = tail(bare, Math.floor(room / 2));
  const omitted = utf8Bytes(bare) - utf8Bytes(first) - utf8Bytes(last);
  return `${first.trimEnd()}${marker(sql, `${omitted} of ${utf8Bytes(bare)} bytes left out here`)}${last.trimStart()}`;
}
