import type pg from 'pg';
import type { DomainRow } from '../projections/domains.js';

export async function findDomain(db: pg.Pool, projectId: string, domainId: string): Promise<DomainRow | undefined> {
  const { rows } = await db.query<{ row: DomainRow }>(`select to_jsonb(d) as row from rm.domains d where project_id = $1 and domain_id = $2 and status = 'active'`, [projectId, domainId]);
  return rows[0]?.row;
}

export async function listDomains(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<DomainRow[]> {
  const { rows } = await db.query<{ row: DomainRow }>(
    `select to_jsonb(d) as row from rm.domains d where project_id = $1 and status = 'active' and ($2::text is null or domain_id > $2) order by domain_id limit $3`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** The live domain holding `hostname` in any live project, when one does: a host name belongs to one project. */
export async function domainHolding(db: pg.Pool, hostname: string): Promise<DomainRow | undefined> {
  const { rows } = await db.query<{ row: DomainRow }>(
    `select to_jsonb(d) as row from rm.domains d join rm.projects p using (project_id)
     where d.domain = $1 and d.status = 'active' and p.status = 'active' order by d.verified_at nulls last limit 1`,
    [hostname],
  );
  return rows[0]?.row;
}
