/**
 * The upstream connections of one database: idle ones are reused, at most max_connections exist,
 * acquirers beyond that wait in FIFO order up to acquire_timeout_ms, a release may reset the
 * session with DISCARD ALL, and idle connections beyond min_connections close after
 * idle_timeout_ms. A holder between transactions may park its connection instead of releasing it:
 * it keeps using it at no cost while nobody else needs it, and the pool reclaims it the moment
 * an acquirer would otherwise wait. An acquirer may name an owner (a credential): one owner holds
 * at most perCredentialLimit connections (parked ones included), and its acquirers beyond that wait
 * for its own connections while other owners' acquirers are served.
 */
import { setMaxListeners } from 'node:events';
import type net from 'node:net';
import { serialize } from 'pg-protocol';
import type { ReadyForQueryMessage } from 'pg-protocol/dist/messages.js';
import { perCredentialLimit, type PoolConfig } from '../../src/events/databases.js';
import { bounded, connectUpstream, MessageReader, type UpstreamConnection, type UpstreamTarget } from './connection.js';
import type { Receiver } from '../inlet.js';

/** The database's pool_config; the pool itself does not care about the mode. */
export type { PoolConfig };

/** OWNER_LIMIT: the acquirer's owner held its most connections for acquire_timeout_ms. */
export type PoolErrorCode = 'ACQUIRE_TIMEOUT' | 'OWNER_LIMIT' | 'CLOSED';

