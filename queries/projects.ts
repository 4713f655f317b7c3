import type pg from 'pg';
import type { ProjectRow } from '../projections/projects.js';

/** A project visible to `orgId`, or undefined: another organization's project reads exactly like a missing one. */
export async function findProject(db: pg.Pool, orgId: string, projectId: string): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<{ row: ProjectRow }>(`select to_jsonb(p) as row from rm.projects p where project_id = $1 and org_id = $2 and status = 'active'`, [projectId, orgId]);
  return rows[0]?.row;
}

export async function listProjects(db: pg.Pool, orgId: string, after: string | undefined, limit: number): Promise<ProjectRow[]> {
  const { rows } = await db.query<{ row: ProjectRow }>(
    `select to_jsonb(p) as row from rm.projects p where org_id = $1 and status = 'active' and ($2::text is null or project_id > $2) order by project_id limit $3`,
    [orgId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** A project's status in the read model (`active`, `deleted`), or undefined when it has none. */
export async function projectStatus(db: pg.Pool, projectId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ status: string }>('select status from rm.projects where project_id = $1', [projectId]);
  return rows[0]?.status;
}
