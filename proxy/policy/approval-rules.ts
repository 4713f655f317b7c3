/**
 * Whether a policy's `approval` rules hold a statement for a human decision, and why. Pure. The
 * rules only add holds: they are consulted for statements the policy already allows, and an
 * auto-approve ceiling lifts only the holds of a write whose rows the gateway can count.
 */
import type { ApprovalRule } from '../../src/events/policies.js';
import { descendants } from './inheritance.js';
import { qualified } from './names.js';
import { listNames } from './rules.js';
import type { UpstreamCatalog } from './upstream-catalog.js';
import type { WriteShape } from './write-guard.js';
import { writeReach } from './reach.js';

/** What the rules read of an allowed statement (one client message). */
export interface HoldFacts {
  /** Every kind the message runs (kinds.ts): a writable CTE is also a delete, EXPLAIN ANALYZE of an UPDATE also an update. */
  readonly kinds: readonly string[];
  /** Tables it writes, `schema.table`. */
  readonly tablesWritten: readonly string[];
  readonly writes: WriteShape;
  /** Rows it is estimated to affect; null when not estimated (or not estimable). */
  readonly estimatedRows: number | null;
  /**
   * Relations it writes through which rows of other tables change (views, partitioned and foreign
   * tables) and children of tables the rules name, when the rules name tables (heldThrough).
   */
  readonly writesThrough?: readonly string[];
}

export type HoldRule = 'approval.held_kind' | 'approval.held_table' | 'approval.row_threshold';

export type HoldDecision =
  | { readonly held: false; readonly autoApproved?: { readonly cap: number; readonly tables: readonly string[] } }
  | { readonly held: true; readonly rule: HoldRule; readonly reason: string; readonly through?: readonly string[] };

const NOT_HELD: HoldDecision = { held: false };