export class PoolError extends Error {
  override readonly name = 'PoolError';
  constructor(
    readonly code: PoolErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface PoolStats {
  /** Every connection: idle, in use and being opened. */
  readonly size: number;
  readonly idle: number;
  /** Handed out, or being reset after release. */
  readonly inUse: number;
  /** Acquirers queued for a connection. */
  readonly waiting: number;
}

/** Opens a connection, up to ReadyForQuery; `signal` aborts when the pool closes. */
export type OpenConnection = (signal: AbortSignal) => Promise<UpstreamConnection>;

/** What the reset may bring: CommandComplete, ParameterStatus for settings it resets, notices, a late notification, an error, ReadyForQuery. */
const RESET_MESSAGES = 'CSNAEZ';

const RESET_QUERIES = Buffer.concat([serialize.query('SET statement_timeout = 0'), serialize.query('DISCARD ALL')]);

interface Waiter {
  /** The credential it acquires for, whose connections are counted; undefined: not counted. */
  readonly owner: string | undefined;
  readonly resolve: (connection: UpstreamConnection) => void;
  readonly reject: (error: unknown) => void;
  /** performance.now() past which it fails with ACQUIRE_TIMEOUT. */
  readonly deadline: number;
  settled: boolean;
  cleanup(): void;
}

interface Parked {
  /** Detaches the holder from the connection, synchronously; the connection is the pool's again. */
  readonly reclaim: () => void;
  readonly since: number;
}

interface Idle {
  readonly connection: UpstreamConnection;
  /** Receives while idle: any byte, error or close means the connection is gone. */
  readonly drop: Receiver;
  /** performance.now() when it became idle. */
  readonly since: number;
}

/**
 * One timer for many deadlines: armed for the earliest one that matters, it runs `fire`, which
 * returns the next deadline (performance.now() time) or undefined. Arming per waiter or per idle
 * connection would cost a timer on every hand-over.
 */
class DeadlineTimer {
  #timer: NodeJS.Timeout | undefined;
  #at = Number.POSITIVE_INFINITY;

  constructor(
    private readonly fire: () => number | undefined,
    private readonly keepsAlive: boolean,
  ) {}

  /** Makes sure the timer fires by `deadline`. */
  arm(deadline: number): void {
    if (deadline >= this.#at) return;
    clearTimeout(this.#timer);
    this.#at = deadline;
    this.#timer = setTimeout(this.#run, Math.max(1, Math.ceil(deadline - performance.now())));
    if (!this.keepsAlive) this.#timer.unref();
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Number.POSITIVE_INFINITY;
  }

  readonly #run = (): void => {
    this.#timer = undefined;
    this.#at = Number.POSITIVE_INFINITY;
    const next = this.fire();
    if (next !== undefined) this.arm(next);
  };
}

/**
 * A connection is handed out with no receiver on its inlet (see UpstreamConnection). Release it
 * with the receiver cleared again, after reading up to a ReadyForQuery with status I; otherwise
 * destroy it.
 */
export class UpstreamPool {
  /** Private fields, so that inspecting or logging the pool never shows the password. */
  readonly #target: UpstreamTarget;
  readonly #config: PoolConfig;
  readonly #label: string;
  /** The most recently released is reused first, so that the surplus reaches the idle timeout. */
  readonly #idle: Idle[] = [];
  readonly #inUse = new Set<UpstreamConnection>();
  /** In use but reclaimable, oldest first (a Map keeps insertion order). */
  readonly #parked = new Map<UpstreamConnection, Parked>();
  #parkSweep: NodeJS.Timeout | undefined;
  readonly #waiters: Waiter[] = [];
  /** Waiters a connection is being opened for: their deadline still holds. */
  readonly #openingFor = new Set<Waiter>();
  readonly #waitTimer = new DeadlineTimer(() => this.#expireWaiters(), true);
  readonly #idleTimer = new DeadlineTimer(() => this.#expireIdle(), false);
  readonly #closing = new AbortController();
  #opening = 0;
  /** The owner of each connection in use that was acquired for one. */
  readonly #ownerOf = new Map<UpstreamConnection, string>();
  /** Connections each owner holds or has being opened for it. */
  readonly #held = new Map<string, number>();
  readonly #perOwner: number;
  readonly #onConnectFailure: (error: unknown) => void;
  readonly #open: OpenConnection;
  readonly #reusable: (connection: UpstreamConnection) => boolean;

  /**
   * `onConnectFailure` hears of each attempt to open a connection that failed (not of those the
   * pool's close cut short); `open` opens one (a relay link for a database of another region,
   * docs/regions.md), by default straight to `target`; a connection `reusable` says no to is
   * neither parked nor kept idle: it closes once its holder lets it go.
   */
  constructor(target: UpstreamTarget, config: PoolConfig, onConnectFailure: (error: unknown) => void = () => undefined, open?: OpenConnection, reusable: (connection: UpstreamConnection) => boolean = () => true) {
    this.#target = target;
    this.#reusable = reusable;
    this.#config = config;
    this.#onConnectFailure = onConnectFailure;
    this.#open = open ?? ((signal) => connectUpstream(target, { signal }));
    this.#label = `upstream pool ${target.host}:${target.port}/${target.database}`;
    this.#perOwner = perCredentialLimit(config);
    // Every connection being opened listens for the pool's close.
    setMaxListeners(0, this.#closing.signal);
  }

  /**
   * An idle connection, else a new one while fewer than max_connections exist, else the next one
   * freed, in FIFO order. Rejects with ACQUIRE_TIMEOUT after acquire_timeout_ms (0: no limit), with
   * the UpstreamError when connecting fails, with the signal's reason when it aborts.
   */
  acquire(options: { readonly owner?: string; readonly signal?: AbortSignal } = {}): Promise<UpstreamConnection> {
    const { owner, signal } = options;
    if (this.#closed) return Promise.reject(this.#closedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const timeoutMs = this.#config.acquire_timeout_ms;
      const onAbort = (): void => this.#fail(waiter, signal?.reason);
      const waiter: Waiter = {
        owner,
        resolve,
        reject,
        deadline: timeoutMs > 0 ? performance.now() + timeoutMs : Number.POSITIVE_INFINITY,
        settled: false,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#dispatch();
      if (!waiter.settled && timeoutMs > 0) this.#waitTimer.arm(waiter.deadline);
    });
  }

  /**
   * An idle (or, at max_connections, a reclaimed parked) connection at once, or undefined: the hot
   * path's way to skip a promise. An owner at its limit can only take back one of its own parked ones.
   */
  tryAcquire(owner?: string): UpstreamConnection | undefined {
    if (this.#closed || this.#waiters.length > 0) return undefined;
    if (this.#atLimit(owner)) return this.#reclaimOwn(owner!);
    const idle = this.#idle.pop();
    if (idle) {
      this.#unidle(idle);
      this.#inUse.add(idle.connection);
      this.#own(idle.connection, owner);
      return idle.connection;
    }
    const reclaimed = this.#size() >= this.#config.max_connections ? this.#reclaimOldest() : undefined;
    if (reclaimed) {
      this.#disown(reclaimed);
      this.#own(reclaimed, owner);
    }
    return reclaimed;
  }

  /**
   * Lends a connection that is in use back to the pool without detaching it: the holder may take
   * it up again with `unpark` while the pool has not reclaimed it. Refused (false) while acquirers
   * wait, so that they are served by a plain release instead. The holder vouches, as for release,
   * that the connection is at a ReadyForQuery with status I.
   */
  park(connection: UpstreamConnection, reclaim: () => void): boolean {
    if (this.#closed || this.#waiters.length > 0 || !this.#inUse.has(connection) || !this.#reusable(connection)) return false;
    this.#parked.set(connection, { reclaim, since: Date.now() });
    if (!this.#parkSweep && this.#config.idle_timeout_ms > 0) {
      const every = Math.max(250, Math.min(this.#config.idle_timeout_ms / 2, 30_000));
      this.#parkSweep = setInterval(() => this.#sweepParked(), every).unref();
    }
    return true;
  }

  /** Takes a parked connection up again; false when the pool reclaimed it meanwhile (the reclaim callback ran). */
  unpark(connection: UpstreamConnection): boolean {
    return this.#parked.delete(connection);
  }

  /**
   * Returns a connection to the pool. Without `reset` the caller vouches that the last message it
   * read was ReadyForQuery with status I. With `reset`, DISCARD ALL runs first, and a connection
   * whose reset fails (as it does inside a transaction block) is destroyed instead; so is one that
   * still has a 'data' listener. Never rejects.
   */
  async release(connection: UpstreamConnection, options: { reset: boolean }): Promise<void> {
    if (!this.#inUse.has(connection)) return;
    this.#parked.delete(connection);
    // A receiver left behind by the previous user would read the next user's replies.
    if (connection.socket.destroyed || connection.inlet.receiving) return this.destroy(connection);
    if (options.reset && !(await this.#reset(connection))) return this.destroy(connection);
    if (!this.#inUse.delete(connection)) return;
    this.#disown(connection);
    this.#makeIdle(connection);
  }

  /** Drops a connection that is in use (e.g. its query was interrupted mid-way) and frees its slot. */
  destroy(connection: UpstreamConnection): void {
    this.#parked.delete(connection);
    if (!this.#inUse.delete(connection)) return;
    this.#disown(connection);
    connection.socket.destroy();
    this.#dispatch();
  }

  /** Closed for good (its database changed, or the proxy stops): its holders take the database's new pool. */
  get isClosed(): boolean {
    return this.#closed;
  }

  /** Connections `owner` holds (parked ones included) or has being opened for it. */
  heldBy(owner: string): number {
    return this.#held.get(owner) ?? 0;
  }

  stats(): PoolStats {
    return { size: this.#size(), idle: this.#idle.length + this.#parked.size, inUse: this.#inUse.size - this.#parked.size, waiting: this.#waiters.length };
  }

  /**
   * Closes every idle and parked connection and rejects every acquirer; the connections in use are
   * destroyed too, unless `graceful`, in which case each closes when its holder releases it.
   * Resolves once the sockets closed here are closed.
   */
  async close(options: { graceful?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    this.#closing.abort(this.#closedError());
    for (const waiter of [...this.#waiters]) this.#fail(waiter, this.#closedError());
    this.#waitTimer.stop();
    this.#idleTimer.stop();
    clearInterval(this.#parkSweep);
    const sockets: net.Socket[] = [];
    for (const [connection, parked] of [...this.#parked]) {
      parked.reclaim();
      this.#inUse.delete(connection);
      connection.close();
      sockets.push(connection.socket);
    }
    this.#parked.clear();
    for (const idle of this.#idle.splice(0)) {
      this.#unidle(idle);
      idle.connection.close();
      sockets.push(idle.connection.socket);
    }
    if (!options.graceful) {
      for (const connection of this.#inUse) {
        connection.socket.destroy();
        sockets.push(connection.socket);
      }
      this.#inUse.clear();
    }
    this.#ownerOf.clear();
    this.#held.clear();
    await Promise.all(sockets.map((socket) => (socket.closed ? undefined : new Promise((done) => socket.once('close', done)))));
  }

  get #closed(): boolean {
    return this.#closing.signal.aborted;
  }

  #closedError(): PoolError {
    return new PoolError('CLOSED', `${this.#label} is closed`);
  }

  #size(): number {
    return this.#idle.length + this.#inUse.size + this.#opening;
  }

  /**
   * Serves waiters in FIFO order while there is an idle connection or room for a new one; a waiter
   * whose owner is at its limit is passed over (it keeps its place) unless it can take back one of
   * its owner's parked connections.
   */
  #dispatch(): void {
    for (let at = 0; at < this.#waiters.length; ) {
      const waiter = this.#waiters[at]!;
      if (this.#atLimit(waiter.owner)) {
        const own = this.#reclaimOwn(waiter.owner!);
        if (own) this.#handOver(waiter, own);
        else at++;
        continue;
      }
      const idle = this.#idle.pop();
      if (idle) {
        this.#unidle(idle);
        this.#grant(waiter, idle.connection);
      } else if (this.#size() < this.#config.max_connections) {
        this.#waiters.splice(at, 1);
        this.#openFor(waiter);
      } else {
        const reclaimed = this.#reclaimOldest();
        // Nothing for this waiter; a later one may still take back its owner's own parked connection.
        if (!reclaimed) at++;
        else this.#handOver(waiter, reclaimed);
      }
    }
  }

  /** A connection still in use (taken back from a parked holder) goes to `waiter`. */
  #handOver(waiter: Waiter, connection: UpstreamConnection): void {
    this.#inUse.delete(connection);
    this.#disown(connection);
    this.#grant(waiter, connection);
  }

  #atLimit(owner: string | undefined): boolean {
    return owner !== undefined && (this.#held.get(owner) ?? 0) >= this.#perOwner;
  }

  /** Counts a connection (in use, or being opened) as `owner`'s. */
  #own(connection: UpstreamConnection | undefined, owner: string | undefined): void {
    if (owner === undefined) return;
    this.#held.set(owner, (this.#held.get(owner) ?? 0) + 1);
    if (connection) this.#ownerOf.set(connection, owner);
  }

  #disown(connection: UpstreamConnection): void {
    const owner = this.#ownerOf.get(connection);
    if (owner === undefined) return;
    this.#ownerOf.delete(connection);
    this.#release(owner);
  }

  #release(owner: string): void {
    const count = (this.#held.get(owner) ?? 0) - 1;
    if (count > 0) this.#held.set(owner, count);
    else this.#held.delete(owner);
  }

  /** The owner's longest-parked connection, taken from its holder (another session of the owner); it stays counted as the owner's. */
  #reclaimOwn(owner: string): UpstreamConnection | undefined {
    for (const [connection, parked] of this.#parked) {
      if (this.#ownerOf.get(connection) !== owner) continue;
      this.#parked.delete(connection);
      parked.reclaim();
      return connection;
    }
    return undefined;
  }

  /** The longest-parked connection, taken from its holder; it stays in use, now for the taker. */
  #reclaimOldest(): UpstreamConnection | undefined {
    const oldest = this.#parked.entries().next().value;
    if (!oldest) return undefined;
    const [connection, parked] = oldest;
    this.#parked.delete(connection);
    parked.reclaim();
    return connection;
  }

  /** Parked past the idle timeout: back to the idle list, where the idle timeout applies. */
  #sweepParked(): void {
    const cutoff = Date.now() - this.#config.idle_timeout_ms;
    for (const [connection, parked] of [...this.#parked]) {
      if (parked.since > cutoff) break;
      this.#parked.delete(connection);
      parked.reclaim();
      if (!this.#inUse.delete(connection)) continue;
      this.#disown(connection);
      this.#makeIdle(connection);
    }
    if (this.#parked.size === 0) {
      clearInterval(this.#parkSweep);
      this.#parkSweep = undefined;
    }
  }

  /** A connection opened for a waiter that has given up meanwhile becomes idle. */
  #openFor(waiter: Waiter): void {
    this.#opening++;
    this.#openingFor.add(waiter);
    // Counted as the owner's while it is opened, so that an owner cannot open more than its limit at once.
    this.#own(undefined, waiter.owner);
    const opened = (): void => {
      this.#opening--;
      this.#openingFor.delete(waiter);
      if (waiter.owner !== undefined) this.#release(waiter.owner);
    };
    this.#open(this.#closing.signal).then(
      (connection) => {
        opened();
        if (this.#closed) {
          connection.close();
          this.#fail(waiter, this.#closedError());
        } else {
          this.#grant(waiter, connection);
        }
      },
      (error: unknown) => {
        opened();
        if (!this.#closed) this.#onConnectFailure(error);
        this.#fail(waiter, this.#closed ? this.#closedError() : error);
        this.#dispatch();
      },
    );
  }

  #settle(waiter: Waiter): boolean {
    if (waiter.settled) return false;
    waiter.settled = true;
    waiter.cleanup();
    const at = this.#waiters.indexOf(waiter);
    if (at >= 0) this.#waiters.splice(at, 1);
    return true;
  }

  #fail(waiter: Waiter, error: unknown): void {
    if (this.#settle(waiter)) waiter.reject(error);
  }

  #grant(waiter: Waiter, connection: UpstreamConnection): void {
    if (!this.#settle(waiter)) return this.#makeIdle(connection);
    this.#inUse.add(connection);
    this.#own(connection, waiter.owner);
    waiter.resolve(connection);
  }

  /** A free connection goes to the longest waiter whose owner is under its limit at once, else to the idle list. */
  #makeIdle(connection: UpstreamConnection): void {
    const { socket } = connection;
    if (this.#closed || socket.destroyed || !this.#reusable(connection)) {
      connection.close();
      return this.#dispatch();
    }
    const waiter = this.#waiters.find((candidate) => !this.#atLimit(candidate.owner));
    if (waiter) return this.#grant(waiter, connection);
    const drop = (): void => this.#drop(idle);
    const idle: Idle = { connection, drop: { bytes: drop, ended: drop }, since: performance.now() };
    // Reading while idle is what notices a server that went away.
    connection.inlet.receive(idle.drop);
    if (this.#config.idle_timeout_ms > 0) this.#idleTimer.arm(idle.since + this.#config.idle_timeout_ms);
    this.#idle.push(idle);
  }

  #unidle(idle: Idle): void {
    idle.connection.inlet.receive(undefined);
  }

  #remove(idle: Idle): boolean {
    const at = this.#idle.indexOf(idle);
    if (at < 0) return false;
    this.#idle.splice(at, 1);
    this.#unidle(idle);
    return true;
  }

  #drop(idle: Idle): void {
    if (this.#remove(idle)) idle.connection.socket.destroy();
  }

  /**
   * Past the idle timeout a connection closes, unless that would leave fewer than min_connections
   * (it then stays, as if its timeout had passed unnoticed). The next deadline: the oldest idle one
   * still within its timeout.
   */
  #expireIdle(): number | undefined {
    const timeoutMs = this.#config.idle_timeout_ms;
    const now = performance.now();
    let next: number | undefined;
    for (const idle of [...this.#idle]) {
      const deadline = idle.since + timeoutMs;
      if (deadline > now) next = Math.min(next ?? deadline, deadline);
      else if (this.#size() > this.#config.min_connections && this.#remove(idle)) idle.connection.close();
    }
    return next;
  }

  /**
   * Fails the waiters whose deadline passed: queued ones (the oldest come first) and those a
   * connection is being opened for. The next deadline is the earliest left.
   */
  #expireWaiters(): number | undefined {
    const now = performance.now();
    // A share that is the whole pool is no limit of its own: the pool is what ran out.
    const timedOut = (waiter: Waiter): PoolError =>
      this.#perOwner < this.#config.max_connections && this.#atLimit(waiter.owner)
        ? new PoolError('OWNER_LIMIT', `${this.#label}: its owner held its ${this.#perOwner} connections for ${this.#config.acquire_timeout_ms} ms`)
        : new PoolError('ACQUIRE_TIMEOUT', `${this.#label}: no connection free within ${this.#config.acquire_timeout_ms} ms`);
    for (let waiter = this.#waiters[0]; waiter && waiter.deadline <= now; waiter = this.#waiters[0]) this.#fail(waiter, timedOut(waiter));
    let next = this.#waiters[0]?.deadline ?? Number.POSITIVE_INFINITY;
    for (const waiter of this.#openingFor) {
      if (waiter.settled) continue;
      if (waiter.deadline <= now) this.#fail(waiter, timedOut(waiter));
      else next = Math.min(next, waiter.deadline);
    }
    return Number.isFinite(next) ? next : undefined;
  }

  /**
   * DISCARD ALL, read up to its ReadyForQuery; true when it succeeded and no transaction is open.
   * The session's own statement_timeout is lifted first, in a query of its own (DISCARD ALL cannot
   * share a query string): a client's `SET statement_timeout = 1` would otherwise cancel the reset
   * whenever the backend is descheduled for a millisecond, and the connection be destroyed.
   */
  async #reset(connection: UpstreamConnection): Promise<boolean> {
    try {
      return await bounded(this.#label, this.#target.connectTimeoutMs, undefined, async (guard) => {
        guard(connection.socket);
        const reader = new MessageReader(connection.inlet, RESET_MESSAGES, this.#label);
        connection.socket.write(RESET_QUERIES);
        let failed = false;
        let ready = 0;
        for (;;) {
          const message = await reader.next();
          if (message.name === 'error') failed = true;
          if (message.name === 'readyForQuery' && ++ready === 2) {
            reader.detach();
            return !failed && (message as ReadyForQueryMessage).status === 'I';
          }
        }
      });
    } catch {
      return false;
    }
  }
}
