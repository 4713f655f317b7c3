import pg from 'pg';

/** What a statement sent over the wire came to: its rows, or the error the gateway answered. */
export type WireOutcome = { rows: unknown[] } | { code: string; message: string };

/** Runs `sql` on `client` over the simple or the extended protocol and returns its outcome instead of throwing. */
export async function wireOutcome(client: pg.Client, sql: string, mode: 'simple' | 'extended'): Promise<WireOutcome> {
  try {
    const result = await client.query(mode === 'extended' ? ({ text: sql, queryMode: 'extended' } as pg.QueryConfig) : sql);
    return { rows: result.rows };
  } catch (error) {
    const { code, message } = error as pg.DatabaseError;
    return { code: code!, message };
  }
}
