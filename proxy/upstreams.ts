import type { BranchRow } from '../projections/branches.js';
import type { DatabaseRow, ReplicaRow } from '../projections/databases.js';
import { DEFAULT_SEARCH_PATH } from './policy/names.js';
import { openSecret, type Keyring } from '../src/crypto/seal.js';
import { sendCancel } from './upstream/cancel.js';
import type { UpstreamConnection, UpstreamTarget } from './upstream/connection.js';
import { UpstreamPool, type OpenConnection } from './upstream/pool.js';
import { openRelayLink, sendRelayCancel, type RelayOrigin } from './relay/link.js';
import { classifyUpstreamFailure, failureLogFields, type UpstreamFailure } from './upstream/failure.js';
import { logEvent } from '../src/log-events.js';
import type { BaseLogger } from 'pino';
import type { ErrorFields } from './protocol/backend.js';
import type { ProxyMetrics } from './metrics.js';
import type { LiveView } from './views/live-view.js';
import type { PolicyRole } from './views/policy-roles.js';

/** What a pool needs of a sandbox branch. */
export type SandboxBranch = Pick<BranchRow, 'branch_id' | 'database_name'>;

/** A database's upstream pool, as the sessions of its credentials use it. */
export interface UpstreamHandle {
  readonly database: DatabaseRow;
  readonly pool: UpstreamPool;
  /** The read replica this pool connects to; undefined for the database itself (the primary). */
  readonly replicaId?: string;
  /** The sandbox branch this pool connects to (write_mode sandbox, docs/branches.md); undefined for the database itself. */
  readonly branchId?: string;
  /** The region whose data plane this pool's connections are relayed to (docs/regions.md); undefined: direct. */
  readonly relayedTo?: string;
  cancel(server: UpstreamConnection): Promise<void>;
  /** The pool of one of the database's read replicas, for the same kind of session (read-only or not, same role): made on first use. */
  onReplica(replica: ReplicaRow): UpstreamHandle;
  /**
   * Of a relayed database (not a branch): the pool of links for reads outside transactions, on
   * which the peer takes a healthy replica's connection when it has one (docs/regions.md#read-routing).
   */
  readonly readLinks?: () => UpstreamHandle | undefined;
  /** This pool is a relayed database's read links (readLinks), not its primary's. */
  readonly readLink?: true;
}

/**
 * What a client is told when no upstream connection could be had for it, classified (see
 * failure.ts): FATAL at login, ERROR for a statement. Counted by the failure's reason.
 */
export function noConnection(failure: UpstreamFailure, severity: 'FATAL' | 'ERROR', metrics: Pick<ProxyMetrics, 'upstreamUnavailable'>): ErrorFields {
  metrics.upstreamUnavailable.inc({ reason: failure.reason });
  return { severity, code: failure.sqlstate, message: failure.message };
}

/** After the peer ran a read link on its primary (no healthy replica), reads take primary links for this long before a read link is tried again. */
const READ_LINK_RETRY_MS = 1_000;

interface Entry {
  /** The database's revision, and the role's when the pool logs in as a provisioned role. */
  readonly revision: string;
  readonly handle: UpstreamHandle;
}

/**
 * One pool per registered database and kind of policy (read-only sessions get connections whose
 * transactions are read-only by default), made on first use with the database's stored (sealed)
 * credentials and pool_config, or as a policy's provisioned role. A change to the database
 * (password, host, pool settings) or a new provisioning makes a new pool; the old one is closed
 * once its sessions are done with it.
 */
export class Upstreams {
  private readonly entries = new Map<string, Entry>();
  /** When a read link of a relayed pool (by its primary's key) last came on the peer's primary. */
  private readonly readLinksOnPrimaryAt = new Map<string, number>();

  constructor(
    private readonly databases: Pick<LiveView<DatabaseRow>, 'getOrRead'>,
    private readonly keyring: Keyring,
    private readonly options: {
      connectTimeoutMs: number;
      applicationName: string;
      logger: Pick<BaseLogger, 'info' | 'warn'>;
      /** This data plane's region and relay peers: a database whose pool_region is another region is reached through its peer only. */
      relay: RelayOrigin;
    },
  ) {}

  /** The region a database's statements are relayed to; undefined when its pool_region is empty or this proxy's own. */
  private relayedTo(database: DatabaseRow): string | undefined {
    const region = database.pool_region;
    return region === '' || region === this.options.relay.region ? undefined : region;
  }

  private target(database: DatabaseRow, readOnly: boolean, role: PolicyRole | undefined): UpstreamTarget {
    const settings = {
      // The policy resolves names on this search_path: a role's or database's own default (ALTER ROLE … SET search_path) must not move them.
      search_path: DEFAULT_SEARCH_PATH.map((schema) => `"${schema}"`).join(', '),
      ...(database.query_timeout_ms > 0 ? { statement_timeout: String(database.query_timeout_ms) } : {}),
      // Defense in depth: what the policy proves read-only also runs in read-only transactions.
      ...(readOnly ? { default_transaction_read_only: 'on' } : {}),
    };
    return {
      host: database.host,
      port: database.port,
      database: database.name,
      user: role?.role_name ?? database.username,
      password: role ? openSecret(role.password, this.keyring, role.role_name) : openSecret(database.password_sealed, this.keyring, database.database_id),
      sslMode: database.ssl_mode as UpstreamTarget['sslMode'],
      applicationName: this.options.applicationName,
      connectTimeoutMs: this.options.connectTimeoutMs,
      extraStartupParameters: settings,
    };
  }

