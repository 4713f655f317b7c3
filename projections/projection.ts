import pg from 'pg';
import type { RecordedEvent } from '../src/store/port.js';

/** A query runner bound to one transaction and one schema: `table('projects')` is the qualified name. */
export interface ProjectionTx {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  table(name: string): string;
}

export interface ReadModelTable {
  readonly name: string;
  /** Column definitions, e.g. `project_id text primary key, name text not null`. */
  readonly columns: string;
  /** Total order of rows, for the digest. */
  readonly orderBy: string;
  readonly indexes?: readonly string[];
}

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

export function tableDdl(schema: string, table: ReadModelTable): string {
  const name = qualified(schema, table.name);
  const indexes = (table.indexes ?? []).map((columns, i) => `create index if not exists ${pg.escapeIdentifier(`${table.name}_i${i}`)} on ${name} (${columns});`);
  return [`create table if not exists ${name} (${table.columns});`, ...indexes].join('\n');
}

export function projectionTx(client: pg.ClientBase, schema: string): ProjectionTx {
  return {
    query: (sql, values) => client.query(sql, values),
    table: (name) => qualified(schema, name),
  };
}
