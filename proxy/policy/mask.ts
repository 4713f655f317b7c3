import type { MaskMode } from '../../src/events/policies.js';
import type { StatementAnalysis } from './analysis.js';
import { analyzeStatement, type AnalysisSession } from './analyze.js';
import { cloneTree, getAt, isObject, type Node, type Path } from './ast.js';
import { deparseStatement } from './deparse.js';
import type { HashKey } from './hash-key.js';
import { DEFAULT_SEARCH_PATH, qualified, searchPathOf } from './names.js';
import { parseOne } from './parser.js';
import { unqualifyBuiltinTypes } from './types.js';

/** One masked column reference to rewrite: the ColumnRef at `path` becomes the mask expression. */
export interface MaskEdit {
  /** `schema.table.column` as the policy names it. */
  readonly column: string;
  readonly mode: MaskMode;
  readonly path: Path;
  /** The reference as written. */
  readonly text: string;
}

export type MaskOutcome = { readonly ok: true; readonly sql: string } | { readonly ok: false; readonly why: string };

const str = (sval: string): Node => ({ A_Const: { sval: { sval } } });
const int = (ival: number): Node => ({ A_Const: { ival: { ival } } });
const asText = (arg: Node): Node => ({ TypeCast: { arg, typeName: { names: [{ String: { sval: 'text' } }], typemod: -1 } } });
const call = (name: string, args: Node[]): Node => ({
  FuncCall: { funcname: [{ String: { sval: 'pg_catalog' } }, { String: { sval: name } }], args, funcformat: 'COERCE_EXPLICIT_CALL' },
});

/**
 * The mask expression for a column reference, and where the reference sits inside it (null when
 * the value is dropped). Functions are pg_catalog-qualified so no schema on the search path can
 * stand in for them. `hash` is HMAC-SHA-256 under the project's key (hash-key.ts), without which
 * it cannot be made: `sha256(opad || sha256(ipad || convert_to(col::text, 'UTF8')))`, hex.
 */
export function maskExpression(mode: MaskMode, ref: Node, key: HashKey | undefined): { node: Node; inner: Path | null } {
  const arg = ['FuncCall', 'args', 0];
  const second = ['FuncCall', 'args', 1];
  switch (mode) {
    case 'redact':
      return { node: asText(str('[redacted]')), inner: null };
    case 'null':
      // CASE WHEN false THEN col END: NULL of the column's own type, so typed contexts still resolve.
      return { node: { CaseExpr: { args: [{ CaseWhen: { expr: { A_Const: { boolval: {} } }, result: ref } }] } }, inner: ['CaseExpr', 'args', 0, 'CaseWhen', 'result'] };
    case 'hash': {
      if (!key) throw new Error('a hash mask needs the project’s hash key');
      const pad = (hex: string) => call('decode', [str(hex), str('hex')]);
      const innerHash = call('sha256', [call('byteacat', [pad(key.inner), call('convert_to', [asText(ref), str('UTF8')])])]);
      return {
        node: call('encode', [call('sha256', [call('byteacat', [pad(key.outer), innerHash])]), str('hex')]),
        inner: [...arg, ...arg, ...second, ...arg, ...second, ...arg, 'TypeCast', 'arg'],
      };
    }
    case 'partial':
      return { node: call('concat', [call('substr', [asText(ref), int(1), int(1)]), str('***')]), inner: [...arg, ...arg, 'TypeCast', 'arg'] };
  }
}

/** `SELECT email` keeps its output name `email` after `email` becomes an expression. */
function keepOutputName(stmt: Node, path: Path, ref: Node): void {
  let slot = path;
  while (slot.length >= 2 && slot[slot.length - 2] === 'TypeCast' && slot[slot.length - 1] === 'arg') slot = slot.slice(0, -2);
  if (slot.length < 2 || slot[slot.length - 2] !== 'ResTarget' || slot[slot.length - 1] !== 'val') return;
  const target = getAt(stmt, slot.slice(0, -1));
  const fields = (ref.ColumnRef as { fields?: Node[] } | undefined)?.fields ?? [];
  const name = (fields[fields.length - 1]?.String as { sval?: string } | undefined)?.sval;
  if (isObject(target) && target.name === undefined && name !== undefined) target.name = name;
}

function treeKeyCount(value: Record<string, unknown>): number {
  let count = 0;
  for (const key of Object.keys(value)) if (key !== 'location') count++;
  return count;
}

