import { Deparser, QuoteUtils } from 'pgsql-deparser';

type CteFields = Parameters<Deparser['CommonTableExpr']>[0];
type CallFields = Parameters<Deparser['FuncCall']>[0];
type IndirectionFields = Parameters<Deparser['A_Indirection']>[0];
type Context = Parameters<Deparser['CommonTableExpr']>[1];

/**
 * Functions pgsql-deparser writes in their SQL syntax whatever the call's form, with its name as
 * it writes it: `pg_catalog.timezone(z, t)` as `t AT TIME ZONE z`, which parses back as another
 * tree (funcformat COERCE_SQL_SYNTAX), so a vetted `timezone('UTC', now())`, qualified before it
 * is forwarded, was refused.
 */
const SYNTAX_ALWAYS: ReadonlyMap<string, number> = new Map([
  ['pg_catalog.timezone', 2],
  ['pg_catalog.overlaps', 4],
]);

/** A function name no catalog has, written in place of one of SYNTAX_ALWAYS's to have the call written as a call. */
const AS_CALL = 'pgward_as_call';

const columnList = (items: unknown): string =>
  (Array.isArray(items) ? items : []).map((item) => QuoteUtils.quoteIdentifier((item as { String?: { sval?: string } }).String?.sval ?? '')).join(', ');

/**
 * pgsql-deparser with what it leaves out and the policy's rewrites keep: a recursive CTE's
 * SEARCH and CYCLE clauses. Every rewrite is parsed again and compared with the tree it was
 * made from, so an omission here refuses the statement rather than changing it.
 */
class PolicyDeparser extends Deparser {
  /** A subscript or field of any expression reads it in parentheses: the base deparser leaves them out for `(ARRAY[a, b])[1]`, which does not parse without. */
  override A_Indirection(node: IndirectionFields, context: Context): string {
    const written = super.A_Indirection(node, context);
    if (!node.arg) return written;
    const arg = this.visit(node.arg, context);
    return written.startsWith(`(${arg})`) ? written : `(${arg})${written.slice(arg.length)}`;
  }

  override FuncCall(node: CallFields, context: Context): string {
    const parts = (node.funcname ?? []).map((part) => (part as { String?: { sval?: string } }).String?.sval ?? '');
    const name = parts.join('.');
    const args = node.args ?? [];
    // `ts AT LOCAL`, which the base deparser writes as the call pg_catalog.timezone(ts).
    if (name === 'pg_catalog.timezone' && args.length === 1 && node.funcformat === 'COERCE_SQL_SYNTAX') return `((${this.visit(args[0]!, context)}) AT LOCAL)`;
    if (SYNTAX_ALWAYS.get(name) !== args.length) return super.FuncCall(node, context);
    if (node.funcformat === 'COERCE_SQL_SYNTAX') {
      // Each operand in parentheses: the base deparser leaves out those a zone like 'a' || 'b' needs.
      if (name === 'pg_catalog.timezone') return `((${this.visit(args[1]!, context)}) AT TIME ZONE (${this.visit(args[0]!, context)}))`;
      return super.FuncCall(node, context);
    }
    const written = QuoteUtils.quoteDottedName(['pg_catalog', AS_CALL]);
    const call = super.FuncCall({ ...node, funcname: [{ String: { sval: 'pg_catalog' } }, { String: { sval: AS_CALL } }] }, context);
    return `${QuoteUtils.quoteDottedName(parts)}${call.slice(written.length)}`;
  }

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
