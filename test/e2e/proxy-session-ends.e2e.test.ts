/**
 * Sessions that end at awkward moments: how a session gives its upstream connection back when the
 * client or the upstream goes away at an awkward moment, and what parks or pins a connection in
 * transaction pooling. Each test runs on a pool of one connection, so a connection that is not
 * given back shows as the next login waiting for it in vain.
 */
import { createConnection, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { openSession, waitFor } from '../support/wire.js';

let gateway: TestGateway;
let agent: AgentSecrets;

beforeAll(async () => {
  gateway = await startGateway('proxy_session_ends');
  agent = await gateway.register('session-ends');
});
afterAll(async () => {
  await gateway?.stop();
});

/** Sets the agent's database pool through the REST API; the next login builds the new pool. */
async function setPool(pool: { mode: 'transaction' | 'session'; max_connections: number; acquire_timeout_ms: number }): Promise<void> {
  const databases = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
  const databaseId = (databases.json() as { databases: { id: string }[] }).databases[0]!.id;
  const patched = await gateway.api.call(gateway.owner.apiKey, {
    method: 'PATCH',
    url: `/v1/projects/${gateway.projectId}/databases/${databaseId}`,
    payload: { pool_config: { min_connections: 0, idle_timeout_ms: 60_000, ...pool } },
  });
  expect(patched.statusCode).toBe(200);
  // The proxy's view of the database follows the event store.
  await new Promise((resolve) => setTimeout(resolve, 500));
}

/** Logs in and runs one statement on a connection of its own: its value, or the SQLSTATE it failed with. */
async function loginAndSelect(value: number): Promise<{ value?: number; code?: string }> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query(`select ${value}::int as value`);
    return { value: rows[0].value as number };
  } catch (error) {
    return { code: (error as { code?: string }).code ?? (error as Error).message };
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A simple-protocol Query message, as a client writes it. */
function queryMessage(text: string): Buffer {
  const sql = Buffer.from(`${text}\0`);
  const head = Buffer.alloc(5);
  head.write('Q');
  head.writeUInt32BE(4 + sql.length, 1);
  return Buffer.concat([head, sql]);
}

/** Waits until the upstream database holds the order `id`, read on a connection of its own. */
async function untilOrderExists(id: number, what: string): Promise<void> {
  const upstream = new pg.Client({ connectionString: gateway.upstream.url });
  await upstream.connect();
  try {
    await waitFor(async () => (await upstream.query('select 1 from orders where id = $1', [id])).rowCount === 1, 10_000, what);
  } finally {
    await upstream.end();
  }
}

function streamOf(client: pg.Client): Socket {
  return (client as unknown as { connection: { stream: Socket } }).connection.stream;
}

describe('an upstream connection lost in the middle of a statement', () => {
  it('frees its place in the pool: the next login gets a new connection', async () => {
    await setPool({ mode: 'transaction', max_connections: 1, acquire_timeout_ms: 2_000 });
    const { client } = await openSession(agent.connection_string);
    const upstream = new pg.Client({ connectionString: gateway.upstream.url });
    const locker = new pg.Client({ connectionString: gateway.upstream.url });
    await Promise.all([upstream.connect(), locker.connect()]);
    try {
      const marker = `session_ends_lost_${process.pid}`;
      // The statement waits upstream on a lock the test holds (the policy refuses pg_sleep).
      await locker.query('begin');
      await locker.query('lock table orders in access exclusive mode');
      const running = client.query(`select count(*) from orders where customer <> '${marker}'`).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      let pid: number | undefined;
      await waitFor(
        async () => {
          const { rows } = await upstream.query(`select pid from pg_stat_activity where query like $1 and pid <> pg_backend_pid()`, [`%'${marker}'%`]);
          pid = rows[0]?.pid as number | undefined;
          return pid !== undefined;
        },
        5_000,
        'the statement to run upstream',
      );
      await upstream.query('select pg_terminate_backend($1)', [pid]);
      await locker.query('rollback');
      expect(await running).toBeInstanceOf(Error);
      // The pool's only connection is gone; a new login must not wait for it.
      expect(await loginAndSelect(7)).toEqual({ value: 7 });
    } finally {
      await Promise.all([client.end().catch(() => undefined), upstream.end(), locker.end()]);
    }
  });
});

describe('a client that gives up while its login waits for an upstream connection', () => {
  it('does not keep the connection it is granted after it left (session pooling)', async () => {
    await setPool({ mode: 'session', max_connections: 1, acquire_timeout_ms: 3_000 });
    // Session pooling: the holder keeps the only connection from login to logout.
    const holder = new pg.Client({ connectionString: agent.connection_string });
    await holder.connect();
    // This login waits for the holder's connection; the client stops waiting after 500 ms and closes its socket.
    const impatient = new pg.Client({ connectionString: agent.connection_string, connectionTimeoutMillis: 500 });
    impatient.on('error', () => undefined);
    const gaveUp = await impatient.connect().then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(gaveUp).toBeInstanceOf(Error);
    // Time for the gateway to see that client's socket close.
    await new Promise((resolve) => setTimeout(resolve, 300));
    // The holder leaves while the gateway still waits for a connection on behalf of the client that left.
    await holder.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The connection must go back to the pool, not to a session whose client is gone.
    expect(await loginAndSelect(8)).toEqual({ value: 8 });
  });
});

describe('a client between transactions (transaction pooling)', () => {
  it.each([
    ['Flush', Buffer.from([0x48, 0, 0, 0, 4])],
    ['CopyDone outside COPY', Buffer.from([0x63, 0, 0, 0, 4])],
  ])('lets another session take its parked connection after it sends %s', async (_what, message) => {
    await setPool({ mode: 'transaction', max_connections: 1, acquire_timeout_ms: 2_000 });
    const { client } = await openSession(agent.connection_string);
    try {
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      // A message the server answers nothing to (PostgreSQL ignores copy messages outside COPY).
      streamOf(client).write(message);
      await new Promise((resolve) => setTimeout(resolve, 200));
      // The only connection is parked with a session that runs nothing: another login takes it.
      expect(await loginAndSelect(9)).toEqual({ value: 9 });
      expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
    } finally {
      await client.end().catch(() => undefined);
    }
  });
});

describe('an extended-protocol batch whose wait for an upstream connection times out', () => {
  it('is answered with one error and one ReadyForQuery, as PostgreSQL answers a failed batch', async () => {
    await setPool({ mode: 'transaction', max_connections: 1, acquire_timeout_ms: 1_000 });
    // The waiter logs in first (a login needs the connection too), then the holder takes it into a transaction.
    const { client: waiter } = await openSession(agent.connection_string);
    const { client: holder } = await openSession(agent.connection_string);
    try {
      await holder.query('begin');
      await holder.query('select 1');
      // Parse, Bind, Describe, Execute, Sync: the Parse waits for the holder's connection and gives up.
      const failed = waiter.query('select $1::int as v', [1]).then(
        () => undefined,
        (error: unknown) => error as { code?: string },
      );
      // node-postgres sends this one once the first is answered with ReadyForQuery.
      const next = waiter.query('select 2 as two').then(
        (result) => result.rows,
        (error: unknown) => error as Error,
      );
      expect((await failed)?.code).toBe('08006');
      await holder.query('commit');
      // Answers meant for the rest of the failed batch must not reach the next statement.
      expect(await next).toEqual([{ two: 2 }]);
      expect((await waiter.query('select 3 as three')).rows).toEqual([{ three: 3 }]);
    } finally {
      await Promise.all([waiter.end().catch(() => undefined), holder.end().catch(() => undefined)]);
    }
  });
});

describe('a statement sent in the same write as Terminate', () => {
  it('runs, as PostgreSQL runs every message before a Terminate', async () => {
    await setPool({ mode: 'transaction', max_connections: 2, acquire_timeout_ms: 2_000 });
    const { client } = await openSession(agent.connection_string);
    const terminate = Buffer.from([0x58, 0, 0, 0, 4]);
    const stream = streamOf(client);
    stream.write(Buffer.concat([queryMessage(`insert into orders values (90001, 'before terminate', 1)`), terminate]));
    await new Promise((resolve) => stream.once('close', resolve));
    await untilOrderExists(90001, 'the insert sent before Terminate to run');
  });
});

describe('a client that leaves while its statement runs', () => {
  it('still gets the statement audited, as one that may have run: it was sent upstream', async () => {
    await setPool({ mode: 'transaction', max_connections: 2, acquire_timeout_ms: 2_000 });
    const leaver = await gateway.register('session-ends-leaver');
    const { client } = await openSession(leaver.connection_string);
    // Its answer takes a million-row join: the proxy reads the client's leaving first (an insert of one row alone
    // could answer before, and be audited as ended). The proxy then cancels it upstream, so whether it ran is not known.
    const text = `insert into orders select 90002, 'left at once', 1 where (select count(*) from orders a cross join orders b) > 0`;
    const stream = streamOf(client);
    // The statement, then the socket closes without waiting for the answer.
    stream.end(queryMessage(text));
    await new Promise((resolve) => stream.once('close', resolve));
    const audited = await gateway.decisionsOf(leaver.credential.id, 1);
    const record = audited.find((decision) => decision.sql === text);
    expect(record).toMatchObject({ event: 'query', reason: "the connection closed before the statement's end was seen; it may have run." });
  });
});

describe('a client that does not complete its login in time', () => {
  let timed: TestGateway;
  let secrets: AgentSecrets;
  beforeAll(async () => {
    timed = await startGateway('proxy_login_timeout', undefined, 1_000);
    secrets = await timed.register('login-timeout');
  });
  afterAll(async () => {
    await timed?.stop();
  });

  /** Connects, writes `sent`, and collects what the proxy answers until it closes the connection. */
  async function answerTo(sent: Buffer): Promise<{ answer: Buffer; closedAfterMs: number }> {
    const url = new URL(secrets.connection_string);
    const socket = createConnection({ host: url.hostname, port: Number(url.port) });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    await new Promise((resolve) => socket.once('connect', resolve));
    const started = Date.now();
    if (sent.length > 0) socket.write(sent);
    await new Promise((resolve) => socket.once('close', resolve));
    return { answer: Buffer.concat(chunks), closedAfterMs: Date.now() - started };
  }

  function startupMessage(user: string, database: string): Buffer {
    const body = Buffer.from(`user\0${user}\0database\0${database}\0\0`);
    const head = Buffer.alloc(8);
    head.writeUInt32BE(8 + body.length, 0);
    head.writeUInt32BE(196608, 4);
    return Buffer.concat([head, body]);
  }

  it('is closed with 57014 when it sends nothing at all', async () => {
    const { answer, closedAfterMs } = await answerTo(Buffer.alloc(0));
    expect(answer.toString('latin1')).toContain('C57014\0');
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
  });

  it('is closed with 57014 when it stalls in the middle of SCRAM', async () => {
    const url = new URL(secrets.connection_string);
    const { answer } = await answerTo(startupMessage(decodeURIComponent(url.username), url.pathname.slice(1)));
    // AuthenticationSASL came first, then the timeout.
    expect(answer[0]).toBe('R'.charCodeAt(0));
    expect(answer.toString('latin1')).toContain('SCRAM-SHA-256');
    expect(answer.toString('latin1')).toContain('C57014\0');
  });

  it('leaves a session that logged in alone once the timeout has passed', async () => {
    const { client } = await openSession(secrets.connection_string);
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect((await client.query('select 7 as v')).rows).toEqual([{ v: 7 }]);
    } finally {
      await client.end();
    }
  });
});
