import type { Socket } from 'node:net';
import type { Inlet } from './inlet.js';
import { writeAll } from './socket-write.js';
import type { UpstreamConnection } from './upstream/connection.js';

/** What a session's flow control needs of it; each is asked when used, as all of them change. */
export interface FlowHost {
  /** The client's reader and socket: plain, or TLS once the client asked for it. */
  client(): Inlet;
  /** The upstream connection the session holds, if any. */
  server(): UpstreamConnection | undefined;
  closed(): boolean;
}

/**
 * A session's bytes in both directions, and its back-pressure. What one turn of the session forwards
 * upstream leaves in one write when the turn ends. While the client has not taken what it was sent,
 * neither the upstream nor the client is read, as PostgreSQL stops reading a client it cannot write
 * to: a result the client does not read waits in the server, and requests it sends meanwhile (even
 * those the gateway answers itself) wait in the client, rather than either filling the gateway's
 * memory. While the upstream has not taken what it was sent, the client is not read.
 */
export class SessionFlow {
  /** Reasons the client's socket is not read. */
  private readingHeld = 0;
  /** The client has not taken what it was sent: until it has, neither it nor `throttled` is read. */
  private clientBacklogged = false;
  private throttled: UpstreamConnection | undefined;
  /** What this turn forwards upstream, and where: written together when the turn ends. */
  private outgoing: Buffer[] = [];
  private outgoingTo: Socket | undefined;
  /** What the client is owed while its answers wait (deferClient), in order; undefined when they do not. */
  private deferred: Buffer[] | undefined;
  /** Counts deferClient calls: only the last one's wait releases what waits. */
  private deferrals = 0;

  constructor(private readonly host: FlowHost) {}

  holdReading(): void {
    if (this.readingHeld++ === 0) this.host.client().pause();
  }

  /** A client inlet taking over (TLS on the same socket) stays unread while reading is held. */
  adopt(client: Inlet): void {
    if (this.readingHeld > 0) client.pause();
  }

  releaseReading(): void {
    if (--this.readingHeld === 0 && !this.host.closed()) this.host.client().resume();
  }

  writeClient(pieces: readonly Buffer[]): void {
    if (this.deferred) return void this.deferred.push(...pieces);
    const socket = this.host.client().socket;
    writeAll(socket, pieces);
    if (!socket.writableNeedDrain || this.clientBacklogged) return;
    this.clientBacklogged = true;
    this.holdReading();
    this.throttled = this.host.server();
    this.throttled?.inlet.pause();
    socket.once('drain', this.onClientDrained);
  }

  /**
   * What the client is sent from now on waits until `until` resolves (a write's cache invalidation
   * has left the process: docs/cache.md), then goes in order. The client is not read meanwhile, so
   * what waits is the answers to what it had already sent. `until` must not reject.
   */
  deferClient(until: Promise<void>): void {
    if (!this.deferred) {
      this.deferred = [];
      this.holdReading();
    }
    const deferral = ++this.deferrals;
    // A later wait covers what an earlier one waited for (the fan-out flushes in order).
    void until.then(() => {
      if (deferral === this.deferrals) this.undefer();
    });
  }

  private undefer(): void {
    const pieces = this.deferred ?? [];
    this.deferred = undefined;
    if (!this.host.closed() && pieces.length > 0) this.writeClient(pieces);
    this.releaseReading();
  }

  private readonly onClientDrained = (): void => {
    const server = this.throttled;
    this.throttled = undefined;
    this.clientBacklogged = false;
    this.releaseReading();
    // Only a connection this session still holds; one handed over since is its new holder's to run.
    if (server && server === this.host.server() && !this.host.closed()) server.inlet.resume();
  };

  /** A connection taken up while the client is backlogged waits with it. */
  tookUp(server: UpstreamConnection): void {
    if (!this.clientBacklogged) return;
    this.throttled = server;
    server.inlet.pause();
  }

  /**
   * Queues bytes for the upstream `socket`. They leave when the turn ends: when the session has
   * handled every message there is (`inTurn`: it flushes then), or else on the next tick.
   */
  forward(socket: Socket, raw: Buffer, inTurn: boolean): void {
    if (this.outgoingTo !== socket) {
      this.flush();
      this.outgoingTo = socket;
      if (!inTurn) process.nextTick(this.flush);
    }
    this.outgoing.push(raw);
  }

  readonly flush = (): void => {
    const socket = this.outgoingTo;
    const out = this.outgoing;
    this.outgoingTo = undefined;
    this.outgoing = [];
    if (!socket || socket.destroyed || out.length === 0) return;
    writeAll(socket, out);
    if (socket.writableNeedDrain) {
      this.holdReading();
      const drained = (): void => {
        socket.off('drain', drained);
        socket.off('close', drained);
        this.releaseReading();
      };
      socket.on('drain', drained);
      socket.on('close', drained);
    }
  };

  /** Nothing more goes upstream: the connection is about to belong to the pool again, or to nobody. */
  discardOutgoing(): void {
    this.outgoing = [];
    this.outgoingTo = undefined;
  }
}
