import type { BaseLogger } from 'pino';
import type { DatabaseRow, ReplicaRow } from '../../../projections/databases.js';
import { RecentWrites } from '../../../proxy/recent-writes.js';
import { ReplicaMonitor } from '../../../proxy/replica-monitor.js';
import { placementOf, poolOf } from '../../../proxy/replica-routing.js';
import type { ReplicaOptions } from '../../../proxy/server.js';
import type { UpstreamHandle, Upstreams } from '../../../proxy/upstreams.js';
import type { LiveView } from '../../../proxy/views/live-view.js';

/** How the hosted MCP probes replicas and how long a credential's reads stay on the primary after it wrote: the proxy's settings, and its connect timeout. */
export type ReadRoutingOptions = ReplicaOptions & { readonly connectTimeoutMs: number };

/** A statement as read routing sees it: its text (for the primary hint), and whether it only reads. */
export interface RoutedStatement {
  readonly sql: string;
  readonly readsOnly: boolean;
}

/**
 * The hosted MCP's read routing (docs/replicas.md): every MCP call is one statement outside an
 * explicit transaction, so a read of a database with auto_read_routing goes to a healthy replica
 * (round robin) or, relayed, to a read link, as a wire session's would. The API process probes the
 * replicas itself with a ReplicaMonitor of its own, so it routes in the split layout as in serve.
 */
export class AgentReads {
  readonly writes: RecentWrites;
  private readonly monitor: ReplicaMonitor;

  constructor(
    views: { readonly replicas: Pick<LiveView<ReplicaRow>, 'values'>; readonly databases: Pick<LiveView<DatabaseRow>, 'get'> },
    upstreams: Pick<Upstreams, 'replicaTarget'>,
    options: ReadRoutingOptions,
    logger: Pick<BaseLogger, 'info' | 'warn'>,
    region: string,
  ) {
    this.writes = new RecentWrites(options.readYourWritesMs);
    this.monitor = new ReplicaMonitor(views.replicas, views.databases, {
      intervalMs: options.checkIntervalMs,
      thresholds: options.thresholds,
      connectTimeoutMs: options.connectTimeoutMs,
      targetOf: (database, replica) => upstreams.replicaTarget(database, replica, true),
      logger,
      region,
    });
  }

  start(): void {
    this.monitor.start();
  }

  stop(): void {
    this.monitor.stop();
  }

  /** The pool `statement` of the credential runs on: the primary's unless its database routes reads and it is a read placed on a replica. */
  poolFor(primary: UpstreamHandle, credentialId: string, statement: RoutedStatement): UpstreamHandle {
    if (!this.monitor.routes(primary.database.database_id)) return primary;
    return poolOf(this.monitor, primary, placementOf(statement.sql, statement, this.writes.msSince(credentialId), this.writes.windowMs));
  }
}
