import { loadModule, normalizeSync, parseSync, type ParseResult } from '@libpg-query/parser';
import type { Node } from './ast.js';

/** Statements longer than this (UTF-8 bytes, the whole query string) are refused unparsed. */
export const MAX_SQL_BYTES = 64 * 1024;

/** One statement of a query string: its parse tree and its own slice of the text. */
export interface ParsedStatement {
  readonly stmt: Node;
  readonly sql: string;
  /** Byte offset of the statement in the query string. */
  readonly location: number;
}

export type ParseFailure =
  | { readonly ok: false; readonly reason: 'too_large'; readonly bytes: number }
  | { readonly ok: false; readonly reason: 'error'; readonly message: string; readonly position: number | null };

export type ParseOutcome = { readonly ok: true; readonly version: number; readonly statements: readonly ParsedStatement[] } | ParseFailure;

let loaded = false;

/** Loads the PostgreSQL 17 grammar (WASM) once; every other function here is synchronous and needs it. */
export async function loadParser(): Promise<void> {
  await loadModule();
  loaded = true;
}

function requireLoaded(): void {
  if (!loaded) throw new Error('the SQL parser is not loaded: await loadParser() at start');
}

/**
 * Splits and parses a simple-query string with the real grammar. Offsets from the parser are
 * UTF-8 byte offsets, so statement text is sliced from the encoded bytes, never from JS indexes.
 */
export function parseStatements(sql: string): ParseOutcome {
  requireLoaded();
  const bytes = Buffer.from(sql, 'utf8');
  if (bytes.length > MAX_SQL_BYTES) return { ok: false, reason: 'too_large', bytes: bytes.length };
  // The grammar reads a C string: text after a NUL would be invisible to it but not to every client path.
  const nul = bytes.indexOf(0);
  if (nul >= 0) return { ok: false, reason: 'error', message: 'the statement contains a NUL byte', position: nul };
  if (sql.trim() === '') return { ok: true, version: 0, statements: [] };
  let result: ParseResult;
  try {
    result = parseSync(sql);
  } catch (error) {
    return { ok: false, reason: 'error', ...describeError(error) };
  }
  const statements = (result.stmts ?? []).map((raw): ParsedStatement => {
    const location = raw.stmt_location ?? 0;
    const end = raw.stmt_len ? location + raw.stmt_len : bytes.length;
    return { stmt: raw.stmt as unknown as Node, sql: bytes.subarray(location, end).toString('utf8').trim(), location };
  });
  return { ok: true, version: result.version ?? 0, statements };
}

function describeError(error: unknown): { message: string; position: number | null } {
  if (error instanceof Error) {
    const details = (error as Error & { sqlDetails?: { cursorPosition?: number } }).sqlDetails;
    return { message: error.message, position: details?.cursorPosition ?? null };
  }
  return { message: String(error), position: null };
}

/** libpg_query's normalization for audit `normalized_sql`: literals become `$N`. Null when the text does not parse. */
export function normalize(sql: string): string | null {
  requireLoaded();
  try {
    return normalizeSync(sql);
  } catch {
    return null;
  }
}

/** Parses text that must hold exactly one statement (used to re-parse a masked rewrite). */
export function parseOne(sql: string): Node | null {
  const outcome = parseStatements(sql);
  return outcome.ok && outcome.statements.length === 1 ? (outcome.statements[0]?.stmt ?? null) : null;
}
