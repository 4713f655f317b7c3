import { Deparser, QuoteUtils } from 'pgsql-deparser';

type CteFields = Parameters<Deparser['CommonTableExpr']>[0];
type Context = Parameters<Deparser['CommonTableExpr']>[1];

const columnList = (items: unknown): string =>
  (Array.isArray(items) ? items : []).map((item) => QuoteUtils.quoteIdentifier((item as { String?: { sval?: string } }).String?.sval ?? '')).join(', ');

/**
 * pgsql-deparser with what it leaves out and the policy's rewrites keep: a recursive CTE's
 * SEARCH and CYCLE clauses. Every rewrite is parsed again and compared with the tree it was
 * made from, so an omission here refuses the statement rather than changing it.
 */
class PolicyDeparser extends Deparser {
  override CommonTableExpr(node: CteFields, context: Context): string {
    const parts = [super.CommonTableExpr(node, context)];
    const search = node.search_clause;
    if (search) {
      parts.push(`SEARCH ${search.search_breadth_first ? 'BREADTH' : 'DEPTH'} FIRST BY ${columnList(search.search_col_list)} SET ${QuoteUtils.quoteIdentifier(search.search_seq_column ?? '')}`);
    }
    const cycle = node.cycle_clause;
    if (cycle) {
      const mark = cycle.cycle_mark_value && cycle.cycle_mark_default ? ` TO ${this.visit(cycle.cycle_mark_value, context)} DEFAULT ${this.visit(cycle.cycle_mark_default, context)}` : '';
      parts.push(`CYCLE ${columnList(cycle.cycle_col_list)} SET ${QuoteUtils.quoteIdentifier(cycle.cycle_mark_column ?? '')}${mark} USING ${QuoteUtils.quoteIdentifier(cycle.cycle_path_column ?? '')}`);
    }
    return parts.join(' ');
  }
}

/** One statement's tree as SQL text. */
export function deparseStatement(stmt: Record<string, unknown>): string {
  return new PolicyDeparser(stmt as ConstructorParameters<typeof Deparser>[0], { pretty: false }).deparseQuery();
}
