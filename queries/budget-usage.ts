import type pg from 'pg';

/** Statements that ran, as budgets count them: the allow-side events of the trail. */
const RAN = ['query', 'masked', 'truncated'];

export interface SpentSince {
  /** Statements that ran since `day`. */
  readonly queries: number;
  /** Bytes sent to clients since `month`. */
  readonly bytes: bigint;
}

export type BudgetScope = { readonly kind: 'credential'; readonly id: string } | { readonly kind: 'org'; readonly id: string };

/**
 * What a credential, or every credential of an organization, has spent since the start of the UTC
 * day and month, from the hourly usage rollups (both starts are whole hours, so the rollups are exact).
 */
export async function spentSince(db: pg.Pool | pg.PoolClient, scope: BudgetScope, day: Date, month: Date): Promise<SpentSince> {
  const where = scope.kind === 'credential' ? 'credential = $1' : 'project_id in (select project_id from rm.projects where org_id = $1)';
  const { rows } = await db.query<{ queries: string | null; bytes: string | null }>(
    `select sum(entries) filter (where hour >= $2 and event = any($4)) as queries, sum(bytes_out) filter (where hour >= $3) as bytes
       from rm.audit_usage_hourly where ${where} and hour >= least($2::timestamptz, $3::timestamptz)`,
    [scope.id, day.toISOString(), month.toISOString(), RAN],
  );
  return { queries: Number(rows[0]?.queries ?? 0), bytes: BigInt(rows[0]?.bytes ?? 0) };
}

/** The organization a project belongs to and its plan, from the read models. */
export async function projectOrganization(db: pg.Pool, projectId: string): Promise<{ org_id: string; plan: string } | undefined> {
  const { rows } = await db.query<{ org_id: string; plan: string }>('select o.org_id, o.plan from rm.projects p join rm.organizations o using (org_id) where p.project_id = $1', [projectId]);
  return rows[0];
}
