import { execFileSync } from 'node:child_process';
import { chmod, chown, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import pg from 'pg';
import { serialize } from 'pg-protocol';
import type { DatabaseError, DataRowMessage, ReadyForQueryMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sendCancel } from '../../proxy/upstream/cancel.js';
import { connectUpstream, UpstreamError, type UpstreamConnection, type UpstreamTarget } from '../../proxy/upstream/connection.js';
import { PoolError, UpstreamPool, type PoolConfig } from '../../proxy/upstream/pool.js';
import { createScramVerifier, parseClientFirst, serverFirst, verifyClientFinal } from '../../src/crypto/scram.js';
import { scramClientFinal, scramClientFirst, verifyServerFinal } from '../../src/crypto/scram-client.js';
import { startEmbeddedPostgres, type EmbeddedPg } from '../../src/pg/embedded.js';
import { freePort } from '../support/free-port.js';
import { openIdle } from '../support/upstream-pool.js';

const SCRAM_PASSWORD = 'scram-secret-Ω';
const MD5_PASSWORD = 'md5-secret';
const CLEAR_PASSWORD = 'clear-secret';

/**
 * An embedded PostgreSQL whose pg_hba demands SCRAM of everyone except three roles, which get trust,
 * md5 and cleartext password. It is stopped and started again by the recovery test, so its
 * directory outlives a stop.
 */
let dir: string;
let port: number;
let server: EmbeddedPg;

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function target(overrides: Partial<UpstreamTarget> = {}): UpstreamTarget {
  return {
    host: '127.0.0.1',
    port,
    database: 'postgres',
    user: 'pgw_up_scram',
    password: SCRAM_PASSWORD,
    sslMode: 'disable',
    applicationName: 'pgw_up_test',
    connectTimeoutMs: 5_000,
    ...overrides,
  };
}

interface QueryResult {
  readonly rows: (string | null)[][];
  readonly error: DatabaseError | undefined;
  readonly status: string;
}

/** A simple query written on the handed-over connection, read through its inlet with pg-protocol's Parser up to ReadyForQuery. */
function query(connection: UpstreamConnection, sql: string): Promise<QueryResult> {
  const { socket, inlet } = connection;
  const parser = new Parser();
  const rows: (string | null)[][] = [];
  let error: DatabaseError | undefined;
  return new Promise((resolve, reject) => {
    const bytes = (chunk: Buffer): void =>
      parser.parse(chunk, (message) => {
        if (message.name === 'dataRow') rows.push((message as DataRowMessage).fields as (string | null)[]);
        if (message.name === 'error') error = message as DatabaseError;
        if (message.name === 'readyForQuery') {
          done();
          resolve({ rows, error, status: (message as ReadyForQueryMessage).status });
        }
      });
    const ended = (): void => {
      done();
      reject(new Error('the upstream connection closed during the query'));
    };
    const done = (): void => inlet.receive(undefined);
    inlet.receive({ bytes, ended });
    socket.write(serialize.query(sql));
  });
}

async function scalar(connection: UpstreamConnection, sql: string): Promise<string | null> {
  const result = await query(connection, sql);
  if (result.error) throw result.error;
  return result.rows[0]![0]!;
}

async function serverConnections(applicationName: string): Promise<number> {
  return admin(async (client) => {
    const { rows } = await client.query<{ n: number }>('select count(*)::int as n from pg_stat_activity where application_name = $1', [applicationName]);
    return rows[0]!.n;
  });
}

/** Whether the backend is running pg_sleep, so that a cancel request has something to cancel. */
async function sleeping(pid: number): Promise<boolean> {
  return admin(async (client) => {
    const { rows } = await client.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where pid = $1 and state = 'active' and query like '%pg_sleep%'`, [pid]);
    return rows[0]!.n === 1;
  });
}

function poolConfig(overrides: Partial<PoolConfig> = {}): PoolConfig {
  return { mode: 'transaction', max_connections: 5, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 10_000, ...overrides };
}

let lastApp = 0;
function appName(): string {
  return `pgw_up_pool_${++lastApp}`;
}

function backendMessage(type: string, body: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([header, body]);
}

function int32s(...values: number[]): Buffer {
  const buffer = Buffer.alloc(4 * values.length);
  values.forEach((value, index) => buffer.writeInt32BE(value, 4 * index));
  return buffer;
}

/** A TCP server that answers the startup message with `reply` (or never, without one). */
async function fakeServer(reply?: Buffer): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const fake = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    if (reply) socket.once('data', () => socket.write(reply));
  });
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
  return {
    port: (fake.address() as net.AddressInfo).port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => fake.close(() => resolve()));
    },
  };
}

function expectUpstreamError(error: unknown, code: UpstreamError['code']): UpstreamError {
  expect(error).toBeInstanceOf(UpstreamError);
  expect((error as UpstreamError).code).toBe(code);
  return error as UpstreamError;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgward-upstream-'));
  await chmod(dir, 0o755);
  port = await freePort();
  server = await startEmbeddedPostgres({ dir, port });
  await admin(async (client) => {
    await client.query(`set password_encryption = 'scram-sha-256'`);
    await client.query(`create role pgw_up_scram login password '${SCRAM_PASSWORD}'`);
    await client.query(`create role pgw_up_clear login password '${CLEAR_PASSWORD}'`);
    await client.query('create role pgw_up_trust login');
    await client.query(`set password_encryption = 'md5'`);
    await client.query(`create role pgw_up_md5 login password '${MD5_PASSWORD}'`);
  });
  const hba = join(dir, 'pg', 'pg_hba.conf');
  const rules = ['host all pgw_up_trust 127.0.0.1/32 trust', 'host all pgw_up_md5 127.0.0.1/32 md5', 'host all pgw_up_clear 127.0.0.1/32 password'];
  await writeFile(hba, `${rules.join('\n')}\n${await readFile(hba, 'utf8')}`);
  await admin((client) => client.query('select pg_reload_conf()'));
  await until(
    () => connectUpstream(target({ user: 'pgw_up_trust', password: '' })).then((connection) => (connection.close(), true), () => false),
    'pg_hba.conf to be reloaded',
  );
});

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('connectUpstream', () => {
  it('connects with trust and hands over a connection nobody receives from, with the start-up parameters and backend key', async () => {
    const connection = await connectUpstream(target({ user: 'pgw_up_trust', password: '' }));
    try {
      expect(connection.parameters.get('server_version')).toMatch(/^\d+/);
      expect(connection.parameters.get('client_encoding')).toBe('UTF8');
      expect(connection.parameters.get('application_name')).toBe('pgw_up_test');
      expect(connection.inlet.receiving).toBe(false);
      expect(connection.backendKey.secretKey).toHaveLength(4);
      expect(connection.target).not.toHaveProperty('password');
      expect(Number(await scalar(connection, 'select pg_backend_pid()'))).toBe(connection.backendKey.processId);
    } finally {
      connection.close();
    }
  });

  it('connects to the test server (trust on the local one)', async () => {
    const url = new URL(inject('pgUrl'));
    const connection = await connectUpstream({
      host: url.hostname,
      port: Number(url.port || 5432),
      database: decodeURIComponent(url.pathname.slice(1)) || 'postgres',
      user: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      sslMode: 'prefer',
      connectTimeoutMs: 5_000,
    });
    try {
      expect(connection.parameters.get('server_version')).toBeTruthy();
      expect(connection.parameters.get('client_encoding')).toBe('UTF8');
      expect(await scalar(connection, 'select 1')).toBe('1');
    } finally {
      connection.close();
    }
  });

  it.each([
    ['SCRAM-SHA-256', 'pgw_up_scram', SCRAM_PASSWORD],
    ['MD5', 'pgw_up_md5', MD5_PASSWORD],
    ['cleartext', 'pgw_up_clear', CLEAR_PASSWORD],
  ])('authenticates with %s', async (_method, user, password) => {
    const connection = await connectUpstream(target({ user, password, extraStartupParameters: { statement_timeout: '4321' } }));
    try {
      expect(await scalar(connection, 'select current_user')).toBe(user);
      expect(await scalar(connection, 'show statement_timeout')).toBe('4321ms');
    } finally {
      connection.close();
    }
  });

  it.each([
    ['pgw_up_scram', 'wrong-scram-password'],
    ['pgw_up_md5', 'wrong-md5-password'],
  ])('refuses a wrong password for %s with AUTH_FAILED 28P01, without the password in the message', async (user, password) => {
    const error = expectUpstreamError(await failure(connectUpstream(target({ user, password }))), 'AUTH_FAILED');
    expect(error.details.sqlstate).toBe('28P01');
    expect(error.message).not.toContain(password);
    expect(JSON.stringify(error)).not.toContain(password);
  });

  it('reports an unknown database as SERVER_ERROR 3D000', async () => {
    const error = expectUpstreamError(await failure(connectUpstream(target({ database: 'pgw_up_no_such_db' }))), 'SERVER_ERROR');
    expect(error.details.sqlstate).toBe('3D000');
    expect(error.details.serverMessage).toContain('pgw_up_no_such_db');
  });

  it('fails fast with CONNECT_FAILED on a closed port', async () => {
    const closed = await freePort();
    const started = Date.now();
    expectUpstreamError(await failure(connectUpstream(target({ port: closed, connectTimeoutMs: 20_000 }))), 'CONNECT_FAILED');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('refuses sslmode require against a server without TLS, and falls back to plain for prefer', async () => {
    expectUpstreamError(await failure(connectUpstream(target({ sslMode: 'require' }))), 'TLS_REFUSED');
    expectUpstreamError(await failure(connectUpstream(target({ sslMode: 'verify-full' }))), 'TLS_REFUSED');
    const connection = await connectUpstream(target({ sslMode: 'prefer' }));
    try {
      expect(connection.socket).not.toBeInstanceOf(tls.TLSSocket);
      expect(await scalar(connection, 'select 1')).toBe('1');
    } finally {
      connection.close();
    }
  });

  it('gives up with TIMEOUT when the server never answers', async () => {
    const silent = await fakeServer();
    try {
      expectUpstreamError(await failure(connectUpstream(target({ port: silent.port, connectTimeoutMs: 200 }))), 'TIMEOUT');
    } finally {
      await silent.close();
    }
  });

  it('refuses authentication methods it does not speak with AUTH_UNSUPPORTED', async () => {
    const gss = await fakeServer(backendMessage('R', int32s(7)));
    try {
      expectUpstreamError(await failure(connectUpstream(target({ port: gss.port }))), 'AUTH_UNSUPPORTED');
    } finally {
      await gss.close();
    }
  });

  it('fails loudly when bytes follow ReadyForQuery in the start-up replies', async () => {
    const chatty = await fakeServer(
      Buffer.concat([backendMessage('R', int32s(0)), backendMessage('K', int32s(42, 7)), backendMessage('Z', Buffer.from('I')), backendMessage('Z', Buffer.from('I'))]),
    );
    try {
      expectUpstreamError(await failure(connectUpstream(target({ port: chatty.port }))), 'PROTOCOL_ERROR');
    } finally {
      await chatty.close();
    }
  });

  it('refuses startup parameters that would replace its own or smuggle NUL', async () => {
    await expect(connectUpstream(target({ extraStartupParameters: { user: 'postgres' } }))).rejects.toThrow(RangeError);
    await expect(connectUpstream(target({ extraStartupParameters: { options: 'a\0user' } }))).rejects.toThrow(RangeError);
  });
});

describe('SCRAM client against the server side', () => {
  it('completes an exchange, and tells a server that does not know the password', async () => {
    const verifier = createScramVerifier('right');
    const { message, state } = scramClientFirst();
    const server = serverFirst(parseClientFirst(message), verifier);
    const final = await scramClientFinal(state, server.message, 'right');
    const result = verifyClientFinal(server.session, final.message);
    expect(result.ok).toBe(true);
    expect(verifyServerFinal(final.expectedServerSignature, result.ok ? result.serverFinal : '')).toBe(true);
    const impostor = verifyClientFinal({ ...server.session, serverKey: Buffer.from(createScramVerifier('other').server_key, 'base64') }, final.message);
    expect(impostor.ok).toBe(true);
    expect(verifyServerFinal(final.expectedServerSignature, impostor.ok ? impostor.serverFinal : '')).toBe(false);
    expect(verifyServerFinal(final.expectedServerSignature, 'v=bm90IGEgc2lnbmF0dXJl')).toBe(false);
  });

  it('refuses a server nonce that does not extend its own', async () => {
    const { state } = scramClientFirst('clientnonce');
    await expect(scramClientFinal(state, 'r=othernonceXYZ,s=c2FsdHNhbHRzYWx0c2FsdA==,i=4096', 'x')).rejects.toMatchObject({ code: 'NONCE_MISMATCH' });
  });
});

describe('TLS', () => {
  beforeAll(async () => {
    const dataDir = join(dir, 'pg');
    const owner = await stat(dataDir);
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=pgward-upstream-test', '-keyout', join(dataDir, 'server.key'), '-out', join(dataDir, 'server.crt')], { stdio: 'ignore' });
    for (const file of ['server.key', 'server.crt']) {
      await chown(join(dataDir, file), owner.uid, owner.gid);
      await chmod(join(dataDir, file), 0o600);
    }
    await admin(async (client) => {
      await client.query('alter system set ssl = on');
      await client.query('select pg_reload_conf()');
    });
    await until(() => connectUpstream(target({ sslMode: 'require' })).then((connection) => (connection.close(), true), () => false), 'TLS to be enabled');
  });

  afterAll(async () => {
    await admin(async (client) => {
      await client.query('alter system reset ssl');
      await client.query('select pg_reload_conf()');
    });
  });

  it('encrypts with sslmode require and prefer', async () => {
    for (const sslMode of ['require', 'prefer'] as const) {
      const connection = await connectUpstream(target({ sslMode }));
      try {
        expect(connection.socket).toBeInstanceOf(tls.TLSSocket);
        expect(await scalar(connection, 'select ssl from pg_stat_ssl where pid = pg_backend_pid()')).toBe('t');
      } finally {
        connection.close();
      }
    }
  });

  it('refuses a certificate it cannot verify with verify-ca and verify-full', async () => {
    for (const sslMode of ['verify-ca', 'verify-full'] as const) {
      expectUpstreamError(await failure(connectUpstream(target({ sslMode }))), 'TLS_REFUSED');
    }
  });

  it('sends a cancel request over TLS', async () => {
    const connection = await connectUpstream(target({ sslMode: 'require' }));
    try {
      const running = query(connection, 'select pg_sleep(10)');
      await until(() => sleeping(connection.backendKey.processId), 'the query to start');
      expect(await sendCancel(target({ sslMode: 'require' }), connection.backendKey)).toBe(true);
      expect((await running).error?.code).toBe('57014');
    } finally {
      connection.close();
    }
  });
});

describe('sendCancel', () => {
  it('cancels a running query: it ends with 57014 long before it would have finished', async () => {
    const connection = await connectUpstream(target());
    try {
      const started = Date.now();
      const running = query(connection, 'select pg_sleep(10)');
      await until(() => sleeping(connection.backendKey.processId), 'the query to start');
      expect(await sendCancel(target(), connection.backendKey)).toBe(true);
      const result = await running;
      expect(result.error?.code).toBe('57014');
      expect(result.status).toBe('I');
      expect(Date.now() - started).toBeLessThan(8_000);
    } finally {
      connection.close();
    }
  });

  it('reports false when the upstream cannot be reached', async () => {
    expect(await sendCancel(target({ port: await freePort() }), { processId: 1, secretKey: Buffer.alloc(4) })).toBe(false);
  });
});

describe('UpstreamPool', () => {
  it('never opens more than max_connections under 20 concurrent acquires', async () => {
    const app = appName();
    const pool = new UpstreamPool(target({ applicationName: app }), poolConfig({ max_connections: 5 }));
    try {
      const held: UpstreamConnection[] = [];
      const all = Array.from({ length: 20 }, () => pool.acquire().then((connection) => held.push(connection)));
      await until(() => held.length === 5, 'five connections');
      expect(pool.stats()).toEqual({ size: 5, idle: 0, inUse: 5, waiting: 15 });
      expect(await serverConnections(app)).toBe(5);
      const ids = new Set<number>();
      for (let released = 0; released < 20; released++) {
        await until(() => held.length > 0, 'a connection to release');
        const connection = held.shift()!;
        ids.add(connection.id);
        expect(await scalar(connection, 'select 1')).toBe('1');
        await pool.release(connection, { reset: false });
        expect(pool.stats().size).toBeLessThanOrEqual(5);
      }
      await Promise.all(all);
      expect(ids.size).toBe(5);
      expect(pool.stats()).toEqual({ size: 5, idle: 5, inUse: 0, waiting: 0 });
      expect(await serverConnections(app)).toBe(5);
    } finally {
      await pool.close();
    }
    await until(async () => (await serverConnections(app)) === 0, 'the pool to close its connections');
  });

  it('serves waiters in FIFO order, times them out with ACQUIRE_TIMEOUT and lets them abort', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 1, acquire_timeout_ms: 300 }));
    try {
      await openIdle(pool, 1);
      const first = await pool.acquire();
      const order: number[] = [];
      const second = pool.acquire().then((connection) => (order.push(2), connection));
      const third = pool.acquire().then((connection) => (order.push(3), connection));
      expect(pool.stats()).toEqual({ size: 1, idle: 0, inUse: 1, waiting: 2 });
      await pool.release(first, { reset: false });
      const secondConnection = await second;
      expect(order).toEqual([2]);
      expect(secondConnection.id).toBe(first.id);
      await pool.release(secondConnection, { reset: false });
      const thirdConnection = await third;
      expect(order).toEqual([2, 3]);

      const timedOut = await failure(pool.acquire());
      expect(timedOut).toBeInstanceOf(PoolError);
      expect((timedOut as PoolError).code).toBe('ACQUIRE_TIMEOUT');

      const controller = new AbortController();
      const aborted = pool.acquire({ signal: controller.signal });
      controller.abort(new Error('the client went away'));
      await expect(aborted).rejects.toThrow('the client went away');
      expect(pool.stats()).toEqual({ size: 1, idle: 0, inUse: 1, waiting: 0 });

      const waiting = pool.acquire();
      await pool.close();
      await expect(waiting).rejects.toMatchObject({ code: 'CLOSED' });
      await expect(pool.acquire()).rejects.toMatchObject({ code: 'CLOSED' });
      expect(thirdConnection.socket.destroyed).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('resets a released connection with DISCARD ALL, and destroys one released inside a transaction', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 1 }));
    try {
      const connection = await pool.acquire();
      await query(connection, `create temp table pgw_reset_probe (x int); set statement_timeout = '1234ms'`);
      await pool.release(connection, { reset: true });
      expect(pool.stats()).toEqual({ size: 1, idle: 1, inUse: 0, waiting: 0 });

      const again = await pool.acquire();
      expect(again.id).toBe(connection.id);
      expect(await scalar(again, `select to_regclass('pg_temp.pgw_reset_probe')::text`)).toBeNull();
      expect(await scalar(again, 'show statement_timeout')).toBe('0');

      expect((await query(again, 'begin')).status).toBe('T');
      await pool.release(again, { reset: true });
      expect(pool.stats()).toEqual({ size: 0, idle: 0, inUse: 0, waiting: 0 });
      const fresh = await pool.acquire();
      expect(fresh.id).not.toBe(again.id);
      expect(await scalar(fresh, 'select 1')).toBe('1');
      await pool.release(fresh, { reset: false });
    } finally {
      await pool.close();
    }
  });

  it("resets a connection whose session set statement_timeout to 1 ms, the reset not cancelled by it", async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 1 }));
    try {
      const connection = await pool.acquire();
      // Dropping 300 temp tables takes DISCARD ALL far longer than a millisecond.
      await query(connection, `do $$ begin for i in 1..300 loop execute format('create temp table pgw_slow_reset_%s (x int)', i); end loop; end $$`);
      await query(connection, 'set statement_timeout = 1');
      await pool.release(connection, { reset: true });
      expect(pool.stats()).toEqual({ size: 1, idle: 1, inUse: 0, waiting: 0 });

      const again = await pool.acquire();
      expect(again.id).toBe(connection.id);
      expect(await scalar(again, `select count(*)::text from pg_class where relname like 'pgw_slow_reset_%' and relpersistence = 't'`)).toBe('0');
      expect(await scalar(again, 'show statement_timeout')).toBe('0');
      await pool.release(again, { reset: false });
    } finally {
      await pool.close();
    }
  });

  it('lets a holder park a connection and take it up again, and reclaims the oldest parked one at max_connections', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 2 }));
    try {
      const [a, b] = await Promise.all([pool.acquire(), pool.acquire()]);
      const reclaimed: string[] = [];
      expect(pool.park(a!, () => reclaimed.push('a'))).toBe(true);
      expect(pool.park(b!, () => reclaimed.push('b'))).toBe(true);
      expect(pool.stats()).toEqual({ size: 2, idle: 2, inUse: 0, waiting: 0 });
      expect(pool.unpark(b!)).toBe(true);
      expect(pool.park(b!, () => reclaimed.push('b'))).toBe(true);

      const taken = pool.tryAcquire();
      expect(taken?.id).toBe(a!.id);
      expect(reclaimed).toEqual(['a']);
      expect(pool.unpark(a!)).toBe(false);
      expect(await scalar(taken!, 'select 1')).toBe('1');

      const waited = await pool.acquire();
      expect(waited.id).toBe(b!.id);
      expect(reclaimed).toEqual(['a', 'b']);
      expect(pool.stats()).toEqual({ size: 2, idle: 0, inUse: 2, waiting: 0 });

      const third = pool.acquire();
      expect(pool.park(taken!, () => reclaimed.push('never'))).toBe(false);
      await pool.release(taken!, { reset: false });
      expect((await third).id).toBe(a!.id);
      expect(reclaimed).toEqual(['a', 'b']);
    } finally {
      await pool.close();
    }
  });

  it('neither parks nor keeps idle a connection its reusable predicate refuses: it closes once let go, and the next acquire opens another', async () => {
    const application = appName();
    const pool = new UpstreamPool(target({ applicationName: application }), poolConfig({ max_connections: 2 }), undefined, undefined, (connection) => connection.id % 2 === 0);
    try {
      const refused: UpstreamConnection[] = [];
      const kept: UpstreamConnection[] = [];
      // Ids are process-wide: acquire until one of each kind is held.
      while (refused.length === 0 || kept.length === 0) {
        const connection = await pool.acquire();
        (connection.id % 2 === 0 ? kept : refused).push(connection);
        if (refused.length > 1 || kept.length > 1) await pool.release((refused.length > 1 ? refused : kept).pop()!, { reset: false });
      }
      expect(pool.park(refused[0]!, () => undefined)).toBe(false);
      expect(pool.park(kept[0]!, () => undefined)).toBe(true);
      await pool.release(refused[0]!, { reset: false });
      await until(() => refused[0]!.socket.destroyed, 'the refused connection closed');
      expect(pool.stats()).toEqual({ size: 1, idle: 1, inUse: 0, waiting: 0 });
      await until(async () => (await serverConnections(application)) === 1, 'one backend left');
      const next = await pool.acquire();
      expect(next.id).not.toBe(refused[0]!.id);
      await pool.release(next, { reset: false });
    } finally {
      await pool.close();
    }
  });

  it('times out an acquirer with ACQUIRE_TIMEOUT while its connection is still being opened, and keeps the slot until the open ends', async () => {
    const silent = await fakeServer();
    const pool = new UpstreamPool(target({ port: silent.port, connectTimeoutMs: 30_000 }), poolConfig({ max_connections: 1, acquire_timeout_ms: 200 }));
    try {
      const opening = failure(pool.acquire());
      const queued = failure(pool.acquire());
      expect(pool.stats()).toEqual({ size: 1, idle: 0, inUse: 0, waiting: 1 });
      for (const error of [await opening, await queued]) {
        expect(error).toBeInstanceOf(PoolError);
        expect((error as PoolError).code).toBe('ACQUIRE_TIMEOUT');
      }
      expect(pool.stats()).toEqual({ size: 1, idle: 0, inUse: 0, waiting: 0 });
    } finally {
      await pool.close();
      await silent.close();
    }
    await until(() => pool.stats().size === 0, 'the aborted open to give up its slot');
  });

  it('returns a connection parked past the idle timeout to the idle list, and reclaims parked ones when it closes', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 2, min_connections: 1, idle_timeout_ms: 300 }));
    const connection = await pool.acquire();
    let reclaims = 0;
    pool.park(connection, () => reclaims++);
    await until(() => reclaims === 1, 'the parked connection to be reclaimed');
    expect(pool.unpark(connection)).toBe(false);
    expect(pool.stats()).toEqual({ size: 1, idle: 1, inUse: 0, waiting: 0 });

    const again = await pool.acquire();
    expect(again.id).toBe(connection.id);
    pool.park(again, () => reclaims++);
    await pool.close();
    expect(reclaims).toBe(2);
    expect(again.socket.destroyed).toBe(true);
  });

  it('closes gracefully: the connection in use finishes its work and closes when released; acquirers are refused', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 2 }));
    const busy = await pool.acquire();
    const idle = await pool.acquire();
    await pool.release(idle, { reset: false });
    await pool.close({ graceful: true });
    expect(idle.socket.destroyed).toBe(true);
    expect(busy.socket.destroyed).toBe(false);
    expect(await scalar(busy, 'select 42')).toBe('42');
    await expect(pool.acquire()).rejects.toMatchObject({ code: 'CLOSED' });
    await pool.release(busy, { reset: false });
    await until(() => busy.socket.destroyed, 'the released connection to close');
    expect(pool.stats()).toEqual({ size: 0, idle: 0, inUse: 0, waiting: 0 });
  });

  it('destroys a connection whose server speaks while nobody receives, for either kind of inlet', async () => {
    for (const sslMode of ['disable', 'prefer'] as const) {
      const connection = await connectUpstream(target({ sslMode }));
      connection.socket.write(serialize.query('select 1'));
      await until(() => connection.socket.destroyed, `the ${sslMode} connection to be destroyed`);
    }
  });

  it('destroys a connection released with a receiver still set', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig());
    try {
      const connection = await pool.acquire();
      connection.inlet.receive({ bytes: () => undefined, ended: () => undefined });
      await pool.release(connection, { reset: false });
      expect(connection.socket.destroyed).toBe(true);
      expect(pool.stats().size).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it('closes idle connections beyond min_connections after the idle timeout', async () => {
    const app = appName();
    const pool = new UpstreamPool(target({ applicationName: app }), poolConfig({ max_connections: 3, min_connections: 1, idle_timeout_ms: 300 }));
    try {
      const connections = await Promise.all([pool.acquire(), pool.acquire(), pool.acquire()]);
      expect(await serverConnections(app)).toBe(3);
      for (const connection of connections) await pool.release(connection, { reset: false });
      await until(() => pool.stats().size === 1, 'the surplus to be closed');
      expect(pool.stats()).toEqual({ size: 1, idle: 1, inUse: 0, waiting: 0 });
      await until(async () => (await serverConnections(app)) === 1, 'the server to see one connection');
    } finally {
      await pool.close();
    }
  });

  it('drops an idle connection the server terminated, and the next acquire works', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig());
    try {
      const connection = await pool.acquire();
      await pool.release(connection, { reset: false });
      await admin((client) => client.query('select pg_terminate_backend($1)', [connection.backendKey.processId]));
      await until(() => pool.stats().idle === 0, 'the terminated connection to be dropped');
      const next = await pool.acquire();
      expect(next.id).not.toBe(connection.id);
      expect(await scalar(next, 'select 1')).toBe('1');
      pool.destroy(next);
      expect(pool.stats().size).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it('fails fast while the server is down and recovers by itself when it is back', async () => {
    const pool = new UpstreamPool(target({ applicationName: appName() }), poolConfig({ max_connections: 2 }));
    try {
      await pool.release(await pool.acquire(), { reset: false });
      await server.stop();
      await until(() => pool.stats().idle === 0, 'the idle connection to be dropped');

      const started = Date.now();
      const [first, second] = await Promise.all([failure(pool.acquire()), failure(pool.acquire())]);
      expectUpstreamError(first, 'CONNECT_FAILED');
      expectUpstreamError(second, 'CONNECT_FAILED');
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(pool.stats()).toEqual({ size: 0, idle: 0, inUse: 0, waiting: 0 });

      server = await startEmbeddedPostgres({ dir, port });
      const connection = await pool.acquire();
      expect(await scalar(connection, 'select 1')).toBe('1');
      await pool.release(connection, { reset: true });
    } finally {
      await pool.close();
    }
  });
});