  /** Where a replica is reached: the database's target (its name, user, password, settings) at the replica's address. */
  replicaTarget(database: DatabaseRow, replica: ReplicaRow, readOnly: boolean, role?: PolicyRole): UpstreamTarget {
    return { ...this.target(database, readOnly, role), host: replica.host, port: replica.port, sslMode: replica.ssl_mode as UpstreamTarget['sslMode'] };
  }

  /**
   * The pool of a database for sessions of a read-only or a write-capable policy, or of a policy's
   * provisioned role (separate connections); of one of its sandbox branches when `branch` is given:
   * the same server and login, the branch's database.
   */
  async for(databaseId: string, projectId: string, readOnly: boolean, role?: PolicyRole, branch?: SandboxBranch): Promise<UpstreamHandle | undefined> {
    const database = await this.databases.getOrRead(databaseId, `project-${projectId}`);
    if (!database || database.status !== 'active') return undefined;
    return this.handle(database, readOnly, role, undefined, branch);
  }

  private handle(database: DatabaseRow, readOnly: boolean, role: PolicyRole | undefined, replica: ReplicaRow | undefined, branch?: SandboxBranch, reads = false): UpstreamHandle {
    const databaseId = database.database_id;
    const key = `${databaseId}:${readOnly ? 'ro' : 'rw'}:${role?.role_name ?? ''}${replica ? `:${replica.replica_id}` : ''}${branch ? `:${branch.branch_id}` : ''}${reads ? ':reads' : ''}`;
    // A replica's pool is made anew when its address or TLS mode changes too.
    const revision = `${database.revision}:${role?.revision ?? ''}${replica ? `:${replica.host}:${replica.port}:${replica.ssl_mode}` : ''}`;
    const known = this.entries.get(key);
    if (known && known.revision === revision) return known.handle;
    const base = replica ? this.replicaTarget(database, replica, readOnly, role) : this.target(database, readOnly, role);
    const target = branch ? { ...base, database: branch.database_name } : base;
    const relayedTo = this.relayedTo(database);
    const onConnectFailure = (error: unknown): void =>
      logEvent(
        this.options.logger,
        'upstream_connect_failed',
        { database: databaseId, project: database.project_id, ...(replica ? { replica: replica.replica_id } : {}), ...(relayedTo ? { peer_region: relayedTo } : {}), ...failureLogFields(classifyUpstreamFailure(error)) },
        relayedTo ? 'could not open a relay link to the database’s region' : 'could not connect to the upstream database',
      );
    const { relay } = this.options;
    const { password: _password, ...endpoint } = target;
    // The peer takes the same pool of its own: the database's login, read-only or not, or the policy's role, on the branch if any.
    const relayTarget = { project_id: database.project_id, database_id: databaseId, read_only: readOnly, role: role?.role_name ?? '', branch: branch?.branch_id ?? '', ...(reads ? { reads: true as const } : {}) };
    const primaryKey = key.replace(/:reads$/, '');
    const open: OpenConnection | undefined = relayedTo
      ? async (signal) => {
          const link = await openRelayLink(relay, relayedTo, relayTarget, endpoint, { timeoutMs: this.options.connectTimeoutMs, signal });
          if (reads && link.peerReplicaId === undefined) this.readLinksOnPrimaryAt.set(primaryKey, Date.now());
          return link;
        }
      : undefined;
    // A read link the peer ran on its primary (no healthy replica) serves one transaction, so that reads return to a replica once there is one again.
    const reusable = reads ? (connection: UpstreamConnection) => connection.peerReplicaId !== undefined : undefined;
    const pool = new UpstreamPool(target, database.pool_config as ConstructorParameters<typeof UpstreamPool>[1], onConnectFailure, open, reusable);
    const handle: UpstreamHandle = {
      database,
      pool,
      ...(replica ? { replicaId: replica.replica_id } : {}),
      ...(branch ? { branchId: branch.branch_id } : {}),
      ...(relayedTo ? { relayedTo } : {}),
      cancel: relayedTo
        ? (server) => sendRelayCancel(relay, relayedTo, { process_id: server.backendKey.processId, secret_key: server.backendKey.secretKey.toString('base64') }, this.options.connectTimeoutMs).then(() => undefined)
        : (server) => sendCancel(target, server.backendKey).then(() => undefined),
      // A branch has no replicas: its sessions read where they write. A relayed database's replicas are the peer's to choose (readLinks).
      onReplica: (other) => (branch || relayedTo ? handle : this.handle(database, readOnly, role, other)),
      ...(relayedTo && !branch && !reads ? { readLinks: () => (this.peerHasReplica(key) ? this.handle(database, readOnly, role, undefined, undefined, true) : undefined) } : {}),
      ...(reads ? { readLink: true as const } : {}),
    };
    this.entries.set(key, { revision, handle });
    // Sessions in the middle of a transaction on the old pool finish it there; the rest move over.
    if (known) void known.handle.pool.close({ graceful: true });
    return handle;
  }

  /** Whether reads of the relayed pool `key` try read links: not within READ_LINK_RETRY_MS of one the peer ran on its primary. */
  private peerHasReplica(key: string): boolean {
    const at = this.readLinksOnPrimaryAt.get(key);
    return at === undefined || Date.now() - at >= READ_LINK_RETRY_MS;
  }

  stats(): { database: string; size: number; idle: number; inUse: number; waiting: number }[] {
    return [...this.entries].map(([key, entry]) => ({ database: key, ...entry.handle.pool.stats() }));
  }

  async close(): Promise<void> {
    await Promise.all([...this.entries.values()].map((entry) => entry.handle.pool.close()));
    this.entries.clear();
  }
}
