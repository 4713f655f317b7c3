import type { BaseLogger } from 'pino';
import type { DatabaseRow, ReplicaRow } from '../projections/databases.js';
import { runStatement } from '../src/mcp/agent/statement.js';
import { logEvent } from '../src/log-events.js';
import type { ProxyMetrics } from './metrics.js';
import { observe, UNCHECKED, type HealthThresholds, type Probe, type ReplicaHealth } from './replica-health.js';
import { connectUpstream, type UpstreamTarget } from './upstream/connection.js';
import type { LiveView } from './views/live-view.js';

/**
 * One probe's statement: whether the server is a standby, and how far its replay is behind. A
 * standby that replayed all it received is not behind, however long ago its last transaction
 * (the primary may be idle); otherwise the lag is the age of the last transaction it replayed,
 * unknown (null) when it has received no WAL or replayed no transaction.
 */
export const HEALTH_SQL = `select pg_catalog.pg_is_in_recovery()::text,
  case when not pg_catalog.pg_is_in_recovery() then '0'
    when pg_catalog.pg_last_wal_receive_lsn() is null then null
    when pg_catalog.pg_last_wal_receive_lsn() = pg_catalog.pg_last_wal_replay_lsn() then '0'
    else (extract(epoch from pg_catalog.clock_timestamp() - pg_catalog.pg_last_xact_replay_timestamp()) * 1000)::bigint::text end`;

export interface ReplicaMonitorOptions {
  readonly intervalMs: number;
  readonly thresholds: HealthThresholds;
  readonly connectTimeoutMs: number;
  /** Where a replica is reached, with the database's credentials. */
  readonly targetOf: (database: DatabaseRow, replica: ReplicaRow) => UpstreamTarget;
  /** The proxy's; the hosted MCP's monitor is not measured (its changes are logged). */
  readonly metrics?: Pick<ProxyMetrics, 'replicaHealthy' | 'replicaLag' | 'replicaProbes' | 'replicaTransitions'>;
  readonly logger: Pick<BaseLogger, 'info' | 'warn'>;
  /** This data plane's region: a database kept in another region is relayed there (docs/regions.md), its replicas neither probed nor read from here. */
  readonly region: string;
}

/** Connects to the replica afresh (a probe of its reachability too), runs HEALTH_SQL, and closes. */
async function probe(target: UpstreamTarget, timeoutMs: number): Promise<Probe> {
  try {
    const connection = await connectUpstream(target, { signal: AbortSignal.timeout(timeoutMs) });
    try {
      const result = await runStatement(connection, { sql: HEALTH_SQL, params: [], readOnly: true, maxRows: 1, timeoutMs });
      const [inRecovery, lag] = result.rows[0] ?? [];
      return { ok: true, inRecovery: inRecovery === 'true', lagMs: lag === null || lag === undefined ? null : Number(lag) };
    } finally {
      connection.close();
    }
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

/**
 * The health of every read replica of the databases that route reads (auto_read_routing), probed
 * every `intervalMs`, and the replica each read goes to: the healthy ones in turn (round robin).
 */
export class ReplicaMonitor {
  private readonly health = new Map<string, ReplicaHealth>();
  private readonly probing = new Set<string>();
  private readonly turns = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly replicas: Pick<LiveView<ReplicaRow>, 'values'>,
    private readonly databases: Pick<LiveView<DatabaseRow>, 'get'>,
    private readonly options: ReplicaMonitorOptions,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), this.options.intervalMs).unref();
    this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Whether the database routes reads now (auto_read_routing, as changed since any session began):
   * to its replicas here, or, for a database kept in another region, to read links whose peer
   * picks among its own (docs/regions.md#read-routing).
   */
  routes(databaseId: string): boolean {
    const database = this.databases.get(databaseId);
    return database?.status === 'active' && database.auto_read_routing;
  }

  /** Whether this data plane probes the database's replicas: it routes reads, and is kept in this region. */
  private probes(database: DatabaseRow): boolean {
    return this.routes(database.database_id) && (database.pool_region === '' || database.pool_region === this.options.region);
  }

  /** The next healthy replica of a database for a read, in turn; undefined when none is healthy (the read goes to the primary). */
  next(databaseId: string): ReplicaRow | undefined {
    const healthy = [...this.replicas.values()].filter((replica) => replica.database_id === databaseId && this.health.get(replica.replica_id)?.healthy);
    if (healthy.length === 0) return undefined;
    const turn = this.turns.get(databaseId) ?? 0;
    this.turns.set(databaseId, turn + 1);
    return healthy[turn % healthy.length];
  }

  private tick(): void {
    const live = new Set<string>();
    for (const replica of this.replicas.values()) {
      const database = this.databases.get(replica.database_id);
      if (!database || !this.probes(database)) continue;
      live.add(replica.replica_id);
      if (!this.probing.has(replica.replica_id)) void this.check(database, replica);
    }
    for (const id of this.health.keys()) if (!live.has(id)) this.health.delete(id);
  }

  private async check(database: DatabaseRow, replica: ReplicaRow): Promise<void> {
    const id = replica.replica_id;
    this.probing.add(id);
    const seen = await probe(this.options.targetOf(database, replica), this.options.connectTimeoutMs);
    this.probing.delete(id);
    const before = this.health.get(id) ?? UNCHECKED;
    const after = observe(before, seen, this.options.thresholds);
    this.health.set(id, after);
    const labels = { database: database.database_id, replica: id };
    const { metrics } = this.options;
    metrics?.replicaProbes.inc({ outcome: !seen.ok ? 'unreachable' : after.failures > 0 ? 'stale' : 'ok' });
    metrics?.replicaHealthy.set(labels, after.healthy ? 1 : 0);
    if (after.lagMs !== null) metrics?.replicaLag.set(labels, after.lagMs / 1000);
    if (after.healthy !== before.healthy) {
      metrics?.replicaTransitions.inc({ to: after.healthy ? 'in' : 'out' });
      logEvent(
        this.options.logger,
        'replica_health_changed',
        { ...labels, healthy: after.healthy, lag_ms: after.lagMs, reason: after.reason },
        after.healthy ? 'a read replica joined the rotation' : 'a read replica left the rotation; its reads go elsewhere',
      );
    }
  }
}
