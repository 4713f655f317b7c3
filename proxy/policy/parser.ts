import { loadModule, normalizeSync, parseSync, type ParseResult } from '@libpg-query/parser';
import { deparseSync } from 'pgsql-deparser';
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

/**
 * Parse trees nested deeper than this (objects and arrays of the tree's JSON) are refused: the
 * analyzer, the mask rewrite and normalization walk trees recursively, and a few thousand levels
 * exhaust their stack. Ordinary statements stay under 100; 1,000 is 300-odd terms of `a || b || ...`,
 * 140 nested subqueries or CASEs, 480 nested ARRAY[...]. Long AND/OR chains, IN lists and UNIONs
 * are flat in the tree, and bounded by MAX_SQL_BYTES.
 */
export const MAX_TREE_DEPTH = 1_000;

/**
 * Parse trees with more nodes than this (objects and arrays of the tree's JSON) are refused: every
 * walk of the analysis, the mask rewrite and the decision is linear in them, and under 64 KB a flat
 * statement reaches 110,000 (a select list of 15,000 bare names). 40,000 keeps one decision on any
 * statement within about 50 ms of CPU (docs/policy.md); a 300-table join is about 13,000, 300 CTEs
 * about 17,000, an IN list of 10,000 numbers 30,000, 2,500 ANDed comparisons 33,000.
 */
export const MAX_TREE_NODES = 40_000;

export type ParseFailure =
  | { readonly ok: false; readonly reason: 'too_large'; readonly bytes: number }
  | {
      readonly ok: false;
      readonly reason: 'too_complex';
      /** Completes "the statement ...". */
      readonly what: string;
      /** What to do instead, when not the default advice for nesting (decideParseFailure). */
      readonly instead?: string;
    }
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
    const described = describeError(error);
    // The grammar's own stack (10,000 levels) ran out: too deep, not malformed.
    if (described.message.startsWith('memory exhausted')) return tooComplex('is nested too deeply for the SQL grammar');
    return { ok: false, reason: 'error', ...described };
  }
  const size = measureTree(result.stmts ?? [], MAX_TREE_DEPTH, MAX_TREE_NODES);
  if (size.depth > MAX_TREE_DEPTH) return tooComplex(`is nested more than ${MAX_TREE_DEPTH} levels deep`);
  if (size.nodes > MAX_TREE_NODES) return tooComplex(`has more than ${MAX_TREE_NODES} parse tree nodes`, SPLIT_LARGE);
  const statements = (result.stmts ?? []).map((raw): ParsedStatement => {
    const location = raw.stmt_location ?? 0;
    const end = raw.stmt_len ? location + raw.stmt_len : bytes.length;
    return { stmt: raw.stmt as unknown as Node, sql: bytes.subarray(location, end).toString('utf8').trim(), location };
  });
  return { ok: true, version: result.version ?? 0, statements };
}

/** The advice for a statement too large (rather than too deep) to analyze. */
export const SPLIT_LARGE = 'Split it into several smaller statements: fewer FROM items, CTEs, UNION branches or select-list entries per statement.';

/** A refusal of a statement too deep or too large to analyze: `what` completes "the statement ...". */
export function tooComplex(what: string, instead?: string): ParseFailure {
  return instead === undefined ? { ok: false, reason: 'too_complex', what } : { ok: false, reason: 'too_complex', what, instead };
}

/** The nesting depth of a JSON value, walked without recursion; stops counting once past `limit`. */
export function treeDepth(root: unknown, limit: number): number {
  return measureTree(root, limit, Infinity).depth;
}

/**
 * The nesting depth and the number of objects and arrays of a JSON value, walked without
 * recursion; stops once past either limit (the counts are then only known to exceed it).
 */
export function measureTree(root: unknown, depthLimit: number, nodeLimit: number): { depth: number; nodes: number } {
  let deepest = 0;
  let nodes = 0;
  const stack: { value: unknown; depth: number }[] = [{ value: root, depth: 0 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top.depth > deepest) deepest = top.depth;
    if (typeof top.value === 'object' && top.value !== null) nodes++;
    if (deepest > depthLimit || nodes > nodeLimit) return { depth: deepest, nodes };
    const { value, depth } = top;
    if (Array.isArray(value)) for (const item of value) if (typeof item === 'object' && item !== null) stack.push({ value: item, depth: depth + 1 });
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      for (const key in value) {
        const item = (value as Record<string, unknown>)[key];
        if (typeof item === 'object' && item !== null) stack.push({ value: item, depth: depth + 1 });
      }
    }
  }
  return { depth: deepest, nodes };
}

/** Whether an error is the JavaScript stack running out (a walk too deep), which the gateway answers as too complex. */
export function isStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && /call stack/i.test(error.message);
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

/**
 * The statements of a query string written again from their parse trees: what PostgreSQL runs,
 * without comments or layout. Null when the text does not parse or a tree does not deparse.
 */
export function deparseStatements(sql: string): string | null {
  const parsed = parseStatements(sql);
  if (!parsed.ok) return null;
  try {
    return parsed.statements.map((statement) => deparseSync(statement.stmt as Parameters<typeof deparseSync>[0], { pretty: false })).join('; ');
  } catch {
    return null;
  }
}
