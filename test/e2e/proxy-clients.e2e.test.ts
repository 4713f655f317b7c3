import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { missingTool } from '../support/tools.js';
import { loginError, openSession, waitFor } from '../support/wire.js';

const noPsql = missingTool('psql');
const noPgbench = missingTool('pgbench');
const noPsycopg2 = missingTool('/usr/bin/python3', ['-c', 'import psycopg2']);

const run = promisify(execFile);
let gateway: TestGateway;
let agent: AgentSecrets;

function withSsl(url: string, mode: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('sslmode', mode);
  return parsed.toString();
}

/** Sets the agent's database to transaction pooling of this size through the REST API. */
async function setTransactionPool(pool: { max_connections: number; acquire_timeout_ms: number }): Promise<void> {
  const databases = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
  const databaseId = (databases.json() as { databases: { id: string }[] }).databases[0]!.id;
  const patched = await gateway.api.call(gateway.owner.apiKey, {
    method: 'PATCH',
    url: `/v1/projects/${gateway.projectId}/databases/${databaseId}`,
    payload: { pool_config: { mode: 'transaction', min_connections: 0, idle_timeout_ms: 60_000, ...pool } },
  });
  expect(patched.statusCode).toBe(200);
}

beforeAll(async () => {
  gateway = await startGateway('proxy_clients');
  agent = await gateway.register('clients');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('node-postgres through the proxy', () => {
  it.each([
    ['without TLS', undefined],
    ['with TLS', { rejectUnauthorized: false }],
  ])('runs simple, extended and prepared statements and a rolled-back transaction %s', async (_label, ssl) => {
    const client = new pg.Client({ connectionString: agent.connection_string, ...(ssl ? { ssl } : {}) });
    await client.connect();
    try {
      expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
      expect((await client.query('select id, customer from orders where id = $1', [7])).rows).toEqual([{ id: 7, customer: 'c7' }]);
      for (const id of [1, 2, 3]) {
        const result = await client.query({ name: 'by-id', text: 'select total::float8 as total from orders where id = $1', values: [id] });
        expect(result.rows).toEqual([{ total: id * 1.5 }]);
      }
      await client.query('begin');
      await client.query('delete from orders where id <= 10');
      expect((await client.query('select count(*)::int as n from orders')).rows[0].n).toBe(990);
      await client.query('rollback');
      expect((await client.query('select count(*)::int as n from orders')).rows[0].n).toBe(1000);
    } finally {
      await client.end();
    }
  });

  it('refuses a wrong password with 28P01, exactly as for an unknown user', async () => {
    const wrong = new URL(agent.connection_string);
    wrong.password = 'not-the-password';
    const unknown = new URL(agent.connection_string);
    unknown.username = 'agt_nobodynobodynobodynobody';
    const messages: string[] = [];
    for (const url of [wrong, unknown]) {
      const client = new pg.Client({ connectionString: url.toString() });
      const error = (await client.connect().then(
        () => undefined,
        (e: unknown) => e,
      )) as { code?: string; message: string };
      expect(error.code).toBe('28P01');
      messages.push(error.message);
    }
    expect(messages[0]).toBe(messages[1]);
    await waitFor(() => gateway.decisions.filter((d) => (d.decision as { event: string } | undefined)?.event === 'auth_failed').length >= 1, 2000, 'auth_failed decision');
  });

  it('cancels a long-running query within a second through the proxy’s own cancel key', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    const observer = new pg.Client({ connectionString: gateway.upstream.url });
    await Promise.all([client.connect(), observer.connect()]);
    try {
      const sleeping = client.query('select count(*) from orders a, orders b, orders c').then(
        () => undefined,
        (e: unknown) => e as { code?: string },
      );
      // PostgreSQL ignores a cancel that reaches a backend before it has read the statement: the
      // request goes once the statement runs upstream, and the second counts from the request.
      await waitFor(
        async () => (await observer.query(`select 1 from pg_stat_activity where datname = current_database() and state = 'active' and pid <> pg_backend_pid() and query ilike '%count(*)%'`)).rowCount === 1,
        10_000,
        'the statement running upstream',
      );
      const started = Date.now();
      const { processID, secretKey } = client as unknown as { processID: number; secretKey: number };
      await new Promise<void>((resolve, reject) => {
        const socket = connect(gateway.proxy.port, '127.0.0.1', () => {
          const packet = Buffer.alloc(16);
          packet.writeInt32BE(16, 0);
          packet.writeInt32BE(80877102, 4);
          packet.writeInt32BE(processID, 8);
          packet.writeInt32BE(secretKey, 12);
          socket.end(packet);
        });
        socket.on('close', () => resolve());
        socket.on('error', reject);
      });
      const error = await sleeping;
      expect(error?.code).toBe('57014');
      expect(Date.now() - started).toBeLessThan(1500);
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await Promise.all([client.end(), observer.end()]);
    }
  });
});

describe('other real clients', () => {
  it.skipIf(noPsql)(`psql: select with and without TLS, COPY TO STDOUT, and 28P01 for a wrong password${noPsql ? ` (skipped: ${noPsql})` : ''}`, async () => {
    for (const mode of ['disable', 'require']) {
      const { stdout } = await run('psql', [withSsl(agent.connection_string, mode), '-Atc', 'select count(*) from orders']);
      expect(stdout.trim()).toBe('1000');
    }
    const copy = await run('psql', [agent.connection_string, '-c', 'copy (select id, customer from orders where id <= 3 order by id) to stdout']);
    expect(copy.stdout).toBe('1\tc1\n2\tc2\n3\tc3\n');
    const wrong = new URL(agent.connection_string);
    wrong.password = 'nope';
    const failed = await run('psql', [wrong.toString(), '-c', 'select 1']).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain('password authentication failed');
  });

  it('postgres.js: tagged queries with its named prepared statements, over TLS', async () => {
    const sql = postgres(agent.connection_string, { ssl: { rejectUnauthorized: false }, max: 2, onnotice: () => undefined });
    try {
      const rows = await sql`select id, customer from orders where id = ${42}`;
      expect(rows.map((r) => ({ ...r }))).toEqual([{ id: 42, customer: 'c2' }]);
      for (let i = 1; i <= 5; i++) expect((await sql`select id from orders where id = ${i}`)[0]!.id).toBe(i);
      const counted = await sql`select count(*)::int as n from customers`;
      expect(counted[0]?.n).toBe(10);
    } finally {
      await sql.end();
    }
  });

  it.skipIf(noPsycopg2)(`psycopg2 (Debian python3-psycopg2): parameters, a transaction rollback, and TLS${noPsycopg2 ? ` (skipped: ${noPsycopg2})` : ''}`, async () => {
    const script = `
import sys, psycopg2
for mode in ('disable', 'require'):
    conn = psycopg2.connect(sys.argv[1], sslmode=mode)
    cur = conn.cursor()
    cur.execute('select customer from orders where id = %s', (13,))
    print(mode, cur.fetchone()[0])
    cur.execute('update orders set customer = %s where id = 1', ('changed',))
    conn.rollback()
    cur.execute('select customer from orders where id = 1')
    print(mode, cur.fetchone()[0])
    conn.close()
`;
    const { stdout } = await run('/usr/bin/python3', ['-c', script, agent.connection_string.replace(/\?.*$/, '')]);
    expect(stdout.trim().split('\n')).toEqual(['disable c3', 'disable c1', 'require c3', 'require c1']);
  });

  it.skipIf(noPgbench)(`pgbench: simple, extended and prepared modes run their transactions without failures${noPgbench ? ` (skipped: ${noPgbench})` : ''}`, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pgward-pgbench-'));
    const script = join(dir, 'select.sql');
    await writeFile(script, '\\set id random(1, 1000)\nselect total from orders where id = :id;\n');
    try {
      for (const mode of ['simple', 'extended', 'prepared']) {
        const { stdout } = await run('pgbench', ['-n', '-M', mode, '-c', '4', '-t', '50', '-f', script, agent.connection_string]);
        expect(stdout).toContain('number of transactions actually processed: 200/200');
        expect(stdout).toMatch(/number of failed transactions: 0/);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('live enforcement', () => {
  it('closes an open session within 2 s of the kill-switch and refuses new logins', async () => {
    const secrets = await gateway.register('to be disabled');
    const { client, ended } = await openSession(secrets.connection_string);
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    const started = Date.now();
    const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/agents/${secrets.credential.id}`, payload: { status: 'disabled' } });
    expect(patched.statusCode).toBe(200);
    await waitFor(ended, 2000, 'session closed after disable');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await loginError(secrets.connection_string)).toBe('28P01');
  });

  it('closes sessions on the old password within 2 s of a rotation; the new password logs in', async () => {
    const secrets = await gateway.register('to be rotated');
    const { ended } = await openSession(secrets.connection_string);
    const rotated = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents/${secrets.credential.id}/rotate` });
    expect(rotated.statusCode).toBe(200);
    await waitFor(ended, 2000, 'session closed after rotation');
    const fresh = new pg.Client({ connectionString: (rotated.json() as AgentSecrets).connection_string });
    await fresh.connect();
    expect((await fresh.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
    await fresh.end();
  });

  it('ends a session when its credential’s expires_at passes, refuses logins after, and audits credential_expired', async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const registered = await gateway.api.call(gateway.owner.apiKey, {
      method: 'POST',
      url: `/v1/projects/${gateway.projectId}/agents`,
      payload: { name: 'short-lived', policy_profile_id: gateway.policyId, expires_at: expiresAt },
    });
    const secrets = registered.json() as AgentSecrets;
    const { client, ended } = await openSession(secrets.connection_string);
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await waitFor(ended, 3000, 'session ended at expiry');
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
    expect(await loginError(secrets.connection_string)).toBe('28P01');
    await waitFor(
      () => gateway.decisions.filter((d) => (d.decision as { credential_id?: string; event?: string } | undefined)?.credential_id === secrets.credential.id && (d.decision as { event: string }).event === 'credential_expired').length >= 2,
      2000,
      'credential_expired decisions for the session and the refused login',
    );
  });

  it('publishes a decision per statement with rows, bytes and latency', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    await client.query("select id from orders where id <= 25 /* decision-probe */");
    await client.end();
    await waitFor(() => gateway.decisions.some((d) => String((d.decision as { sql?: string } | undefined)?.sql).includes('decision-probe')), 2000, 'decision published');
    const record = gateway.decisions.find((d) => String((d.decision as { sql?: string } | undefined)?.sql).includes('decision-probe'))!.decision as Record<string, unknown>;
    expect(record).toMatchObject({ event: 'query', source: 'wire', credential_id: agent.credential.id, project_id: gateway.projectId, statement_kind: 'select', rows_returned: '25', proxy_id: 'test-proxy' });
    expect(Number(record.bytes_out)).toBeGreaterThan(25 * 11);
    expect(record.latency_us).toEqual(expect.any(Number));
    expect(record.normalized_sql).toBe('select id from orders where id <= $1 /* decision-probe */');
    expect(record.query_hash).toMatch(/^[0-9a-f]{16}$/);
  });

  it('counts each statement once in /metrics: by decision, in the latency histogram, and its bytes', async () => {
    const figure = async (pattern: RegExp): Promise<number> => Number(pattern.exec(await gateway.metrics.metrics())?.[1] ?? 0);
    const queries = /^pgward_proxy_statements_total\{event="query"\} (\d+)$/m;
    const timed = /^pgward_proxy_statement_seconds_count (\d+)$/m;
    const bytes = /^pgward_proxy_bytes_out_total (\d+)$/m;
    const before = { queries: await figure(queries), timed: await figure(timed), bytes: await figure(bytes) };
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    for (let id = 1; id <= 5; id++) await client.query('select id, customer from orders where id = $1', [id]);
    await client.end();
    expect(await figure(queries)).toBe(before.queries + 5);
    expect(await figure(timed)).toBe(before.timed + 5);
    expect(await figure(bytes)).toBeGreaterThan(before.bytes + 5 * 20);
    expect(await gateway.metrics.metrics()).toMatch(/^pgward_proxy_statement_seconds_bucket\{le="\+Inf"\} \d+$/m);
  });
});

describe('transaction pooling', () => {
  it('serves an idle client on a fresh upstream connection after the one it held between transactions was terminated', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    let failed: unknown;
    client.on('error', (error) => (failed = error));
    await client.connect();
    const upstream = new pg.Client({ connectionString: gateway.upstream.url });
    await upstream.connect();
    const proxyBackends = async (): Promise<number[]> =>
      (await upstream.query(`select pid from pg_stat_activity where datname = current_database() and application_name = 'pgward' and pid <> pg_backend_pid() order by pid`)).rows.map((row: { pid: number }) => row.pid);
    try {
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      const before = await proxyBackends();
      expect(before.length).toBeGreaterThan(0);
      await upstream.query('select pg_terminate_backend(pid) from unnest($1::int[]) as pid', [before]);
      await waitFor(async () => (await proxyBackends()).every((pid) => !before.includes(pid)), 5_000, 'the backends to exit');
      expect((await client.query('select 41 + 1 as answer')).rows).toEqual([{ answer: 42 }]);
      expect((await proxyBackends()).some((pid) => !before.includes(pid))).toBe(true);
      expect(failed).toBeUndefined();
    } finally {
      await Promise.all([client.end(), upstream.end()]);
    }
  });

  it('keeps an idle session working after a change to its database replaces the upstream pool', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    try {
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      await setTransactionPool({ max_connections: 4, acquire_timeout_ms: 5_000 });
      // Once the proxy's view has the change, the next login builds the new pool and closes the old one.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const other = new pg.Client({ connectionString: agent.connection_string });
      await other.connect();
      expect((await other.query('select 3 as three')).rows).toEqual([{ three: 3 }]);
      await other.end();
      expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
    } finally {
      await client.end();
    }
  });

  it('keeps each client’s named prepared statements working while clients share one upstream connection', async () => {
    await setTransactionPool({ max_connections: 1, acquire_timeout_ms: 5_000 });
    const a = new pg.Client({ connectionString: agent.connection_string });
    const b = new pg.Client({ connectionString: agent.connection_string });
    await Promise.all([a.connect(), b.connect()]);
    try {
      for (let round = 1; round <= 5; round++) {
        const [fromA, fromB, shared] = await Promise.all([
          a.query({ name: 'q', text: 'select id from orders where id = $1', values: [round] }),
          b.query({ name: 'q', text: 'select customer from orders where id = $1', values: [round] }),
          b.query({ name: 'same', text: 'select count(*)::int as n from customers where id <= $1', values: [round] }),
        ]);
        expect(fromA.rows).toEqual([{ id: round }]);
        expect(fromB.rows).toEqual([{ customer: `c${round % 10}` }]);
        expect(shared.rows).toEqual([{ n: round }]);
        expect((await a.query({ name: 'same', text: 'select count(*)::int as n from customers where id <= $1', values: [round] })).rows).toEqual([{ n: round }]);
      }
      const upstream = new pg.Client({ connectionString: gateway.upstream.url });
      await upstream.connect();
      // The earlier test's pool was closed when this one was built; its backends may take a moment to exit on a loaded machine.
      const pgwardBackends = async () =>
        (await upstream.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'pgward' and pid <> pg_backend_pid()`)).rows[0]!.n;
      try {
        await waitFor(async () => (await pgwardBackends()) <= 1, 5_000, 'the closed pool’s backends to exit');
        expect(await pgwardBackends()).toBe(1);
      } finally {
        await upstream.end();
      }
    } finally {
      await Promise.all([a.end(), b.end()]);
    }
  });
});

describe('flow control', () => {
  it('leaves a result the client does not read waiting in the server, not in the gateway, and delivers all of it once the client reads', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    const upstream = new pg.Client({ connectionString: gateway.upstream.url });
    await upstream.connect();
    const marker = `flow_control_${process.pid}`;
    const activity = async (): Promise<{ state: string; wait_event: string | null }[]> =>
      (await upstream.query(`select state, wait_event from pg_stat_activity where query like $1 and pid <> pg_backend_pid()`, [`%'${marker}'%`])).rows;
    try {
      // About 64 MB, far beyond what the kernel's socket buffers between the server and the client hold.
      const result = client.query(`select repeat('x', 1000) as filler, '${marker}' as marker from generate_series(1, 64000)`);
      const stream = (client as unknown as { connection: { stream: Socket } }).connection.stream;
      stream.pause();
      await waitFor(async () => (await activity()).some((row) => row.wait_event === 'ClientWrite'), 10_000, 'the server to wait on writing the result');
      // Were the gateway reading on, the server would finish within this second and go idle.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await activity()).toEqual([{ state: 'active', wait_event: 'ClientWrite' }]);
      stream.resume();
      const { rows } = await result;
      expect(rows.length).toBe(64_000);
      expect(rows.every((row: { filler: string; marker: string }) => row.filler.length === 1000 && row.marker === marker)).toBe(true);
    } finally {
      await Promise.all([client.end(), upstream.end()]);
    }
  });
});

describe('flow control of requests', () => {
  it('stops reading a client whose statement waits for an upstream connection once it has sent a megabyte more, and reads on when the statement runs', async () => {
    await setTransactionPool({ max_connections: 1, acquire_timeout_ms: 30_000 });
    const holder = new pg.Client({ connectionString: agent.connection_string });
    const waiter = new pg.Client({ connectionString: agent.connection_string });
    waiter.on('error', () => undefined);
    await Promise.all([holder.connect(), waiter.connect()]);
    const stream = (waiter as unknown as { connection: { stream: Socket } }).connection.stream;
    try {
      // The holder's open transaction keeps the only upstream connection: the waiter's query waits for it.
      await holder.query('begin');
      await holder.query('select 1');
      // The hint keeps the result cache from answering it (an earlier test ran the same text): it must wait for the connection.
      const waiting = waiter.query('/* pgward:no-cache */ select 2 as two');
      // 256 statements of 512 KB (the test gateway takes messages up to 1 MB): far more than the gateway's wait buffer and both sockets' kernel buffers (36 MB at most here) hold.
      const big = Buffer.from(`select length('${'x'.repeat(512 * 1024)}')\0`);
      const header = Buffer.alloc(5);
      header.write('Q');
      header.writeUInt32BE(4 + big.length, 1);
      const statement = Buffer.concat([header, big]);
      for (let i = 0; i < 256; i++) stream.write(statement);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      // Were the gateway reading on, all of it would have left the client within the second.
      expect(stream.writableLength).toBeGreaterThan(64 * 1024 * 1024);
      await holder.query('commit');
      expect((await waiting).rows).toEqual([{ two: 2 }]);
      const left = stream.writableLength;
      await waitFor(() => stream.writableLength < left, 10_000, 'the gateway to read the client again');
    } finally {
      stream.destroy();
      await holder.end();
    }
  });

  it('stops reading a client that sends without taking its replies, even replies the gateway makes itself', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    client.on('error', () => undefined);
    await client.connect();
    const stream = (client as unknown as { connection: { stream: Socket } }).connection.stream;
    try {
      stream.pause();
      // The gateway runs in this process: its buffers are this process's.
      const before = process.memoryUsage().arrayBuffers;
      // A FunctionCall is refused by the gateway itself with an ErrorResponse ten times its size: 15 MB of calls, 170 MB of refusals.
      const call = Buffer.from([0x46, 0, 0, 0, 14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
      for (let sent = 0; sent < 1_000_000; sent += 10_000) stream.write(Buffer.concat(Array.from({ length: 10_000 }, () => call)));
      const grown = (): number => process.memoryUsage().arrayBuffers - before;
      const limit = 80 * 1024 * 1024;
      const deadline = Date.now() + 5_000;
      await waitFor(() => grown() > limit || Date.now() > deadline, 10_000, 'the refusals to pile up or the time to pass');
      // The client's own 15 MB of calls and the few MB of refusals the sockets hold, not 170 MB.
      expect(grown()).toBeLessThan(limit);
      const other = new pg.Client({ connectionString: agent.connection_string });
      await other.connect();
      expect((await other.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      await other.end();
    } finally {
      stream.destroy();
    }
  });
});
