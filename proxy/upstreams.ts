import type { DatabaseRow } from '../projections/databases.js';
import { openSecret, type Keyring } from '../src/crypto/seal.js';
import { sendCancel } from './upstream/cancel.js';
import type { UpstreamConnection, UpstreamTarget } from './upstream/connection.js';
import { UpstreamPool } from './upstream/pool.js';
import type { LiveView } from './views/live-view.js';

/** A database's upstream pool, as the sessions of its credentials use it. */
export interface UpstreamHandle {
  readonly database: DatabaseRow;
  readonly pool: UpstreamPool;
  cancel(server: UpstreamConnection): Promise<void>;
}

interface Entry {
  readonly revision: number;
  readonly handle: UpstreamHandle;
}

/**
 * One pool per registered database and kind of policy (read-only sessions get connections whose
 * transactions are read-only by default), made on first use with the database's stored (sealed)
 * credentials and pool_config. A change to the database (password, host, pool settings) makes a
 * new pool; the old one is closed once its sessions are done with it.
 */
export class Upstreams {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly databases: LiveView<DatabaseRow>,
    private readonly keyring: Keyring,
    private readonly options: { connectTimeoutMs: number; applicationName: string },
  ) {}

  private target(database: DatabaseRow, readOnly: boolean): UpstreamTarget {
    const settings = {
      ...(database.query_timeout_ms > 0 ? { statement_timeout: String(database.query_timeout_ms) } : {}),
      // Defense in depth: what the policy proves read-only also runs in read-only transactions.
      ...(readOnly ? { default_transaction_read_only: 'on' } : {}),
    };
    return {
      host: database.host,
      port: database.port,
      database: database.name,
      user: database.username,
      password: openSecret(database.password_sealed, this.keyring, database.database_id),
      sslMode: database.ssl_mode as UpstreamTarget['sslMode'],
      applicationName: this.options.applicationName,
      connectTimeoutMs: this.options.connectTimeoutMs,
      ...(Object.keys(settings).length > 0 ? { extraStartupParameters: settings } : {}),
    };
  }

  /** The pool of a database for sessions of a read-only or a write-capable policy (separate connections). */
  async for(databaseId: string, projectId: string, readOnly: boolean): Promise<UpstreamHandle | undefined> {
    const database = await this.databases.getOrRead(databaseId, `project-${projectId}`);
    if (!database || database.status !== 'active') return undefined;
    const key = `${databaseId}:${readOnly ? 'ro' : 'rw'}`;
    const known = this.entries.get(key);
    if (known && known.revision === database.revision) return known.handle;
    const target = this.target(database, readOnly);
    const pool = new UpstreamPool(target, database.pool_config as ConstructorParameters<typeof UpstreamPool>[1]);
    const handle: UpstreamHandle = { database, pool, cancel: (server) => sendCancel(target, server.backendKey).then(() => undefined) };
    this.entries.set(key, { revision: database.revision, handle });
    if (known) void known.handle.pool.close();
    return handle;
  }

  stats(): { database: string; size: number; idle: number; inUse: number; waiting: number }[] {
    return [...this.entries].map(([key, entry]) => ({ database: key, ...entry.handle.pool.stats() }));
  }

  async close(): Promise<void> {
    await Promise.all([...this.entries.values()].map((entry) => entry.handle.pool.close()));
    this.entries.clear();
  }
}
