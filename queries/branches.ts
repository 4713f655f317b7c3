import type pg from 'pg';
import type { BranchRow } from '../projections/branches.js';

export async function findBranch(db: pg.Pool, projectId: string, branchId: string): Promise<BranchRow | undefined> {
  const { rows } = await db.query<{ row: BranchRow }>(`select to_jsonb(b) as row from rm.branches b where project_id = $1 and branch_id = $2 and status <> 'deleted'`, [projectId, branchId]);
  return rows[0]?.row;
}

export async function listBranches(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<BranchRow[]> {
  const { rows } = await db.query<{ row: BranchRow }>(
    `select to_jsonb(b) as row from rm.branches b where project_id = $1 and status <> 'deleted' and ($2::text is null or branch_id > $2) order by branch_id limit $3`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** Whether a live branch of the database already has this name. */
export async function branchNameTaken(db: pg.Pool, databaseId: string, name: string): Promise<boolean> {
  const { rows } = await db.query(`select 1 from rm.branches where database_id = $1 and name = $2 and status <> 'deleted' limit 1`, [databaseId, name]);
  return rows.length > 0;
}

/** Branches still copying, of every project: the recovery of interrupted copies checks each one's lease. */
export async function branchesStillCopying(db: pg.Pool): Promise<{ branch_id: string; project_id: string }[]> {
  const { rows } = await db.query<{ branch_id: string; project_id: string }>(`select branch_id, project_id from rm.branches where status = 'copying' order by branch_id`);
  return rows;
}

/** A database's ready branches: the hosted MCP picks its sandbox branch among them as the proxy does. */
export async function readyBranches(db: pg.Pool, databaseId: string): Promise<BranchRow[]> {
  const { rows } = await db.query<{ row: BranchRow }>(`select to_jsonb(b) as row from rm.branches b where database_id = $1 and status = 'ready'`, [databaseId]);
  return rows.map((r) => r.row);
}
