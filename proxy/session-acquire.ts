import type { Statement } from './pipeline.js';
import type { SessionReads } from './replica-routing.js';
import type { Protocol, SessionHost } from './session-host.js';
import { classifyUpstreamFailure, upstreamFailure, upstreamRule, type UpstreamFailure } from './upstream/failure.js';
import { noConnection, type UpstreamHandle } from './upstreams.js';
import type { Allowed } from './session-audit.js';
import { logEvent } from '../src/log-events.js';

/**
 * How a session's message gets an upstream connection: the one it holds, or an idle one of its
 * pool, or one it waits for. Before a connection is taken up the read routing places it (a
 * replica's pool for a read, the primary's otherwise, replica-routing.ts); a pool closed by a
 * change to the database is renewed first. When none can be had the message is refused.
 */
export class UpstreamAccess {
  constructor(
    private readonly host: SessionHost,
    private readonly reads: SessionReads,
  ) {}

  /**
   * Runs `work` with an upstream connection: at once when one is held or idle, else once one is
   * acquired. When none can be had the message is refused as `protocol` says: in an extended batch
   * the rest is then skipped until Sync, so the client gets one error and one ReadyForQuery. The
   * statement `audited` names (one that would have run, or a Parse) is audited as not run, with why.
   */
  withServer(work: () => void, protocol: Protocol, audited?: () => Statement | undefined): Promise<void> | void {
    const { host } = this;
    const { upstream } = host;
    this.reads.place(upstream, audited !== undefined);
    if (upstream.server) {
      upstream.unpark();
      return work();
    }
    // A change to the database (password, host, pool settings) closed the pool this session started on.
    if (upstream.handle!.pool.isClosed) return this.withNewPool(work, protocol, audited);
    const owner = host.credential!.credential_id;
    const idle = upstream.handle!.pool.tryAcquire(owner);
    if (idle) {
      host.useServer(idle);
      return work();
    }
    return upstream.handle!.pool.acquire({ owner }).then(
      (server) => {
        if (host.closed) return void upstream.handle!.pool.release(server, { reset: false });
        host.useServer(server);
        work();
      },
      // A replica (or a read link) that gave no connection: the message goes again, to the primary (its read was placed already).
      (error: unknown) => ((upstream.handle!.replicaId === undefined && !upstream.handle!.readLink) || host.closed ? this.refuseUnrun(classifyUpstreamFailure(error), protocol, audited) : this.withServer(work, protocol, audited)),
    );
  }

  /** No upstream connection for a message: refused with the failure's SQLSTATE and wording; the statement it would have run audited as not run. */
  private refuseUnrun(failure: UpstreamFailure, protocol: Protocol, audited: (() => Statement | undefined) | undefined): void {
    const { host } = this;
    const credential = host.credential!;
    const statement = audited?.();
    const rule = upstreamRule(failure);
    if (statement) host.audit.notRun(credential, statement, rule, failure.message);
    logEvent(host.context.logger, 'upstream_unavailable', { session: host.id, credential_id: credential.credential_id, database: credential.database_id, rule, retryable: failure.retryable }, 'no upstream connection for a statement');
    host.refuse(noConnection(failure, 'ERROR', host.context.metrics), protocol);
  }

  /**
   * The pool `statement` runs on if it runs now: the session's, renewed when a change to the
   * database closed it, then placed by read routing. The approval estimate of a held write is made
   * there, so it counts the rows the statement would touch.
   */
  async poolFor(statement: { readonly sql: string; readonly decision: Allowed['decision'] }): Promise<UpstreamHandle | undefined> {
    if (this.host.upstream.handle?.pool.isClosed && !(await this.renewed())) return undefined;
    return this.reads.poolFor(this.host.upstream, statement);
  }

  /** Draws from the credential's pool as it is now, when a change to the database closed the one the session had; false when there is none. */
  private async renewed(): Promise<boolean> {
    const { host } = this;
    const handle = await host.context.upstreamFor(host.credential!);
    if (host.closed || !handle || handle.pool.isClosed) return false;
    host.upstream.handle = handle;
    host.catalog?.moved(handle);
    return true;
  }

  private async withNewPool(work: () => void, protocol: Protocol, audited?: () => Statement | undefined): Promise<void> {
    const { host } = this;
    if (!(await this.renewed())) return host.closed ? undefined : this.refuseUnrun(upstreamFailure('not_registered', `database ${host.credential!.database_id} is not active`), protocol, audited);
    return this.withServer(work, protocol, audited);
  }
}
