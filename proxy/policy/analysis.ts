import type { Node, Path } from './ast.js';
import type { Expansion } from './expansion.js';
import type { RelationName, SearchPath } from './names.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

/**
 * What a statement does beyond reading allowed data. `always` marks effects refused under every
 * policy (session settings, procedures, notifications, SQL-level prepared statements, server
 * files); the others are refused only under a read-only policy.
 */
export type EffectFamily = 'write' | 'ddl' | 'lock' | 'setting' | 'transaction' | 'procedure' | 'notify' | 'prepare' | 'copy';

export interface Effect {
  readonly family: EffectFamily;
  /** What does it, as an agent would write it: `UPDATE`, `SET role`, `SELECT ... FOR UPDATE`. */
  readonly detail: string;
  readonly always: boolean;
}

export interface RelationUse {
  /** Every relation the name may denote on the search path (usually one). */
  readonly candidates: readonly RelationName[];
  readonly written: boolean;
  /** The name as the statement wrote it. */
  readonly text: string;
  /** How the statement reaches the relation when not as a FROM item or target: `a cast to regclass`, `the row type orders`. */
  readonly via?: string;
  /** Slot of the RangeVar's fields in the statement tree, when the statement names it there (not for DROP's name lists). */
  readonly path?: Path;
}

export interface FunctionUse {
  readonly name: string;
  readonly vetted: boolean;
  /** An operator rather than a function (the refusal names it so). */
  readonly kind?: 'operator';
  /** Why it is refused, when not simply off the vetted list: completes "<name> ...". */
  readonly why?: string;
  /** What to write instead. */
  readonly instead?: string;
  /** A pg_catalog function that only describes catalog objects (format_type, pg_get_indexdef, ...): runs when the policy sets allow_catalog. */
  readonly describesCatalog?: boolean;
}

export interface ColumnName {
  readonly table: RelationName;
  readonly column: string;
}

export interface ColumnUse {
  /** Base columns the reference may bind to; it binds to one of them or the statement fails upstream. */
  readonly candidates: readonly ColumnName[];
  /** Candidates another FROM item may supply the name instead of (scope.ts Binding.shadowed); absent: none. */
  readonly shadowed?: readonly ColumnName[];
  /** Slot of the ColumnRef node in the statement tree, for the masking rewrite. */
  readonly path: Path;
  /** False where an expression cannot stand in for the name (JOIN USING, DDL, COPY column lists). */
  readonly rewritable: boolean;
  /** An assignment target (INSERT column list, UPDATE SET): not a read. */
  readonly written: boolean;
  readonly text: string;
}

/** A value built from every column of a table, or a construct that reaches columns by position. */
export type WholeRowForm = 'star' | 'row' | 'function_notation' | 'natural' | 'column_alias' | 'copy' | 'rename';

export interface WholeRowUse {
  readonly tables: readonly RelationName[];
  readonly form: WholeRowForm;
  readonly text: string;
}

export interface StatementAnalysis {
  /** Lowercase statement kind for audit and approvals: `select`, `update`, `ddl`, ... */
  readonly kind: string;
  readonly sql: string;
  readonly stmt: Node;
  readonly ddl: boolean;
  readonly effects: readonly Effect[];
  /** Constructs the analyzer does not understand; any one refuses the statement. */
  readonly unsupported: readonly string[];
  readonly functions: readonly FunctionUse[];
  readonly relations: readonly RelationUse[];
  readonly columns: readonly ColumnUse[];
  readonly wholeRows: readonly WholeRowUse[];
  /** String and numeric constants anywhere in the statement (value honeytokens). */
  readonly literals: readonly string[];
  /** Edits the statement runs with whatever the policy (see TreeEdit); none means it runs as written, unless masked. */
  readonly edits: readonly TreeEdit[];
  /**
   * What it changes in the upstream session beyond its transaction (`SET statement_timeout`,
   * `set_config('timezone', ..., false)`): the connection must then stay with the client's session
   * and be reset before it serves another one.
   */
  readonly sessionChanges: readonly string[];
  /** Stars, NATURAL JOINs and column alias lists, and how to write them with each column named (made when they cover a masked table). */
  readonly expansions: readonly Expansion[];
}

/**
 * A change the statement must run with, made on a copy of its parse tree before it is deparsed:
 * the node at `path` is edited in place (a function name qualified, a relation marked ONLY, ...).
 * Returns why it could not be made, which refuses the statement. Edits must not move nodes other
 * edits' paths pass through.
 */
export interface TreeEdit {
  readonly path: Path;
  readonly what: string;
  apply(node: Node): string | undefined;
}

/**
 * Name-binding work one statement's analysis may do: each column reference costs the query levels
 * and FROM items its lookup scans (those of its own level and every enclosing one). It is the part
 * of the analysis that grows with the product of two counts (references times FROM items in scope)
 * rather than with the statement's size: 2,400 references over 2,400 FROM items are 5.8 million.
 * 500,000 is about 20 ms of CPU; a 300-table join with 1,000 column references needs at most 300,000.
 */
export const MAX_BINDING_STEPS = 500_000;

/** Thrown out of the walk when a statement needs more binding work than MAX_BINDING_STEPS. */
export class BindingBudgetExceeded extends Error {
  constructor() {
    super(`the statement needs more than ${MAX_BINDING_STEPS} name-binding steps`);
  }
}

/** Accumulates findings during one statement's walk. */
export class Collector {
  readonly effects: Effect[] = [];
  readonly unsupported: string[] = [];
  readonly functions: FunctionUse[] = [];
  readonly relations: RelationUse[] = [];
  readonly columns: ColumnUse[] = [];
  readonly wholeRows: WholeRowUse[] = [];
  readonly edits: TreeEdit[] = [];
  readonly sessionChanges: string[] = [];
  readonly expansions: Expansion[] = [];
  /** Field objects of relation, function, column-reference and sublink nodes the walk analyzed. */
  readonly visited = new Set<object>();
  /** Name-binding steps spent so far (see MAX_BINDING_STEPS). */
  bindingSteps = 0;

  constructor(
    readonly searchPath: SearchPath,
    /** The upstream catalog when known: which operator names are shadowed outside pg_catalog, a table's inheritance children, the columns `*` and positional constructs stand for. Undefined in pure analysis (tests). */
    readonly catalog?: UpstreamCatalog,
  ) {}

  effect(family: EffectFamily, detail: string, always = false): void {
    this.effects.push({ family, detail, always });
  }

  /** Spends name-binding steps; past the budget the walk stops with BindingBudgetExceeded. */
  bind(steps: number): void {
    this.bindingSteps += steps;
    if (this.bindingSteps > MAX_BINDING_STEPS) throw new BindingBudgetExceeded();
  }

  unsupportedConstruct(what: string): void {
    if (!this.unsupported.includes(what)) this.unsupported.push(what);
  }
}
