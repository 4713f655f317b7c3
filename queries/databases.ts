import type pg from 'pg';
import type { DatabaseRow, ReplicaRow } from '../projections/databases.js';

export type DatabaseView = Omit<DatabaseRow, 'password_sealed'>;

/** Every column but the sealed password, which no API response carries. */
const columns = `database_id, project_id, host, port, name, username, ssl_mode, role, pool_config, cache_config, pool_region,
  auto_read_routing, query_timeout_ms, status, revision, created_at, updated_at`;

export async function findDatabase(db: pg.Pool, projectId: string, databaseId: string): Promise<DatabaseView | undefined> {
  const { rows } = await db.query<{ row: DatabaseView }>(
    `select to_jsonb(d) as row from (select ${columns} from rm.databases where project_id = $1 and database_id = $2 and status = 'active') d`,
    [projectId, databaseId],
  );
  return rows[0]?.row;
}

export async function listDatabases(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<DatabaseView[]> {
  const { rows } = await db.query<{ row: DatabaseView }>(
    `select to_jsonb(d) as row from (select ${columns} from rm.databases
       where project_id = $1 and status = 'active' and ($2::text is null or database_id > $2) order by database_id limit $3) d`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

export async function listReplicas(db: pg.Pool, databaseId: string, after: string | undefined, limit: number): Promise<ReplicaRow[]> {
  const { rows } = await db.query<{ row: ReplicaRow }>(
    `select to_jsonb(r) as row from rm.replicas r where database_id = $1 and ($2::text is null or replica_id > $2) order by replica_id limit $3`,
    [databaseId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** The whole row, sealed password included, whatever its status: for opening upstream connections (the hosted MCP), never for a response. */
export async function findDatabaseRow(db: pg.Pool, databaseId: string): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<{ row: DatabaseRow }>(`select to_jsonb(d) as row from rm.databases d where database_id = $1`, [databaseId]);
  return rows[0]?.row;
}
