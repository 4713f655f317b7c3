import pg from 'pg';

/** int8 as bigint: positions and counts must not lose precision above 2^53. */
const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8 && format !== 'binary') return (value: string) => BigInt(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export function createPool(connectionString: string, options: { max?: number; applicationName?: string } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'pgward',
    types: typeParsers as pg.CustomTypesConfig,
  });
  // An idle client that loses its server emits 'error' on the pool; unhandled, that would end the process.
  pool.on('error', () => undefined);
  // A checked-out one (pg-pool listens only while it is idle) emits it on itself, also mid-COPY: the
  // statement in flight rejects with the error anyway, and the pool drops the client on release.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}
