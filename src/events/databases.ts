import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { changes, DatabaseId, ProjectId, Region, ReplicaId, SealedSecret, text } from './fields.js';

/** libpq's sslmode values. */
export const SslMode = z.enum(['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full']);
export type SslMode = z.infer<typeof SslMode>;

/** What the upstream is for: the read-write primary, a standby, or a copy kept for analytics. */
export const DatabaseRole = z.enum(['primary', 'replica', 'analytics']);
export type DatabaseRole = z.infer<typeof DatabaseRole>;

export const PoolConfig = z
  .strictObject({
    mode: z.enum(['transaction', 'session']),
    max_connections: z.int().min(1).max(10_000),
    min_connections: z.int().min(0).max(10_000),
    idle_timeout_ms: z.int().min(0).max(86_400_000),
    /** How long a statement waits for a free upstream connection before it is refused. */
    acquire_timeout_ms: z.int().min(0).max(300_000),
    /** Connections one credential may hold at once; absent: half the pool, rounded up (perCredentialLimit). */
    max_connections_per_credential: z.int().min(1).max(10_000).optional(),
  })
  .refine((p) => p.min_connections <= p.max_connections, { message: 'min_connections exceeds max_connections', path: ['min_connections'] });
export type PoolConfig = z.infer<typeof PoolConfig>;

/**
 * How many of a pool's connections one credential may hold at once: its own setting, else half the
 * pool rounded up, so that one agent holding connections (results it does not read, long
 * statements) leaves the other half to the rest. A pool of one connection cannot be shared so.
 */
export function perCredentialLimit(config: Pick<PoolConfig, 'max_connections' | 'max_connections_per_credential'>): number {
  return Math.min(config.max_connections, config.max_connections_per_credential ?? Math.ceil(config.max_connections / 2));
}

/** Spec §2.10. */
export const CacheConfig = z.strictObject({
  enabled: z.boolean(),
  ttl_seconds: z.int().min(0).max(86_400),
  max_entries: z.int().min(0).max(1_000_000),
  swr_seconds: z.int().min(0).max(86_400),
});
export type CacheConfig = z.infer<typeof CacheConfig>;

/** Spec §2.10 defaults. Events record the resolved configuration, so the schema itself has no defaults. */
export const defaultCacheConfig: CacheConfig = { enabled: true, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 };

const Host = z.string().regex(/^[^\s\0]{1,255}$/, { message: 'expected a host without whitespace or NUL' });
const Port = z.int().min(1).max(65_535);

const databaseFields = {
  host: Host,
  port: Port,
  name: text(255, 1),
  username: text(255, 1),
  password: SealedSecret,
  ssl_mode: SslMode,
  role: DatabaseRole,
  pool_config: PoolConfig,
  cache_config: CacheConfig,
  /** Empty means direct; otherwise queries relay through that region's data plane. */
  pool_region: Region.or(z.literal('')),
  auto_read_routing: z.boolean(),
  /** 0 disables the timeout. */
  query_timeout_ms: z.int().min(0).max(300_000),
};

/** An upstream database was registered under a project; its password is sealed. */
export const DatabaseRegistered = defineEvent(
  'DatabaseRegistered',
  1,
  z.strictObject({ database_id: DatabaseId, project_id: ProjectId, ...databaseFields }),
);
export type DatabaseRegistered = z.infer<typeof DatabaseRegistered.schema>;

/** Settings of a registered database changed; `changes` holds only the fields that changed. */
export const DatabaseUpdated = defineEvent(
  'DatabaseUpdated',
  1,
  z.strictObject({ database_id: DatabaseId, changes: changes(databaseFields) }),
);
export type DatabaseUpdated = z.infer<typeof DatabaseUpdated.schema>;

/** A database was removed from its project. */
export const DatabaseRemoved = defineEvent('DatabaseRemoved', 1, z.strictObject({ database_id: DatabaseId }));
export type DatabaseRemoved = z.infer<typeof DatabaseRemoved.schema>;

/** A read replica was added to a database; it authenticates with the database's credentials. */
export const ReplicaAdded = defineEvent(
  'ReplicaAdded',
  1,
  z.strictObject({ replica_id: ReplicaId, database_id: DatabaseId, host: Host, port: Port, ssl_mode: SslMode }),
);
export type ReplicaAdded = z.infer<typeof ReplicaAdded.schema>;

/** A read replica was removed; reads stop routing to it. */
export const ReplicaRemoved = defineEvent('ReplicaRemoved', 1, z.strictObject({ replica_id: ReplicaId, database_id: DatabaseId }));
export type ReplicaRemoved = z.infer<typeof ReplicaRemoved.schema>;

const replicaFields = { host: Host, port: Port, ssl_mode: SslMode };

/** A read replica's address or TLS mode changed; `changes` holds only the fields that changed. */
export const ReplicaUpdated = defineEvent('ReplicaUpdated', 1, z.strictObject({ replica_id: ReplicaId, database_id: DatabaseId, changes: changes(replicaFields) }));
export type ReplicaUpdated = z.infer<typeof ReplicaUpdated.schema>;
