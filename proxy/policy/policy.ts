import { analyzeSql, budgetFailure, type AnalysisSession } from './analyze.js';
import type { AnalysisCache } from './cache.js';
import { decideParseFailure, decidePolicy, type PolicyDecision } from './decide.js';
import { isStackOverflow, tooComplex } from './parser.js';
import type { PolicyRules } from './rules.js';

export interface StatementVerdict {
  /** The statement's own text, or the whole query string when it did not parse. */
  readonly sql: string;
  readonly decision: PolicyDecision;
}

/**
 * Parses a simple-query string, splits it into statements and decides each one. Statements are
 * decided independently; a failure to parse refuses the whole string as one verdict.
 */
export function decideSql(sql: string, policy: PolicyRules, session: AnalysisSession = {}, cache?: AnalysisCache): StatementVerdict[] {
  try {
    const analyzed = cache ? cache.analyze(sql, session) : analyzeSql(sql, session);
    if (!analyzed.ok) return [{ sql, decision: decideParseFailure(analyzed) }];
    return analyzed.statements.map((analysis) => ({ sql: analysis.sql, decision: decidePolicy(analysis, policy, session) }));
  } catch (error) {
    // MAX_TREE_DEPTH keeps trees well inside the stack; this holds if some walk still runs out of it.
    if (isStackOverflow(error)) return [{ sql, decision: decideParseFailure(tooComplex('is too complex for the policy analyzer')) }];
    // The mask rewrite's re-analysis spends a budget of its own.
    const failure = budgetFailure(error);
    if (failure) return [{ sql, decision: decideParseFailure(failure) }];
    throw error;
  }
}
