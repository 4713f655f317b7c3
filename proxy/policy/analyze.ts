import { BindingBudgetExceeded, Collector, MAX_BINDING_STEPS, type StatementAnalysis } from './analysis.js';
import { nodeType, type At } from './ast.js';
import type { Ctx, QueryOptions } from './context.js';
import { sweep } from './coverage.js';
import { dmlStatement } from './dml.js';
import { DEFAULT_SEARCH_PATH, searchPathOf } from './names.js';
import { parseStatements, tooComplex, type ParsedStatement, type ParseFailure } from './parser.js';
import { selectQuery } from './queries.js';
import type { Level } from './scope.js';
import type { UpstreamCatalog } from './upstream-catalog.js';
import { statement, statementShape } from './statements.js';

export interface AnalysisSession {
  /** The session's search_path as a list of schema names; default `public` (DEFAULT_SEARCH_PATH). */
  readonly searchPath?: readonly string[];
  /** The upstream database's catalog, when the proxy has read it; undefined means nothing is known of it. */
  readonly catalog?: UpstreamCatalog;
}

function query(ctx: Ctx, parent: Level | null, at: At, options: QueryOptions = { observable: true }): void {
  const type = nodeType(at.node);
  if (type === 'SelectStmt') selectQuery(ctx, parent, at, options);
  else if (type === 'InsertStmt' || type === 'UpdateStmt' || type === 'DeleteStmt') dmlStatement(ctx, parent, at);
  else ctx.out.unsupportedConstruct(type || 'empty query');
}

/**
 * Analyzes one parsed statement without any policy: what it is, what it does, which relations,
 * functions and base columns it may touch. Pure and deterministic; the result depends only on
 * the statement, the search path and the upstream catalog, so it can be cached by exact text,
 * search path and catalog version.
 */
export function analyzeStatement(parsed: ParsedStatement, session: AnalysisSession = {}): StatementAnalysis {
  const out = new Collector(searchPathOf(session.searchPath ?? DEFAULT_SEARCH_PATH), session.catalog);
  const ctx: Ctx = { out, rewritable: true, query };
  statement(ctx, { node: parsed.stmt, slot: null });
  const literals = sweep(parsed.stmt, out);
  const shape = statementShape(nodeType(parsed.stmt));
  return {
    kind: shape.kind,
    ddl: shape.ddl,
    sql: parsed.sql,
    stmt: parsed.stmt,
    effects: out.effects,
    unsupported: out.unsupported,
    functions: out.functions,
    relations: out.relations,
    columns: out.columns,
    wholeRows: out.wholeRows,
    literals,
    edits: out.edits,
    sessionChanges: out.sessionChanges,
    expansions: out.expansions,
  };
}

export type SqlAnalysis = { readonly ok: true; readonly statements: readonly StatementAnalysis[] } | ParseFailure;

/** Parses a query string and analyzes each of its statements; one that needs too much work refuses the string as too complex. */
export function analyzeSql(sql: string, session: AnalysisSession = {}): SqlAnalysis {
  const parsed = parseStatements(sql);
  if (!parsed.ok) return parsed;
  try {
    return { ok: true, statements: parsed.statements.map((statement) => analyzeStatement(statement, session)) };
  } catch (error) {
    const failure = budgetFailure(error);
    if (failure) return failure;
    throw error;
  }
}

/** The too-complex refusal for an analysis stopped by its work budget, or undefined for any other error. */
export function budgetFailure(error: unknown): ParseFailure | undefined {
  if (!(error instanceof BindingBudgetExceeded)) return undefined;
  return tooComplex(
    `needs more than ${MAX_BINDING_STEPS} steps to bind its column names (column references times the FROM items in scope)`,
    'Split it into several smaller statements: fewer FROM items or CTEs per query, fewer column references, no long lists of subqueries over a wide FROM list.',
  );
}
