import type { ProjectionTx } from './projection.js';

/** Rows to insert into a read-model table, and what happens to a row whose key is there already. */
export interface Upsert {
  readonly table: string;
  /** Objects with the table's columns as members (a member may be a bigint). */
  readonly rows: readonly object[];
  /** What follows `on conflict`: `(key columns) do update set …`, or `do nothing`. */
  readonly onConflict: string;
}

/**
 * Writes the upserts of a batch in one statement (one round trip, one parse and plan), a
 * data-modifying CTE each, their rows a JSON parameter each. They see one snapshot, so none may
 * read what another writes, and a table must appear once: each upsert's rows have distinct keys.
 */
export async function upsertAll(tx: ProjectionTx, upserts: readonly Upsert[]): Promise<void> {
  const parts = upserts.filter((upsert) => upsert.rows.length > 0);
  if (parts.length === 0) return;
  const ctes = parts.map(({ table, onConflict }, i) => {
    const name = tx.table(table);
    return `w${i} as (insert into ${name} as t select * from json_populate_recordset(null::${name}, $${i + 1}::json) on conflict ${onConflict})`;
  });
  await tx.query(
    `with ${ctes.join(',\n')} select`,
    parts.map(({ rows }) => asJson(rows)),
  );
}

/**
 * A bigint (a sum past 2^53 - 1, rare) travels as a JSON string, which json_populate_recordset reads
 * into its bigint column. JSON.stringify refuses bigints; the replacer that turns them into strings
 * slows every value, so it runs only when the plain call refused.
 */
function asJson(rows: readonly object[]): string {
  try {
    return JSON.stringify(rows);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    return JSON.stringify(rows, (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value));
  }
}

/** `c = t.c + excluded.c` for each column: a sum merged with the stored one. */
export const added = (columns: readonly string[]): string => columns.map((c) => `${c} = t.${c} + excluded.${c}`).join(', ');
