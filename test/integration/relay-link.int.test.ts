/**
 * The relay link against a real relay listener over real TLS sockets (docs/regions.md#the-link):
 * the peer's certificate checked by pin or by CA before the hello, the hello's proof of the link
 * secret (either secret of a rotation), the peer's region, and what each failure is classified as.
 * Until a test gives it a pool, the listener knows no database, so a link that passes every check
 * ends refused `unknown_database`. The last tests give it a real pool of the machine's PostgreSQL:
 * a link that ends idle hands its upstream connection back, reset; any other is closed.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { serialize } from 'pg-protocol';
import type { BackendMessage, DataRowMessage, ReadyForQueryMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createProxyMetrics } from '../../proxy/metrics.js';
import { openRelayLink, type LinkPeer, type RelayOrigin } from '../../proxy/relay/link.js';
import { startRelayListener, type RelayListenerOptions, type RunningRelayListener } from '../../proxy/relay/listener.js';
import { RelayError } from '../../proxy/relay/relay-error.js';
import { UpstreamPool } from '../../proxy/upstream/pool.js';
import { sendCancel } from '../../proxy/upstream/cancel.js';
import type { UpstreamConnection, UpstreamTarget } from '../../proxy/upstream/connection.js';
import type { UpstreamHandle } from '../../proxy/upstreams.js';
import type { DatabaseRow } from '../../projections/databases.js';
import { freePort } from '../support/free-port.js';
import { adminRows } from '../support/pg.js';
import { relayMaterial, type RelayMaterial } from '../support/relay-material.js';
import { waitFor } from '../support/wire.js';

const secret = randomBytes(32);
const previous = randomBytes(32);
const target = { project_id: 'prj_1', database_id: 'db_1', read_only: true, role: '', branch: '' };
const endpoint = { host: 'db.internal', port: 5432, database: 'shop', user: 'app', sslMode: 'disable' as const, connectTimeoutMs: 2_000 };



let peer: RelayMaterial;
let stranger: RelayMaterial;
let listener: RunningRelayListener;
let registry: Registry;
/** The listener's lookup of a link's target: none by default. */
let resolving: RelayListenerOptions['resolve'] = () => Promise.resolve(undefined);

/** A handle of the target whose real pool connects to `port` of this machine. */
function handleAt(port: number): UpstreamHandle {
  const pool = new UpstreamPool({ ...endpoint, host: '127.0.0.1', port, password: 'unused', connectTimeoutMs: 30_000 }, { mode: 'transaction', max_connections: 1, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 0 });
  const handle: UpstreamHandle = { database: { database_id: 'db_1', project_id: 'prj_1' } as DatabaseRow, pool, cancel: () => Promise.resolve(), onReplica: () => handle };
  return handle;
}

const origin = (peers: [string, LinkPeer][], signWith: Buffer = secret): RelayOrigin => ({ region: 'a', proxyId: 'proxy-a', peers: new Map(peers), secret: signWith });
const at = (region: string, trust: LinkPeer['trust'], host = '127.0.0.1', port = listener.port): [string, LinkPeer] => [region, { region, host, port, trust }];

/** How opening a link of `region` failed: the RelayError's reason and the operator's message. */
async function failure(from: RelayOrigin, region = 'b'): Promise<{ reason: string; message: string }> {
  const error = await openRelayLink(from, region, target, endpoint, { timeoutMs: 2_000 }).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(RelayError);
  return { reason: (error as RelayError).reason, message: (error as RelayError).message };
}

const refusedCount = async (reason: string): Promise<number> =>
  Number((await registry.getSingleMetric('pgward_relay_refused_total')!.get()).values.find((value) => value.labels.reason === reason)?.value ?? 0);

beforeAll(async () => {
  [peer, stranger] = await Promise.all([relayMaterial(), relayMaterial()]);
  registry = new Registry();
  listener = await startRelayListener({
    host: '127.0.0.1',
    port: 0,
    tls: peer.tls,
    region: 'b',
    secrets: [secret, previous],
    handshakeTimeoutMs: 2_000,
    resolve: (wanted) => resolving(wanted),
    metrics: createProxyMetrics(registry),
    logger: pino({ level: 'silent' }),
  });
});

afterAll(async () => {
  await listener?.stop();
  await Promise.all([peer, stranger].map((m) => m && rm(m.dir, { recursive: true, force: true })));
});

