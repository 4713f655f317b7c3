import pg from 'pg';

/** Polls `condition` every 20 ms; throws naming `what` when it does not hold within `timeoutMs`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A connected client and whether the proxy has since ended its session; `config` adds client options (a `stream` to watch the bytes, say). */
export async function openSession(connectionString: string, config: Omit<pg.ClientConfig, 'connectionString'> = {}): Promise<{ client: pg.Client; ended: () => boolean }> {
  const client = new pg.Client({ ...config, connectionString });
  let ended = false;
  client.on('error', () => undefined);
  client.on('end', () => (ended = true));
  await client.connect();
  return { client, ended: () => ended };
}

/** The SQLSTATE a login fails with, or undefined when it succeeds. */
export async function loginError(connectionString: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString });
  const error = (await client.connect().then(
    () => client.end().then(() => undefined),
    (e: unknown) => e,
  )) as { code?: string } | undefined;
  return error?.code;
}

/** One statement on a connection of its own: its rows, or the SQLSTATE and message it failed with. */
export async function runOnce(connectionString: string, sql: string): Promise<{ rows?: Record<string, unknown>[]; code?: string; message?: string }> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return { rows: (await client.query(sql)).rows };
  } catch (error) {
    return { code: (error as { code?: string }).code, message: (error as Error).message };
  } finally {
    await client.end();
  }
}