function relation(table: string): { schema: string; name: string } {
  const dot = table.indexOf('.');
  return { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

/** Whether it writes anything the row threshold and table rules speak of: rows, or a schema change. */
function writes(facts: HoldFacts): boolean {
  return facts.writes.rows !== 'none' || facts.writes.ddl || facts.tablesWritten.length > 0;
}

/** Whether an estimate is needed to decide: only for a row threshold or an auto-approve ceiling, and only for a counted write. */
export function needsEstimate(rule: ApprovalRule | undefined, facts: Omit<HoldFacts, 'estimatedRows'>): boolean {
  if (!rule || facts.writes.rows !== 'counted') return false;
  return rule.row_threshold !== null || Object.keys(rule.auto_approve ?? {}).length > 0;
}

/** The holds the rules put on the statement, first the kinds, then the tables, then the threshold. */
function holds(rule: ApprovalRule, facts: HoldFacts): { rule: HoldRule; reason: string }[] {
  const found: { rule: HoldRule; reason: string }[] = [];
  const kinds = facts.kinds.filter((kind) => rule.held_kinds.includes(kind));
  if (kinds.length > 0) found.push({ rule: 'approval.held_kind', reason: `it runs a statement of kind ${kinds.join(', ')}, which this credential's policy holds for approval` });
  const tables = facts.tablesWritten.filter((table) => listNames(rule.tables ?? [], relation(table)));
  if (tables.length > 0) found.push({ rule: 'approval.held_table', reason: `it writes ${tables.join(', ')}, whose writes this credential's policy holds for approval` });
  const through = facts.writesThrough ?? [];
  if (through.length > 0) {
    found.push({ rule: 'approval.held_table', reason: `it writes ${through.join(', ')}, a view, partitioned or foreign table, inheritance child or partition, or a table with a cascading foreign key, trigger or rule, through which writes may reach tables whose writes this credential's policy holds for approval` });
  }
  if (rule.row_threshold !== null && writes(facts)) {
    const threshold = rule.row_threshold;
    if (facts.writes.rows !== 'counted') {
      const what = facts.writes.rows === 'uncounted' ? facts.writes.what : 'a schema change';
      found.push({ rule: 'approval.row_threshold', reason: `the rows ${what} affects cannot be counted, and this credential's policy holds writes of more than ${threshold} rows` });
    } else if (facts.estimatedRows === null) {
      found.push({ rule: 'approval.row_threshold', reason: `its rows could not be estimated, and this credential's policy holds writes of more than ${threshold} rows` });
    } else if (facts.estimatedRows > threshold) {
      found.push({ rule: 'approval.row_threshold', reason: `it is estimated to affect ${facts.estimatedRows} rows, more than the ${threshold} this credential's policy lets run without approval` });
    }
  }
  return found;
}

/**
 * The ceiling under which every table the statement writes is auto-approved: only a counted write
 * (one INSERT, UPDATE or DELETE) that changes no schema, with an estimate, each written table listed.
 */
function autoApproval(rule: ApprovalRule, facts: HoldFacts): { cap: number; tables: readonly string[] } | undefined {
  const ceilings = rule.auto_approve ?? {};
  if (facts.writes.rows !== 'counted' || facts.writes.ddl || facts.kinds.includes('ddl') || facts.estimatedRows === null || facts.tablesWritten.length === 0) return undefined;
  if ((facts.writesThrough ?? []).length > 0) return undefined;
  let cap = Number.POSITIVE_INFINITY;
  for (const table of facts.tablesWritten) {
    const ceiling = Object.hasOwn(ceilings, table) ? ceilings[table] : undefined;
    if (!ceiling) return undefined;
    cap = Math.min(cap, ceiling.max_rows);
  }
  return facts.estimatedRows <= cap ? { cap, tables: facts.tablesWritten } : undefined;
}

/**
 * Held or not, and why. An auto-approved write is not held, and runs under its ceiling as a cap
 * (`autoApproved.cap`): the estimate is an estimate, the count at run time decides.
 */
export function holdOf(rule: ApprovalRule | undefined, facts: HoldFacts): HoldDecision {
  if (!rule) return NOT_HELD;
  const found = holds(rule, facts);
  const first = found[0];
  if (!first) return NOT_HELD;
  const auto = autoApproval(rule, facts);
  if (auto) return { held: false, autoApproved: auto };
  const through = facts.writesThrough ?? [];
  return { held: true, rule: first.rule, reason: `${found.map((hold) => hold.reason).join('; ')} (rule ${first.rule})`, ...(through.length > 0 ? { through } : {}) };
}

/**
 * For a counted write the rules hold before any estimate: the most rows an estimate may show for it
 * to run unheld (under the row threshold, or within auto-approve ceilings); null when no estimate
 * lifts its hold. Holding grows with the estimate (a threshold holds more rows, a ceiling lifts
 * fewer), so the answer is the last unheld count of a binary search.
 */
export function unheldUpTo(rule: ApprovalRule | undefined, facts: Omit<HoldFacts, 'estimatedRows'>): number | null {
  const held = (rows: number) => holdOf(rule, { ...facts, estimatedRows: rows }).held;
  if (facts.writes.rows !== 'counted' || held(0)) return null;
  let unheld = 0;
  let heldAt = Number.MAX_SAFE_INTEGER;
  if (!held(heldAt)) return heldAt;
  while (heldAt - unheld > 1) {
    const middle = unheld + Math.floor((heldAt - unheld) / 2);
    if (held(middle)) heldAt = middle;
    else unheld = middle;
  }
  return unheld;
}

/** Relations whose writes reach other tables' rows: a view's base table, a partitioned table's partitions, a foreign table's server. */
const WRITES_ELSEWHERE: ReadonlySet<string> = new Set(['view', 'matview', 'foreign', 'partitioned']);

/**
 * The written relations through which a write may reach a table the rules name without naming it:
 * every view, partitioned or foreign table written (their targets are not analyzed), every
 * inheritance child of a named table (its rows are the parent's rows), and every table whose write
 * reaches a named one (reach.ts: a partition of it, a foreign key cascading to it) or runs a
 * trigger or rule of the database's. None when the rules name no table.
 */
export function heldThrough(rule: ApprovalRule | undefined, tablesWritten: readonly string[], catalog: UpstreamCatalog | undefined): string[] {
  const named = rule?.tables ?? [];
  if (!catalog || named.length === 0 || tablesWritten.length === 0) return [];
  const parents = named.filter((name) => !name.endsWith('.*')).map(relation);
  const children = new Set(descendants(catalog, parents).map(qualified));
  const reachesNamed = (table: string): boolean => {
    const reach = writeReach([table], catalog);
    // Unbounded: a trigger, rule or view on the way (a relation the snapshot does not know yet is taken as a plain table, as below).
    if (reach === undefined) return catalog.relation(relation(table)) !== undefined;
    return reach.some((reached) => reached !== table && listNames(named, relation(reached)));
  };
  return tablesWritten.filter((table) => children.has(table) || WRITES_ELSEWHERE.has(catalog.relation(relation(table))?.kind ?? 'table') || reachesNamed(table));
}
