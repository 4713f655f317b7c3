import pg from 'pg';

/**
 * Runs `select 1` back to back on `clients` connections of `connectionString` for `ms`, while
 * `watch` runs beside them (given when the flood ends and how many statements ran so far); the
 * statements that ran.
 */
export async function floodSelects(connectionString: string, clients: number, ms: number, watch: (until: number, ran: () => number) => Promise<void>): Promise<number> {
  const connections = await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = new pg.Client({ connectionString });
      await client.connect();
      return client;
    }),
  );
  let statements = 0;
  const until = Date.now() + ms;
  const watching = watch(until, () => statements);
  await Promise.all(
    connections.map(async (client) => {
      while (Date.now() < until) {
        await client.query({ text: 'select 1', rowMode: 'array' });
        statements += 1;
      }
    }),
  );
  await watching;
  await Promise.all(connections.map((client) => client.end()));
  return statements;
}
