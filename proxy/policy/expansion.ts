import type { ColumnName, StatementAnalysis } from './analysis.js';
import { analyzeStatement, type AnalysisSession } from './analyze.js';
import { cloneTree, getAt, isObject, type Node, type Path } from './ast.js';
import { roundTrip } from './mask.js';
import { qualified, type RelationName } from './names.js';
import { INSUFFICIENT_PRIVILEGE, maskedColumnsOf, type PolicyRules, type Refusal } from './rules.js';
import type { StarListing } from './star.js';

/**
 * A construct that reaches a table's columns by position or all at once, and how to write it with
 * each column named instead. The analyzer records these whatever the policy; a statement is
 * expanded only when one covers a table with masked columns. The named form is then analyzed
 * again, so masks follow names, never positions, and no path recorded before the expansion is used
 * after it.
 */
export type Expansion =
  /** A select-list `*` or `q.*` (path: its ResTarget in the list). */
  | { readonly kind: 'star'; readonly path: Path; readonly text: string; readonly tables: readonly RelationName[]; readonly listing: StarListing }
  /** NATURAL JOIN of sides whose columns are known (path: the JoinExpr): becomes JOIN ... USING (its common columns). */
  | {
      readonly kind: 'natural';
      readonly path: Path;
      readonly text: string;
      readonly tables: readonly RelationName[];
      /** The common column names, in the left side's order. */
      readonly using: readonly string[];
      /** The table columns they may denote: compared raw, so none may be masked. */
      readonly compared: readonly ColumnName[];
    }
  /** `t AS a(x, y)` over a table whose columns are known (path: the FROM item): becomes a subquery naming each column. */
  | { readonly kind: 'alias'; readonly path: Path; readonly text: string; readonly tables: readonly RelationName[]; readonly columns: readonly string[] };

/**
 * Columns a statement's stars may be written out into, which bounds the rewrite's size before it
 * is built (a select list holds at most 1,664 columns in PostgreSQL, and the rewritten text must
 * still parse within the 64 KB limit).
 */
const MAX_WRITTEN_COLUMNS = 4_000;

const refuse = (rule: string, reason: string): Refusal => ({ rule, reason, sqlstate: INSUFFICIENT_PRIVILEGE });

const str = (sval: string): Node => ({ String: { sval } });
const columnRef = (fields: readonly string[], star = false): Node => ({ ColumnRef: { fields: [...fields.map(str), ...(star ? [{ A_Star: {} }] : [])] } });
const target = (val: Node): Node => ({ ResTarget: { val } });

/** Whether `a` sorts after `b`, comparing list indexes as numbers: later siblings first, so a splice moves no path still to be used. */
function later(a: Path, b: Path): number {
  for (let index = 0; index < Math.min(a.length, b.length); index++) {
    const x = a[index];
    const y = b[index];
    if (x === y) continue;
    return typeof x === 'number' && typeof y === 'number' ? y - x : String(y).localeCompare(String(x));
  }
  return b.length - a.length;
}

/**
 * The statement as it must run under `policy` when a `*`, NATURAL JOIN or column alias list
 * covers a masked table: expanded and analyzed again. Unchanged when none does; a refusal when one
 * cannot be expanded, or the expansion does not round-trip.
 */
export function expandForMasks(analysis: StatementAnalysis, policy: PolicyRules, session: AnalysisSession): StatementAnalysis | Refusal {
  const masked = (tables: readonly RelationName[]): string | undefined => tables.flatMap((table) => maskedColumnsOf(policy, table))[0];
  const needed = analysis.expansions.filter((expansion) => masked(expansion.tables) !== undefined);
  if (needed.length === 0) return analysis;
  const written = needed.reduce((sum, expansion) => sum + (expansion.kind === 'star' && typeof expansion.listing !== 'string' ? expansion.listing.reduce((n, piece) => n + (piece.columns?.length ?? 1), 0) : 0), 0);
  if (written > MAX_WRITTEN_COLUMNS) {
    return {
      rule: 'masked_columns.whole_row',
      sqlstate: '54001',
      reason: `written out, the statement's * would list ${written} columns, more than the ${MAX_WRITTEN_COLUMNS} the gateway writes out (rule masked_columns.whole_row); list the columns you need instead of *.`,
    };
  }
  const stmt = cloneTree(analysis.stmt);
  for (const expansion of [...needed].sort((a, b) => later(a.path, b.path))) {
    const refusal = expand(stmt, expansion, policy, masked);
    if (refusal) return refusal;
  }
  const trip = roundTrip(stmt, session);
  if (!trip.ok) {
    return refuse('masked_columns.rewrite_failed', `masked columns could not be rewritten safely: ${trip.why} (rule masked_columns.rewrite_failed). List the columns you need instead of ${needed[0]?.text ?? '*'}.`);
  }
  return analyzeStatement({ stmt: trip.reparsed, sql: trip.sql, location: 0 }, session);
}

