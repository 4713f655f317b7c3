import type pg from 'pg';
import type { OrganizationRow } from '../projections/organizations.js';

export async function findOrganization(db: pg.Pool, orgId: string): Promise<OrganizationRow | undefined> {
  const { rows } = await db.query<{ row: OrganizationRow }>('select to_jsonb(o) as row from rm.organizations o where org_id = $1', [orgId]);
  return rows[0]?.row;
}
