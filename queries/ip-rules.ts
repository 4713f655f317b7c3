import type pg from 'pg';
import type { IpRulesRow } from '../projections/ip-rules.js';

/** The project's IP rules, or undefined when none were ever set. */
export async function findIpRules(db: pg.Pool, projectId: string): Promise<IpRulesRow | undefined> {
  const { rows } = await db.query<{ row: IpRulesRow }>(`select to_jsonb(r) as row from rm.ip_rules r where project_id = $1`, [projectId]);
  return rows[0]?.row;
}