function expand(stmt: Node, expansion: Expansion, policy: PolicyRules, masked: (tables: readonly RelationName[]) => string | undefined): Refusal | undefined {
  const parent = getAt(stmt, expansion.path.slice(0, -1));
  const key = expansion.path[expansion.path.length - 1];
  const node = getAt(stmt, expansion.path);
  const lost = refuse('masked_columns.rewrite_failed', `masked columns could not be rewritten safely: no node at ${expansion.text} (rule masked_columns.rewrite_failed).`);
  if (!isObject(node) || key === undefined || (!isObject(parent) && !Array.isArray(parent))) return lost;
  switch (expansion.kind) {
    case 'star':
      return Array.isArray(parent) && typeof key === 'number' ? star(parent, key, expansion, masked) : lost;
    case 'natural': {
      if (!isObject(node.JoinExpr)) return lost;
      const compared = expansion.compared.find((column) => policy.masked_columns[`${qualified(column.table)}.${column.column}`]);
      if (compared) {
        const name = `${qualified(compared.table)}.${compared.column}`;
        return refuse('masked_columns.unmaskable', `NATURAL JOIN compares masked column ${name}, where no mask can be applied (rule masked_columns.unmaskable); join with ON on the columns you need.`);
      }
      const join = node.JoinExpr;
      delete join.isNatural;
      if (expansion.using.length > 0) join.usingClause = expansion.using.map(str);
      else join.quals = { A_Const: { boolval: { boolval: true } } };
      return undefined;
    }
    case 'alias': {
      const subquery = aliasSubquery(node, expansion.columns);
      if (!subquery) return lost;
      (parent as Record<string | number, unknown>)[key] = subquery;
      return undefined;
    }
  }
}

function star(list: unknown[], index: number, expansion: Extract<Expansion, { kind: 'star' }>, masked: (tables: readonly RelationName[]) => string | undefined): Refusal | undefined {
  const cannot = (why: string): Refusal =>
    refuse(
      'masked_columns.whole_row',
      `${expansion.text} would expose masked column ${masked(expansion.tables) ?? ''} and the gateway cannot list the columns it stands for: ${why} (rule masked_columns.whole_row); list the columns you need instead of ${expansion.text}.`,
    );
  if (typeof expansion.listing === 'string') return cannot(expansion.listing);
  const targets: Node[] = [];
  // Columns wherever they are known: a `q.*` left in place binds, for the analysis, to every FROM item named q at every level.
  for (const piece of expansion.listing) {
    if (piece.columns) targets.push(...piece.columns.map((fields) => target(columnRef(fields))));
    else if (piece.star && masked(piece.tables) === undefined) targets.push(target(columnRef(piece.star, true)));
    else return cannot(piece.unknown ?? 'its columns are not known');
  }
  list.splice(index, 1, ...targets);
  return undefined;
}

/**
 * `customers AS c(i, n)` as `(SELECT id, name, email, ... FROM customers) AS c(i, n)`: the alias
 * list then renames columns the subquery names, so a mask applies to the column it names even if
 * the table's columns were reordered since the catalog was read.
 */
function aliasSubquery(item: Node, columns: readonly string[]): Node | undefined {
  const inner = cloneTree(item);
  const sampled = inner.RangeTableSample;
  const relation = (isObject(sampled) && isObject(sampled.relation) ? sampled.relation : inner).RangeVar;
  if (!isObject(relation)) return undefined;
  const alias = relation.alias;
  delete relation.alias;
  // Qualified, so that a column the table no longer has cannot bind to an enclosing query's.
  const qualifier = [relation.schemaname, relation.relname].filter((part): part is string => typeof part === 'string');
  const targetList = columns.map((column) => target(columnRef([...qualifier, column])));
  const subquery = { SelectStmt: { targetList, fromClause: [inner], limitOption: 'LIMIT_OPTION_DEFAULT', op: 'SETOP_NONE' } };
  return { RangeSubselect: { subquery, alias } };
}