/** Deep equality of two parse trees, ignoring source locations and key order. */
export function sameTree(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, index) => sameTree(item, b[index]));
  }
  if (!isObject(a) || !isObject(b)) return a === b;
  // Every key of `a` is a key of `b` with the same value, and `b` has no more keys.
  let count = 0;
  for (const key of Object.keys(a)) {
    if (key === 'location') continue;
    if (!Object.hasOwn(b, key) || !sameTree(a[key], b[key])) return false;
    count++;
  }
  return count === treeKeyCount(b);
}

/**
 * Deparses an edited tree and parses it back: the text must give back exactly that tree (locations
 * aside; built-in type names compared unqualified, which the deparser drops pg_catalog from).
 */
export function roundTrip(stmt: Node, session: AnalysisSession): { readonly ok: true; readonly sql: string; readonly reparsed: Node } | { readonly ok: false; readonly why: string } {
  let sql: string;
  try {
    sql = deparseStatement(stmt);
  } catch (error) {
    return { ok: false, why: `the rewrite does not deparse (${error instanceof Error ? error.message : String(error)})` };
  }
  const reparsed = parseOne(sql);
  if (!reparsed) return { ok: false, why: 'the rewritten statement does not parse back' };
  if (searchPathOf(session.searchPath ?? DEFAULT_SEARCH_PATH).catalogFirst) {
    unqualifyBuiltinTypes(reparsed);
    unqualifyBuiltinTypes(stmt);
  }
  if (!sameTree(reparsed, stmt)) return { ok: false, why: 'the rewritten statement does not parse back to the rewritten tree' };
  return { ok: true, sql, reparsed };
}

/**
 * Rewrites every masked reference at its source and makes the analysis's tree edits, deparses,
 * re-parses and re-analyzes: the round trip must give back exactly the edited tree, and the only
 * references to masked columns left must be the ones inside mask expressions. Anything else
 * refuses the statement.
 */
export function applyMasks(
  analysis: StatementAnalysis,
  edits: readonly MaskEdit[],
  masked: Readonly<Record<string, MaskMode>>,
  session: AnalysisSession = {},
  hashKey?: HashKey,
): MaskOutcome {
  if (edits.length > 0 && !searchPathOf(session.searchPath ?? DEFAULT_SEARCH_PATH).catalogFirst) {
    return { ok: false, why: 'the search_path puts a schema before pg_catalog, so the mask expression could be shadowed' };
  }
  const stmt = cloneTree(analysis.stmt);
  const expected = new Set<string>();
  for (const edit of edits) {
    const container = getAt(stmt, edit.path.slice(0, -1));
    const key = edit.path[edit.path.length - 1];
    if (!isObject(container) && !Array.isArray(container)) return { ok: false, why: `no node at the path of ${edit.text}` };
    const slot = container as Record<string | number, unknown>;
    const ref = slot[key as string | number];
    if (!isObject(ref) || !('ColumnRef' in ref)) return { ok: false, why: `${edit.text} is not a column reference node` };
    const { node, inner } = maskExpression(edit.mode, ref, hashKey);
    slot[key as string | number] = node;
    if (inner) expected.add(JSON.stringify([...edit.path, ...inner]));
    keepOutputName(stmt, edit.path, ref);
  }
  for (const edit of analysis.edits) {
    const node = getAt(stmt, edit.path);
    if (!isObject(node)) return { ok: false, why: `no node at the path of ${edit.what}` };
    const why = edit.apply(node);
    if (why !== undefined) return { ok: false, why };
  }
  const trip = roundTrip(stmt, session);
  if (!trip.ok) return trip;
  const { sql, reparsed } = trip;
  if (edits.length === 0) return { ok: true, sql };
  const again = analyzeStatement({ stmt: reparsed, sql, location: 0 }, session);
  const leaked = again.columns.find(
    (use) => !use.written && use.candidates.some((candidate) => masked[`${qualified(candidate.table)}.${candidate.column}`]) && !expected.has(JSON.stringify(use.path)),
  );
  if (leaked) return { ok: false, why: `${leaked.text} would still reach a masked column` };
  const maskedTables = new Set(Object.keys(masked).map((column) => column.slice(0, column.lastIndexOf('.'))));
  const whole = again.wholeRows.find((use) => use.tables.some((table) => maskedTables.has(qualified(table))));
  if (whole) return { ok: false, why: `${whole.text} would still show a masked table's whole row` };
  return { ok: true, sql };
}
