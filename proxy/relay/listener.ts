/**
 * The peer's end of relay links (docs/regions.md#where-it-hooks-into-the-proxy): a TLS 1.3
 * listener that checks each hello's proof, takes a connection of its own pool for the target and
 * splices bytes between the link and that connection until either closes; the connection goes back
 * to the pool when the link ended with it idle, and is closed otherwise. It decides nothing and
 * audits nothing: it is the origin's remote upstream connection. A hello with `cancel` cancels what
 * the link of that (remapped) key runs.
 */
import { randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import tls, { type SecureContext } from 'node:tls';
import type { BaseLogger } from 'pino';
import { DISCARD, Inlet } from '../inlet.js';
import type { ProxyMetrics } from '../metrics.js';
import { cancelAbandoned } from '../upstream/cancel.js';
import type { UpstreamConnection } from '../upstream/connection.js';
import type { UpstreamHandle } from '../upstreams.js';
import { readFrame } from './frame-reader.js';
import { SpliceState } from './splice-state.js';
import { decodeHello, encodeFrame, exporterOf, FRAME, proofHolds, type RefusalReason, type RelayCancel, type RelayHello, type RelayReady, type RelayTarget } from './handshake.js';

export interface RelayListenerOptions {
  readonly host: string;
  readonly port: number;
  /** The relay certificate (PGWARD_RELAY_CERT/KEY, or the proxy's own). */
  readonly tls: SecureContext;
  /** This proxy's region: a hello for another is refused. */
  readonly region: string;
  /** PGWARD_RELAY_SECRET, then PGWARD_RELAY_SECRET_PREVIOUS when rotating. */
  readonly secrets: readonly Buffer[];
  /** Bounds the TLS handshake and the hello. */
  readonly handshakeTimeoutMs: number;
  /** The pool of this proxy's own for a target; undefined when it names nothing this proxy serves. */
  resolve(target: RelayTarget): Promise<UpstreamHandle | undefined>;
  /** For a read link (the hello's `reads`): the pool of a healthy replica of the database `primary` is of, when it routes reads and has one. */
  readFrom?(primary: UpstreamHandle): UpstreamHandle | undefined;
  readonly metrics: Pick<ProxyMetrics, 'relayLinks' | 'relayBytesOf' | 'relayRefused'>;
  readonly logger: Pick<BaseLogger, 'info' | 'warn'>;
}

export interface RunningRelayListener {
  readonly port: number;
  stop(): Promise<void>;
}

interface Link {
  readonly handle: UpstreamHandle;
  readonly server: UpstreamConnection;
  readonly secretKey: Buffer;
  end(handBack: boolean): void;
}

export async function startRelayListener(options: RelayListenerOptions): Promise<RunningRelayListener> {
  const { metrics, logger } = options;
  /** Open links by the process id of their remapped key. */
  const links = new Map<number, Link>();
  const toUpstream = metrics.relayBytesOf('to_upstream');
  const toOrigin = metrics.relayBytesOf('to_origin');

  const refuse = (socket: tls.TLSSocket, reason: RefusalReason, hello: RelayHello | undefined): void => {
    metrics.relayRefused.inc({ reason });
    logger.warn({ reason, origin_region: hello?.origin_region ?? null, origin_proxy: hello?.origin_proxy_id ?? null, address: socket.remoteAddress }, 'refused a relay link');
    socket.end(encodeFrame(FRAME.refused, { reason }));
  };

  const cancel = (socket: tls.TLSSocket, key: RelayCancel): void => {
    const link = links.get(key.process_id);
    const given = Buffer.from(key.secret_key, 'base64');
    if (link && given.length === link.secretKey.length && timingSafeEqual(given, link.secretKey)) void link.handle.cancel(link.server);
    socket.end();
  };

  /**
   * Bytes both ways until either side closes or the origin sends Terminate. The upstream connection
   * then goes back to the pool, reset, when the link ended with it idle (splice-state.ts), and is
   * closed otherwise; an upstream that ended closes the link.
   */
  const splice = (socket: tls.TLSSocket, inlet: Inlet, handle: UpstreamHandle, server: UpstreamConnection, originRegion: string): void => {
    let processId = randomInt(1, 2 ** 31);
    while (links.has(processId)) processId = randomInt(1, 2 ** 31);
    const state = new SpliceState();
    const upstreamDrained = (): void => inlet.resume();
    let ended = false;
    const end = (handBack: boolean): void => {
      if (ended) return;
      ended = true;
      links.delete(processId);
      metrics.relayLinks.dec({ peer_region: originRegion });
      server.inlet.receive(undefined);
      server.socket.off('drain', upstreamDrained);
      inlet.receive(DISCARD);
      socket.destroy();
      if (handBack && state.idle) return void handle.pool.release(server, { reset: true });
      if (state.working) cancelAbandoned(() => handle.cancel(server));
      handle.pool.destroy(server);
    };
    server.inlet.receive({
      bytes(chunk) {
        state.fromUpstream(chunk);
        toOrigin.inc(chunk.length);
        if (!socket.write(chunk)) server.inlet.pause();
      },
      ended: () => end(false),
    });
    inlet.receive({
      bytes(chunk) {
        const { forward, terminated } = state.fromOrigin(chunk);
        const sent = forward === chunk.length ? chunk : chunk.subarray(0, forward);
        toUpstream.inc(sent.length);
        if (sent.length > 0 && !server.socket.write(sent)) inlet.pause();
        if (terminated) end(true);
      },
      ended: () => end(true),
    });
    socket.on('drain', () => server.inlet.resume());
    server.socket.on('drain', upstreamDrained);
    const link: Link = { handle, server, secretKey: randomBytes(4), end };
    links.set(processId, link);
    metrics.relayLinks.inc({ peer_region: originRegion });
    const ready: RelayReady = { region: options.region, parameters: Object.fromEntries(server.parameters), process_id: processId, secret_key: link.secretKey.toString('base64'), ...(handle.replicaId === undefined ? {} : { replica_id: handle.replicaId }) };
    socket.write(encodeFrame(FRAME.ready, ready));
  };

  /**
   * The connection a link runs on: for a read link, a healthy replica's when the database routes
   * reads and has one (the primary's when that replica gives none in time), else the primary's.
   */
  const takeConnection = async (primary: UpstreamHandle, reads: boolean, signal: AbortSignal): Promise<{ handle: UpstreamHandle; server: UpstreamConnection }> => {
    const replica = reads ? options.readFrom?.(primary) : undefined;
    if (replica) {
      try {
        return { handle: replica, server: await replica.pool.acquire({ signal }) };
      } catch (error) {
        if (signal.aborted) throw error;
        logger.info({ err: error, database: primary.database.database_id, replica: replica.replicaId }, 'a read link falls back to the primary: its replica gave no connection');
      }
    }
    return { handle: primary, server: await primary.pool.acquire({ signal }) };
  };

  /** The link after its TLS handshake: the hello, then the splice or a refusal; `timer` bounds the handshake. */
  const accept = async (socket: tls.TLSSocket, timer: NodeJS.Timeout): Promise<void> => {
    try {
      const inlet = Inlet.over(socket);
      const frame = await readFrame(inlet);
      const hello = frame.type === FRAME.hello ? decodeHello(frame.body) : undefined;
      if (!hello) return refuse(socket, 'bad_hello', undefined);
      if (!proofHolds(hello, options.secrets, exporterOf(socket))) return refuse(socket, 'bad_proof', hello);
      if (hello.region !== options.region) return refuse(socket, 'wrong_region', hello);
      if (hello.cancel) return cancel(socket, hello.cancel);
      const handle = await options.resolve(hello.target!);
      if (!handle) return refuse(socket, 'unknown_database', hello);
      // A database kept in yet another region is not relayed on: links do not chain.
      if (handle.relayedTo !== undefined) return refuse(socket, 'wrong_region', hello);
      // Half the handshake's time at most, so that the origin hears no_upstream before either end gives up on the link.
      const signal = AbortSignal.timeout(options.handshakeTimeoutMs / 2);
      const taken = await takeConnection(handle, hello.target!.reads === true && hello.target!.branch === '', signal).catch((error: unknown) => {
        logger.warn({ err: error, database: hello.target!.database_id, origin_region: hello.origin_region }, 'no upstream connection for a relay link');
        return undefined;
      });
      if (!taken) return refuse(socket, 'no_upstream', hello);
      if (socket.destroyed) return void taken.handle.pool.release(taken.server, { reset: false });
      clearTimeout(timer);
      splice(socket, inlet, taken.handle, taken.server, hello.origin_region);
    } catch (error) {
      logger.info({ err: error, address: socket.remoteAddress }, 'a relay link ended during its handshake');
      socket.destroy();
    } finally {
      clearTimeout(timer);
    }
  };

  // TLS only, from the first byte; a client that cannot do TLS 1.3 is let go.
  const server = net.createServer({ noDelay: true }, (raw) => {
    const socket = new tls.TLSSocket(raw, { isServer: true, secureContext: options.tls });
    const timer = setTimeout(() => socket.destroy(), options.handshakeTimeoutMs).unref();
    const failed = (error: Error): void => {
      logger.info({ err: error, address: raw.remoteAddress }, 'a relay link failed its TLS handshake');
      socket.destroy();
    };
    socket.on('error', failed);
    socket.once('secure', () => {
      socket.off('error', failed);
      if (socket.getProtocol() === 'TLSv1.3') void accept(socket, timer);
      else failed(new Error(`the origin negotiated ${socket.getProtocol()}, not TLSv1.3`));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  server.on('error', (error) => logger.warn({ err: error }, 'relay listener failed'));
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const link of [...links.values()]) link.end(false);
      await closed;
    },
  };
}
