import pg from 'pg';
import { copyIn } from '../src/pg/copy-in.js';
import type { RecordedEvent } from '../src/store/port.js';

/** A query runner bound to one transaction and one schema: `table('projects')` is the qualified name. */
export interface ProjectionTx {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  table(name: string): string;
  /** Copies rows in COPY's text format (src/pg/copy-in.ts) into the named columns of `table(name)`; resolves to the rows copied. */
  copyIn(name: string, columns: readonly string[], rows: Buffer): Promise<number>;
}

/** An index under a name of its own, e.g. a partial one: `create index if not exists` would keep an older index of the same name as it was. */
export interface NamedIndex {
  readonly name: string;
  readonly columns: string;
  /** The predicate of a partial index. */
  readonly where?: string;
}

export interface ReadModelTable {
  readonly name: string;
  /** Column definitions, e.g. `project_id text primary key, name text not null`. */
  readonly columns: string;
  /** Total order of rows, for the digest. */
  readonly orderBy: string;
  /** A column list is named by its position, `<table>_i<n>`; never reorder them. */
  readonly indexes?: readonly (string | NamedIndex)[];
  /** Indexes that earlier versions created and this one does not: dropped once the indexes above exist. */
  readonly retiredIndexes?: readonly string[];
  /**
   * Columns that tables made by earlier versions lack, as `add column` definitions with a default
   * for the rows already there (e.g. `statement_timeout_ms integer not null default 30000`).
   */
  readonly addedColumns?: readonly string[];
  /**
   * For a table whose rows every batch updates in place (a rollup's counters): the share of each
   * page that inserts fill, so an update finds room for the row's new version on its page. Such an
   * update writes no index entry (a HOT update, when no indexed column changes), and the versions
   * it leaves are pruned with the page, where a full page sends each new version to another page,
   * with an entry in every index, and the table grows by a version a row a batch until vacuumed.
   */
  readonly fillfactor?: number;
  /** What this table took over from earlier versions, oldest first (Absorption). */
  readonly absorbs?: readonly Absorption[];
  /**
   * Columns no query filters, joins, groups or orders by: ANALYZE gathers no statistics on them
   * (`set statistics 0`). On a wide table written at every decision (the audit entries), autovacuum's
   * analyses otherwise spend most of their time sorting samples of hashes, SQL text and JSON.
   */
  readonly unanalyzedColumns?: readonly string[];
}

/**
 * A table of an earlier version whose rows a table took over, or one `column` of a table that stays:
 * while it exists, `copy` (SQL, given both tables' qualified names) adds its rows to the new table,
 * and it is dropped, in the migration that finds it.
 */
export interface Absorption {
  readonly table: string;
  readonly column?: string;
  readonly copy: (into: string, from: string) => string;
}

/** ReadModelTable.fillfactor of the rollups: room for one more version of every row of a page. */
export const ROLLUP_FILLFACTOR = 50;

export interface Projection {
  readonly name: string;
  /** Only events of streams with these prefixes reach `apply`. */
  readonly streamPrefixes: readonly string[];
  readonly tables: readonly ReadModelTable[];
  /** Applies a batch in order, inside the runner's transaction. Must use only the events' data, never the clock. */
  apply(tx: ProjectionTx, events: readonly RecordedEvent[]): Promise<void>;
  /**
   * Optionally, apply in two steps: the work that needs only the events, then (the function it
   * resolves to) the work that needs the transaction; `(await prepare(events))(tx)` must do what
   * `apply(tx, events)` does. The runner prepares the next batch while the current one is written.
   */
  prepare?(events: readonly RecordedEvent[]): Promise<(tx: ProjectionTx) => Promise<void>>;
}

export function qualified(schema: string, table: string): string {
  return `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)}`;
}

function indexDdl(table: string, on: string, index: string | NamedIndex, position: number): string {
  const { name, columns, where } = typeof index === 'string' ? { name: `${table}_i${position}`, columns: index, where: undefined } : index;
  return `create index if not exists ${pg.escapeIdentifier(name)} on ${on} (${columns})${where === undefined ? '' : ` where ${where}`};`;
}

function absorbDdl(into: string, schema: string, { table, column, copy }: Absorption): string {
  const from = qualified(schema, table);
  const found =
    column === undefined
      ? `to_regclass(${pg.escapeLiteral(from)}) is not null`
      : `exists (select from pg_attribute where attrelid = to_regclass(${pg.escapeLiteral(from)}) and attname = ${pg.escapeLiteral(column)} and not attisdropped)`;
  const drop = column === undefined ? `drop table ${from}` : `alter table ${from} drop column ${pg.escapeIdentifier(column)}`;
  // Locked against writes first: a batch an earlier release's projector commits between the copy and the drop would be lost.
  return `do $absorb$ begin if ${found} then lock table ${from} in share row exclusive mode; ${copy(into, from)}; ${drop}; end if; end $absorb$;`;
}

export function tableDdl(schema: string, table: ReadModelTable): string {
  const name = qualified(schema, table.name);
  const indexes = (table.indexes ?? []).map((index, i) => indexDdl(table.name, name, index, i));
  const retired = (table.retiredIndexes ?? []).map((index) => `drop index if exists ${qualified(schema, index)};`);
  const added = (table.addedColumns ?? []).map((column) => `alter table ${name} add column if not exists ${column};`);
  // Set on a table made before too: pages filled from then on leave the room.
  const storage = table.fillfactor === undefined ? [] : [`alter table ${name} set (fillfactor = ${table.fillfactor});`];
  // After the added columns, some of which may be among them.
  const unanalyzed = table.unanalyzedColumns?.length ? [`alter table ${name} ${table.unanalyzedColumns.map((c) => `alter column ${pg.escapeIdentifier(c)} set statistics 0`).join(', ')};`] : [];
  const absorbed = (table.absorbs ?? []).map((absorption) => absorbDdl(name, schema, absorption));
  return [`create table if not exists ${name} (${table.columns});`, ...storage, ...added, ...unanalyzed, ...indexes, ...retired, ...absorbed].join('\n');
}

export function projectionTx(client: pg.ClientBase, schema: string): ProjectionTx {
  return {
    query: (sql, values) => client.query(sql, values),
    table: (name) => qualified(schema, name),
    copyIn: (name, columns, rows) => copyIn(client, `copy ${qualified(schema, name)} (${columns.map((c) => pg.escapeIdentifier(c)).join(', ')}) from stdin`, rows),
  };
}
