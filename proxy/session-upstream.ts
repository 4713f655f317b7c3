import type { Receiver } from './inlet.js';
import { forgetPrepared } from './prepared.js';
import { BackendScanner } from './protocol/backend.js';
import type { SessionStatements } from './session-statements.js';
import { cancelAbandoned } from './upstream/cancel.js';
import type { UpstreamConnection } from './upstream/connection.js';
import type { UpstreamHandle } from './upstreams.js';

/**
 * The upstream a session holds: the database's pool it draws from, the connection it has (if any)
 * with the scanner of what that connection sends, and whether that connection is parked (lent to
 * the pool between transactions). When and for what a connection is taken up is the session's.
 */
export class UpstreamHold {
  handle: UpstreamHandle | undefined;
  server: UpstreamConnection | undefined;
  scanner: BackendScanner | undefined;
  /** Between transactions in transaction pooling: the upstream stays attached, lent to the pool, which may reclaim it. */
  parked = false;

  constructor(
    /** Where what the held connection sends goes. */
    private readonly receiver: Receiver,
    /** The unnamed statement is known prepared only on a connection held since its Parse. */
    private readonly statements: SessionStatements,
  ) {}

  use(server: UpstreamConnection): void {
    this.server = server;
    this.scanner = new BackendScanner();
    server.inlet.receive(this.receiver);
  }

  detach(): UpstreamConnection | undefined {
    const server = this.server;
    if (!server) return undefined;
    server.inlet.receive(undefined);
    this.server = undefined;
    this.scanner = undefined;
    this.statements.unnamedOn = undefined;
    return server;
  }

  /**
   * In transaction pooling, hands the held upstream back: parked (kept attached until another
   * session needs it), or released when others wait. The caller knows it is idle.
   */
  handBack(): void {
    const handle = this.handle;
    if (!this.server || handle?.database.pool_config.mode !== 'transaction') return;
    if (handle.pool.park(this.server, this.reclaim)) {
      this.parked = true;
      return;
    }
    const server = this.detach();
    if (server) void handle.pool.release(server, { reset: false });
  }

  /** The pool takes the parked upstream back for another session. */
  private readonly reclaim = (): void => {
    this.parked = false;
    this.detach();
  };

  /** Draws from another pool from now on; a parked upstream goes back to its own pool first. Only while no upstream is held but a parked one. */
  moveTo(handle: UpstreamHandle): void {
    if (this.parked) {
      this.unpark();
      const server = this.detach();
      if (server) void this.handle!.pool.release(server, { reset: false });
    }
    this.handle = handle;
  }

  /** Takes the parked upstream up again before using it. */
  unpark(): void {
    if (!this.parked) return;
    this.parked = false;
    this.handle!.pool.unpark(this.server!);
  }

  /**
   * The session ended: the held upstream goes back to its pool when the session was `idle` (after
   * DISCARD ALL when `pinned`: its statements go too), else it is destroyed, as one in the middle of
   * anything cannot be trusted by the next client; a statement it was `working` on is cancelled.
   */
  end(idle: boolean, pinned: boolean, working: boolean): void {
    this.unpark();
    const handle = this.handle;
    const server = this.detach();
    if (!server) return;
    if (idle && pinned) {
      forgetPrepared(server);
      void handle?.pool.release(server, { reset: true });
    } else if (idle) void handle?.pool.release(server, { reset: false });
    else {
      // Dropping the connection alone does not stop a statement that is not writing: PostgreSQL notices only when it next writes.
      if (working && handle) cancelAbandoned(() => handle.cancel(server));
      handle?.pool.destroy(server);
    }
  }

  dropParked(): void {
    this.unpark();
    const server = this.detach();
    if (server) this.handle!.pool.destroy(server);
  }
}
