import { serialize } from 'pg-protocol';
import { Parser } from 'pg-protocol/dist/parser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { databaseIdOf, evolveDatabase, type DatabaseRow } from '../../projections/databases.js';
import type { UpstreamConnection } from '../../proxy/upstream/connection.js';
import { Upstreams } from '../../proxy/upstreams.js';
import { LiveView } from '../../proxy/views/live-view.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let upstreams: Upstreams;
let databases: LiveView<DatabaseRow>;
let project: { id: string; databaseId: string };

/** Runs one simple query on a raw upstream connection and returns the first column of its first row. */
function scalar(connection: UpstreamConnection, sql: string): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const parser = new Parser();
    let value: string | null = null;
    const bytes = (chunk: Buffer): void =>
      parser.parse(chunk, (message) => {
        if (message.name === 'dataRow') value = (message as unknown as { fields: (string | null)[] }).fields[0] ?? null;
        if (message.name === 'error') reject(new Error((message as unknown as { message: string }).message));
        if (message.name === 'readyForQuery') {
          connection.inlet.receive(undefined);
          resolve(value);
        }
      });
    connection.inlet.receive({ bytes, ended: () => reject(new Error('the upstream connection ended during the query')) });
    connection.socket.write(serialize.query(sql));
  });
}

beforeAll(async () => {
  api = await startApi('upstreams');
  const { orgId, apiKey } = await api.org('pro');
  const url = new URL(api.database.url);
  const created = await api.call(apiKey, {
    method: 'POST',
    url: '/v1/projects',
    payload: { name: 'pools', org_id: orgId, database: { host: url.hostname, port: Number(url.port || 5432), name: url.pathname.slice(1), username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) || 'trust', ssl_mode: 'disable', query_timeout_ms: 1500 } },
  });
  const body = created.json() as { project: { id: string }; database: { id: string } };
  project = { id: body.project.id, databaseId: body.database.id };
  databases = new LiveView<DatabaseRow>(api.store, { streamPrefix: 'project-', keyOf: databaseIdOf, evolve: evolveDatabase });
  await databases.start();
  upstreams = new Upstreams(databases, parseKeyring(api.masterKey), {
    connectTimeoutMs: 5_000,
    applicationName: 'pgward',
    logger: pino({ level: 'silent' }),
    relay: { region: 'local', proxyId: 'test', peers: new Map(), secret: undefined },
  });
});
afterAll(async () => {
  await upstreams?.close();
  await databases?.stop();
  await api?.stop();
});

describe('upstream pools', () => {
  it('gives read-only policies connections whose transactions are read-only, with the database’s statement timeout', async () => {
    const readOnly = (await upstreams.for(project.databaseId, project.id, true))!;
    const writable = (await upstreams.for(project.databaseId, project.id, false))!;
    expect(readOnly.pool).not.toBe(writable.pool);
    const ro = await readOnly.pool.acquire();
    const rw = await writable.pool.acquire();
    try {
      expect(await scalar(ro, 'show default_transaction_read_only')).toBe('on');
      expect(await scalar(rw, 'show default_transaction_read_only')).toBe('off');
      expect(await scalar(ro, 'show statement_timeout')).toBe('1500ms');
      await expect(scalar(ro, 'create temp table t (x int)')).rejects.toThrow(/read-only transaction/);
    } finally {
      readOnly.pool.destroy(ro);
      void writable.pool.release(rw, { reset: false });
    }
  });
});
