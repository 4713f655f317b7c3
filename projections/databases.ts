import { decodeWith } from '../src/events/envelope.js';
import { DatabaseRegistered, DatabaseRemoved, DatabaseUpdated, ReplicaAdded, ReplicaRemoved, ReplicaUpdated } from '../src/events/databases.js';
import type { SealedSecret } from '../src/events/fields.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type DatabaseRow = {
  database_id: string;
  project_id: string;
  host: string;
  port: number;
  name: string;
  username: string;
  /** Sealed; read only by the proxy, never by an API response. */
  password_sealed: SealedSecret;
  ssl_mode: string;
  role: string;
  pool_config: Record<string, unknown>;
  cache_config: Record<string, unknown>;
  pool_region: string;
  auto_read_routing: boolean;
  query_timeout_ms: number;
  status: 'active' | 'removed';
  revision: number;
  created_at: string;
  updated_at: string;
};

export type ReplicaRow = {
  replica_id: string;
  database_id: string;
  host: string;
  port: number;
  ssl_mode: string;
  created_at: string;
};

export function databaseIdOf(event: RecordedEvent): string | undefined {
  switch (event.type) {
    case DatabaseRegistered.type:
      return decodeWith(DatabaseRegistered, event).data.database_id;
    case DatabaseUpdated.type:
      return decodeWith(DatabaseUpdated, event).data.database_id;
    case DatabaseRemoved.type:
      return decodeWith(DatabaseRemoved, event).data.database_id;
    default:
      return undefined;
  }
}

export function evolveDatabase(row: DatabaseRow | undefined, event: RecordedEvent): DatabaseRow | null {
  switch (event.type) {
    case DatabaseRegistered.type: {
      const { data, metadata } = decodeWith(DatabaseRegistered, event);
      const { password, ...rest } = data;
      return { ...rest, password_sealed: password, status: 'active', revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case DatabaseUpdated.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(DatabaseUpdated, event);
      const { password, ...changes } = data.changes;
      return { ...row, ...changes, ...(password ? { password_sealed: password } : {}), revision: event.revision, updated_at: metadata.at };
    }
    case DatabaseRemoved.type:
      return row ? { ...row, status: 'removed', revision: event.revision, updated_at: decodeWith(DatabaseRemoved, event).metadata.at } : null;
    default:
      return row ?? null;
  }
}

export const databasesProjection = rowProjection<DatabaseRow>({
  name: 'databases',
  streamPrefixes: ['project-'],
  table: {
    name: 'databases',
    key: 'database_id',
    columnNames: [
      'database_id', 'project_id', 'host', 'port', 'name', 'username', 'password_sealed', 'ssl_mode', 'role', 'pool_config', 'cache_config',
      'pool_region', 'auto_read_routing', 'query_timeout_ms', 'status', 'revision', 'created_at', 'updated_at',
    ],
    columns: `database_id text primary key, project_id text not null, host text not null, port integer not null, name text not null,
      username text not null, password_sealed jsonb not null, ssl_mode text not null, role text not null, pool_config jsonb not null,
      cache_config jsonb not null, pool_region text not null, auto_read_routing boolean not null, query_timeout_ms integer not null,
      status text not null, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'database_id',
    indexes: ['project_id, database_id'],
  },
  keyOf: databaseIdOf,
  evolve: evolveDatabase,
});

export function replicaIdOf(event: RecordedEvent): string | undefined {
  if (event.type === ReplicaAdded.type) return decodeWith(ReplicaAdded, event).data.replica_id;
  if (event.type === ReplicaRemoved.type) return decodeWith(ReplicaRemoved, event).data.replica_id;
  if (event.type === ReplicaUpdated.type) return decodeWith(ReplicaUpdated, event).data.replica_id;
  return undefined;
}

export function evolveReplica(row: ReplicaRow | undefined, event: RecordedEvent): ReplicaRow | null {
  if (event.type === ReplicaAdded.type) {
    const { data, metadata } = decodeWith(ReplicaAdded, event);
    return { ...data, created_at: metadata.at };
  }
  if (event.type === ReplicaUpdated.type) return row ? { ...row, ...decodeWith(ReplicaUpdated, event).data.changes } : null;
  if (event.type === ReplicaRemoved.type) return null;
  return row ?? null;
}

export const replicasProjection = rowProjection<ReplicaRow>({
  name: 'replicas',
  streamPrefixes: ['project-'],
  table: {
    name: 'replicas',
    key: 'replica_id',
    columnNames: ['replica_id', 'database_id', 'host', 'port', 'ssl_mode', 'created_at'],
    columns: 'replica_id text primary key, database_id text not null, host text not null, port integer not null, ssl_mode text not null, created_at timestamptz not null',
    orderBy: 'replica_id',
    indexes: ['database_id, replica_id'],
  },
  keyOf: replicaIdOf,
  evolve: evolveReplica,
});
