import type { RelationName } from './names.js';

/**
 * What the gateway knows of one upstream database's catalog: read by the proxy from the upstream
 * itself and refreshed, handed to the analyzer as data (the analyzer stays pure). Every decision
 * that depends on it is cached under its `version`.
 */
export type CatalogRelationKind = 'table' | 'partitioned' | 'view' | 'matview' | 'foreign';

export interface CatalogRelation {
  readonly kind: CatalogRelationKind;
  /** Column names in attribute order, dropped and system columns left out. */
  readonly columns: readonly string[];
  /** Relations that inherit from this one directly and are not its partitions (plain inheritance). */
  readonly inheritors: readonly RelationName[];
  /**
   * Tables whose rows a write to this relation may change besides its own: the other members of its
   * partition tree (its ancestors and its partitions), and the tables whose foreign keys reference it
   * with an action that writes (`ON DELETE`/`ON UPDATE` `CASCADE`, `SET NULL`, `SET DEFAULT`).
   */
  readonly writesReach: readonly RelationName[];
  /** A write to it runs code the gateway does not read: a trigger of its own (not a foreign key's) or a rule. */
  readonly writesRunCode: boolean;
  /** A view or materialized view: the relations its definition reads (what a cached read of it depends on, and what it may show). */
  readonly viewReads: readonly RelationName[];
  /**
   * A read of it runs code that may read relations the gateway does not follow, or whose result is
   * not fixed by what it reads: a view calling a function of the database's, a volatile function or
   * a stable built-in the result cache does not accept in a statement; a table with row-level
   * security policies (their expressions may read other tables).
   */
  readonly readsRunCode: boolean;
  /** The other members of its partition tree whose rows its reads show or whose reads show its rows: its partition ancestors and its partitions at every level (not its siblings). */
  readonly partitionTree: readonly RelationName[];
  /** Its columns whose type is a relation's row type (directly, as an array, or through a domain): each holds whole rows of that relation. */
  readonly rowColumns: readonly { readonly column: string; readonly of: RelationName }[];
  /**
   * A view's or materialized view's definition: the columns of the relations it reads that it
   * names anywhere (its output, WHERE, joins), `*` for a relation it reads as a whole row or of
   * which it names no column. Absent: every column of each of viewReads.
   */
  readonly viewColumns?: readonly { readonly table: RelationName; readonly column: string }[];
  /** Each column's type oid, in the order of columns; absent when the catalog did not say. */
  readonly columnTypes?: readonly number[];
}

export interface UpstreamCatalog {
  /** Changes whenever anything below changes: part of every cache key that depends on the catalog. */
  readonly version: string;
  relation(name: RelationName): CatalogRelation | undefined;
  /** Schemas other than pg_catalog that define a function (or aggregate, procedure) named `name`. */
  functionSchemas(name: string): readonly string[];
  /** Schemas other than pg_catalog that define an operator named `name`. */
  operatorSchemas(name: string): readonly string[];
  /**
   * Whether pg_catalog has an operator `name` taking exactly these type oids whose function is
   * leakproof (pg_proc.proleakproof); absent or unknown: not leakproof.
   */
  leakproofOperator?(name: string, left: number, right: number): boolean;
}
