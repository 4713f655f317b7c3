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
 * One pool per registered database, made on first use with the database's stored (sealed)
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

  private target(database: DatabaseRow): UpstreamTarget {
    return {
      host: database.host,
      port: database.port,
      database: database.name,
      user: database.username,
      password: openSecret(database.password_sealed, this.keyring, database.database_id),
      sslMode: database.ssl_mode as UpstreamTarget['sslMode'],
      applicationName: this.options.applicationName,
      connectTimeoutMs: this.options.connectTimeoutMs,
      ...(database.query_timeout_ms > 0 ? { extraStartupParameters: { statement_timeout: String(database.query_timeout_ms) } } : {}),
    };
  }

  async for(databaseId: string, projectId: string): Promise<UpstreamHandle | undefined> {
    const database = await this.databases.getOrRead(databaseId, `project-${projectId}`);
    if (!database || database.status !== 'active') return undefined;
    const known = this.entries.get(databaseId);
    if (known && known.revision === database.revision) return known.handle;
    const target = this.target(database);
    const pool = new UpstreamPool(target, database.pool_config as ConstructorParameters<typeof UpstreamPool>[1]);
    const handle: UpstreamHandle = { database, pool, cancel: (server) => sendCancel(target, server.backendKey).then(() => undefined) };
    this.entries.set(databaseId, { revision: database.revision, handle });
    if (known) void known.handle.pool.close();
    return handle;
  }

  stats(): { database: string; size: number; idle: number; inUse: number; waiting: number }[] {
    return [...this.entries].map(([database, entry]) => ({ database, ...entry.handle.pool.stats() }));
  }

  async close(): Promise<void> {
    await Promise.all([...this.entries.values()].map((entry) => entry.handle.pool.close()));
    this.entries.clear();
  }
}
