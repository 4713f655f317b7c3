import type pg from 'pg';
import type { PolicyRow } from '../projections/policies.js';

export async function findPolicy(db: pg.Pool, projectId: string, policyId: string): Promise<PolicyRow | undefined> {
  const { rows } = await db.query<{ row: PolicyRow }>(`select to_jsonb(p) as row from rm.policies p where project_id = $1 and policy_id = $2 and status = 'active'`, [projectId, policyId]);
  return rows[0]?.row;
}

export async function listPolicies(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<PolicyRow[]> {
  const { rows } = await db.query<{ row: PolicyRow }>(
    `select to_jsonb(p) as row from rm.policies p where project_id = $1 and status = 'active' and ($2::text is null or policy_id > $2) order by policy_id limit $3`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** Whether another live profile of the project already has this name. */
export async function policyNameTaken(db: pg.Pool, projectId: string, name: string, except?: string): Promise<boolean> {
  const { rowCount } = await db.query(`select 1 from rm.policies where project_id = $1 and name = $2 and status = 'active' and policy_id is distinct from $3`, [projectId, name, except ?? null]);
  return (rowCount ?? 0) > 0;
}

/** The live profiles of the project that plant the honeytoken. */
export async function policiesPlanting(db: pg.Pool, projectId: string, honeytokenId: string): Promise<string[]> {
  const { rows } = await db.query<{ policy_id: string }>(
    `select policy_id from rm.policies where project_id = $1 and status = 'active' and honeytokens ? $2 order by policy_id`,
    [projectId, honeytokenId],
  );
  return rows.map((r) => r.policy_id);
}