describe('the relay link', () => {
  it('passes the pinned certificate and the proof, and reaches the peer’s own lookup of the target', async () => {
    expect(await failure(origin([at('b', { fingerprint: peer.fingerprint })]))).toEqual({ reason: 'peer_refused', message: expect.stringContaining('(unknown_database)') });
    expect(await refusedCount('unknown_database')).toBe(1);
  });

  it('passes a certificate that chains to the configured CA with the host among its names', async () => {
    expect((await failure(origin([at('b', { ca: peer.ca }, 'localhost')]))).message).toContain('(unknown_database)');
  });

  it('ends before the hello when the certificate is not the pinned one, or not of the CA: peer_untrusted', async () => {
    const before = await refusedCount('bad_hello');
    const pinned = await failure(origin([at('b', { fingerprint: stranger.fingerprint })]));
    expect(pinned).toEqual({ reason: 'peer_untrusted', message: expect.stringContaining(`fingerprint sha256:${peer.fingerprint.toString('hex')}, not the pinned one`) });
    expect(await failure(origin([at('b', { ca: stranger.ca })]))).toMatchObject({ reason: 'peer_untrusted' });
    // The peer heard no hello at all.
    expect(await refusedCount('bad_hello')).toBe(before);
  });

  it('is refused bad_proof for another secret, and accepted with the previous one during a rotation', async () => {
    expect(await failure(origin([at('b', { fingerprint: peer.fingerprint })], randomBytes(32)))).toEqual({ reason: 'peer_refused', message: expect.stringContaining('(bad_proof)') });
    expect(await refusedCount('bad_proof')).toBe(1);
    expect((await failure(origin([at('b', { fingerprint: peer.fingerprint })], previous))).message).toContain('(unknown_database)');
  });

  it('is peer_no_upstream when the peer has no upstream connection for it: refused, or not answering within half the handshake time', async () => {
    const pinned = origin([at('b', { fingerprint: peer.fingerprint })]);
    const refused = handleAt(await freePort());
    resolving = () => Promise.resolve(refused);
    expect(await failure(pinned)).toEqual({ reason: 'peer_no_upstream', message: expect.stringContaining('(no_upstream)') });
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const hanging = handleAt((silent.address() as AddressInfo).port);
    resolving = () => Promise.resolve(hanging);
    try {
      expect(await failure(pinned)).toEqual({ reason: 'peer_no_upstream', message: expect.stringContaining('(no_upstream)') });
    } finally {
      resolving = () => Promise.resolve(undefined);
      await Promise.all([refused.pool.close(), hanging.pool.close()]);
      silent.close();
    }
  });

  it('is refused wrong_region by a peer of another region than the one asked for', async () => {
    expect(await failure(origin([at('c', { fingerprint: peer.fingerprint })]), 'c')).toEqual({ reason: 'peer_refused', message: expect.stringContaining('(wrong_region)') });
  });

  it('is no_peer for a region with no peer or without a secret, and peer_unreachable when nothing listens', async () => {
    expect((await failure(origin([]))).reason).toBe('no_peer');
    expect((await failure({ ...origin([at('b', { fingerprint: peer.fingerprint })]), secret: undefined })).reason).toBe('no_peer');
    expect((await failure(origin([at('b', { fingerprint: peer.fingerprint }, '127.0.0.1', await freePort())]))).reason).toBe('peer_unreachable');
  });

  it('lets no TLS 1.2 client in', async () => {
    const client = tls.connect({ host: '127.0.0.1', port: listener.port, rejectUnauthorized: false, maxVersion: 'TLSv1.2' });
    const outcome = await new Promise<string>((resolve) => {
      client.once('secureConnect', () => resolve('connected'));
      client.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    client.destroy();
    expect(outcome).not.toBe('connected');
  });
});

describe('the peer’s upstream connection when a link ends', () => {
  const pgUrl = new URL(inject('pgUrl'));
  const application = `pgward-relay-${randomBytes(4).toString('hex')}`;
  let pool: UpstreamPool;
  const pinned = (): RelayOrigin => origin([at('b', { fingerprint: peer.fingerprint })]);
  const link = (): Promise<UpstreamConnection> => openRelayLink(pinned(), 'b', target, endpoint, { timeoutMs: 5_000 });

  beforeAll(() => {
    // One connection: a link that finds it again got the one the last link handed back.
    const upstream: UpstreamTarget = { host: pgUrl.hostname, port: Number(pgUrl.port), database: pgUrl.pathname.slice(1), user: decodeURIComponent(pgUrl.username), password: decodeURIComponent(pgUrl.password), sslMode: 'disable', applicationName: application, connectTimeoutMs: 5_000 };
    pool = new UpstreamPool(
      upstream,
      { mode: 'transaction', max_connections: 1, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 0 },
    );
    const handle: UpstreamHandle = { database: { database_id: 'db_1', project_id: 'prj_1' } as DatabaseRow, pool, cancel: (server) => sendCancel(upstream, server.backendKey).then(() => undefined), onReplica: () => handle };
    resolving = () => Promise.resolve(handle);
  });

  afterAll(async () => {
    resolving = () => Promise.resolve(undefined);
    await pool?.close();
  });

  /** Writes `messages` on the link and reads its replies up to `until` (by default the ReadyForQuery); the DataRows' first columns, the last message. */
  function exchange(connection: UpstreamConnection, messages: Buffer, until: (message: BackendMessage) => boolean = (message) => message.name === 'readyForQuery'): Promise<{ values: (string | null)[]; last: BackendMessage }> {
    const parser = new Parser();
    const values: (string | null)[] = [];
    return new Promise((resolve, reject) => {
      connection.inlet.receive({
        bytes: (chunk) =>
          parser.parse(chunk, (message) => {
            if (message.name === 'dataRow') values.push((message as DataRowMessage).fields[0] as string | null);
            if (message.name === 'error') reject(message);
            if (!until(message)) return;
            connection.inlet.receive(undefined);
            resolve({ values, last: message });
          }),
        ended: () => reject(new Error('the link closed')),
      });
      connection.socket.write(messages);
    });
  }

  const value = async (connection: UpstreamConnection, sql: string): Promise<string | null> => (await exchange(connection, serialize.query(sql))).values[0]!;
  const status = async (connection: UpstreamConnection, sql: string): Promise<string> => ((await exchange(connection, serialize.query(sql))).last as ReadyForQueryMessage).status;

  /** The test server's backends of this pool: pid and state. */
  const backends = (): Promise<{ pid: number; state: string }[]> => adminRows(inject('pgUrl'), `select pid, state from pg_stat_activity where application_name = '${application}' order by pid`);

  /** A link's upstream backend with a temp table, a prepared statement, a setting and a LISTEN of its own. */
  async function leaveState(connection: UpstreamConnection): Promise<number> {
    expect(await status(connection, "create temp table left_behind (x int); prepare left_plan as select 1; set work_mem = '7MB'; listen left_channel")).toBe('I');
    return Number(await value(connection, 'select pg_backend_pid()'));
  }

  /** What the next link finds of `leaveState`'s: all of it should be gone. */
  async function stateFound(connection: UpstreamConnection): Promise<(string | null)[]> {
    const found = await exchange(
      connection,
      serialize.query(
        "select relname::text from pg_class where relname = 'left_behind' and relpersistence = 't' union all select name from pg_prepared_statements union all select current_setting('work_mem') where current_setting('work_mem') = '7MB' union all select pg_listening_channels()",
      ),
    );
    return found.values;
  }

  it.each([
    ['Terminate', (connection: UpstreamConnection) => connection.close()],
    ['a broken link', (connection: UpstreamConnection) => connection.socket.destroy()],
  ])('hands an idle link’s upstream connection back, reset, when the link ends by %s: the next link runs on the same backend with nothing of the last one', async (_how, ends) => {
    const first = await link();
    const pid = await leaveState(first);
    ends(first);
    const next = await link();
    try {
      expect(Number(await value(next, 'select pg_backend_pid()'))).toBe(pid);
      expect(await stateFound(next)).toEqual([]);
      expect(await backends()).toEqual([{ pid, state: 'idle' }]);
    } finally {
      next.close();
    }
  });

  /** Ends a link at once after `midway` left its upstream somewhere other than idle; the backend must close, and the next link gets another. */
  async function closesUpstream(midway: (connection: UpstreamConnection) => Promise<void>): Promise<void> {
    const cut = await link();
    const pid = Number(await value(cut, 'select pg_backend_pid()'));
    await midway(cut);
    cut.socket.destroy();
    await waitFor(async () => !(await backends()).some((backend) => backend.pid === pid), 5_000, 'the cut link’s backend closed');
    const next = await link();
    try {
      expect(Number(await value(next, 'select pg_backend_pid()'))).not.toBe(pid);
      expect(await stateFound(next)).toEqual([]);
      // The next link's backend alone, between statements: none left idle in a transaction.
      expect((await backends()).map((backend) => backend.state)).toEqual(['idle']);
    } finally {
      next.close();
    }
  }

  it('closes the upstream connection of a link cut inside a transaction: no backend left idle in transaction', async () => {
    await closesUpstream(async (connection) => {
      expect(await status(connection, "begin; create temp table left_behind (x int); set local work_mem = '7MB'")).toBe('T');
      expect((await backends()).map((backend) => backend.state)).toEqual(['idle in transaction']);
    });
  });

  it('closes the upstream connection of a link cut inside a failed transaction', async () => {
    await closesUpstream(async (connection) => {
      expect(await status(connection, 'begin')).toBe('T');
      await exchange(connection, serialize.query('select 1/0')).catch(() => undefined);
      expect((await backends()).map((backend) => backend.state)).toEqual(['idle in transaction (aborted)']);
    });
  });

  it('closes the upstream connection of a link cut mid-COPY', async () => {
    await closesUpstream(async (connection) => {
      await exchange(connection, serialize.query('create temp table left_behind (x int)'));
      await exchange(connection, serialize.query('copy left_behind from stdin'), (message) => message.name === 'copyInResponse');
      connection.socket.write(serialize.copyData(Buffer.from('1\n2\n')));
    });
  });

  it('closes the upstream connection of a link cut mid-statement', async () => {
    await closesUpstream(async (connection) => {
      connection.socket.write(serialize.query('select pg_sleep(30)'));
      await waitFor(async () => (await backends()).some((backend) => backend.state === 'active'), 5_000, 'the statement running');
    });
  });

  it('closes the upstream connection of a link cut between an extended batch and its Sync', async () => {
    await closesUpstream(async (connection) => {
      await exchange(connection, Buffer.concat([serialize.parse({ text: 'select 1' }), serialize.flush()]), (message) => message.name === 'parseComplete');
    });
  });
});
