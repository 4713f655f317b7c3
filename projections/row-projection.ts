import type { RecordedEvent } from '../src/store/port.js';
import type { Projection, ProjectionTx, ReadModelTable } from './projection.js';

export type Row = Record<string, unknown>;

export interface RowProjectionSpec<R extends Row> {
  readonly name: string;
  readonly streamPrefixes: readonly string[];
  readonly table: ReadModelTable & { readonly key: keyof R & string; readonly columnNames: readonly (keyof R & string)[] };
  /** The row an event touches, or undefined when the event does not concern this table. */
  keyOf(event: RecordedEvent): string | undefined;
  /** Pure step: the row after the event; `null` deletes it. */
  evolve(row: R | undefined, event: RecordedEvent): R | null;
}

/**
 * A projection whose read model is one table of rows, each evolved by a pure function. A batch
 * costs two statements whatever its size: load the touched rows, then write the changed ones.
 */
export function rowProjection<R extends Row>(spec: RowProjectionSpec<R>): Projection {
  const { table } = spec;
  const columns = table.columnNames;
  const columnList = columns.map((c) => `"${c}"`).join(', ');
  const updates = columns.filter((c) => c !== table.key).map((c) => `"${c}" = excluded."${c}"`).join(', ');

  async function load(tx: ProjectionTx, keys: string[]): Promise<Map<string, R>> {
    // Rows travel as JSON both ways, so evolve always sees the same plain shapes (ISO strings, arrays, numbers).
    const { rows } = await tx.query<{ row: R }>(`select to_jsonb(t) as row from ${tx.table(table.name)} t where "${table.key}" = any($1::text[])`, [keys]);
    return new Map(rows.map(({ row }) => [String(row[table.key]), row]));
  }

  return {
    name: spec.name,
    streamPrefixes: spec.streamPrefixes,
    tables: [table],
    async apply(tx, events) {
      const touched = events.map((event) => [spec.keyOf(event), event] as const).filter((pair): pair is readonly [string, RecordedEvent] => pair[0] !== undefined);
      if (touched.length === 0) return;
      const rows = await load(tx, [...new Set(touched.map(([key]) => key))]);
      const changed = new Map<string, R | null>();
      for (const [key, event] of touched) {
        const next = spec.evolve(rows.get(key), event);
        if (next === null) rows.delete(key);
        else rows.set(key, next);
        changed.set(key, next);
      }
      const deleted = [...changed].filter(([, row]) => row === null).map(([key]) => key);
      const upserted = [...changed.values()].filter((row): row is R => row !== null);
      if (deleted.length > 0) await tx.query(`delete from ${tx.table(table.name)} where "${table.key}" = any($1::text[])`, [deleted]);
      if (upserted.length > 0) {
        await tx.query(
          `insert into ${tx.table(table.name)} (${columnList})
           select ${columnList} from json_populate_recordset(null::${tx.table(table.name)}, $1::json)
           on conflict ("${table.key}") do update set ${updates}`,
          [JSON.stringify(upserted)],
        );
      }
    },
  };
}
