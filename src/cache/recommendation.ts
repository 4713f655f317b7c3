/**
 * The result cache's recommendation for a statement shape (docs/cache.md, "Rules and
 * recommendations"), a pure function of what the shape's entries showed.
 */

export type QueryType = 'read' | 'write' | 'other';
export type Recommendation = 'great' | 'good' | 'fair' | 'poor';

const WRITE_KINDS: ReadonlySet<string> = new Set(['insert', 'update', 'delete', 'merge', 'copy', 'truncate']);

/** A shape's query_type from its audit statement_kind. */
export function queryTypeOf(statementKind: string): QueryType {
  if (statementKind === 'select') return 'read';
  return WRITE_KINDS.has(statementKind) ? 'write' : 'other';
}

export interface ShapeFigures {
  readonly queryType: QueryType;
  readonly callCount: number;
  readonly avgLatencyMs: number;
  /** The share of refreshes that returned the same result, 0 to 1 (0 when there was none). */
  readonly stabilityRate: number;
  readonly refreshes: number;
}

/** Calls at which frequency counts fully (log scale: 10 calls are a third of it, 100 two thirds). */
const FULL_FREQUENCY_CALLS = 1000;
/** Mean latency at which the time saved counts fully (linear below). */
const FULL_LATENCY_MS = 50;

/**
 * score = 0.4·F + 0.3·L + 0.3·S, with F = min(1, log10(call_count) / 3), L = min(1,
 * avg_latency_ms / 50), S = stability_rate; great at 0.75 and above, good at 0.5, fair at 0.25,
 * poor below. A shape that is not a read, was called once, or was never refreshed (so its
 * stability is unknown) is poor.
 */
export function recommend(figures: ShapeFigures): { readonly score: number; readonly recommendation: Recommendation } {
  if (figures.queryType !== 'read' || figures.callCount < 2 || figures.refreshes === 0) return { score: 0, recommendation: 'poor' };
  const frequency = Math.min(1, Math.log10(figures.callCount) / Math.log10(FULL_FREQUENCY_CALLS));
  const latency = Math.min(1, figures.avgLatencyMs / FULL_LATENCY_MS);
  const score = 0.4 * frequency + 0.3 * latency + 0.3 * figures.stabilityRate;
  const recommendation = score >= 0.75 ? 'great' : score >= 0.5 ? 'good' : score >= 0.25 ? 'fair' : 'poor';
  return { score, recommendation };
}
