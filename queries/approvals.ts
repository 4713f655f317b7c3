import type pg from 'pg';
import type { ApprovalRow, ApprovalRowStatus } from '../projections/approvals.js';

export async function findApproval(db: pg.Pool, projectId: string, approvalId: string): Promise<ApprovalRow | undefined> {
  const { rows } = await db.query<{ row: ApprovalRow }>(`select to_jsonb(a) as row from rm.approvals a where project_id = $1 and approval_id = $2`, [projectId, approvalId]);
  return rows[0]?.row;
}

export interface ApprovalFilter {
  readonly status?: ApprovalRowStatus;
  readonly credentialId?: string;
}

export async function listApprovals(db: pg.Pool, projectId: string, filter: ApprovalFilter, after: string | undefined, limit: number): Promise<ApprovalRow[]> {
  const { rows } = await db.query<{ row: ApprovalRow }>(
    `select to_jsonb(a) as row from rm.approvals a
      where project_id = $1 and ($2::text is null or status = $2) and ($3::text is null or credential_id = $3) and ($4::text is null or approval_id > $4)
      order by approval_id limit $5`,
    [projectId, filter.status ?? null, filter.credentialId ?? null, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** Pending requests whose expires_at is at or before `now`, oldest first: the expiry sweep's candidates. */
export async function approvalsPastExpiry(db: pg.Pool, now: Date, limit = 1_000): Promise<string[]> {
  const { rows } = await db.query<{ approval_id: string }>(
    `select approval_id from rm.approvals where status = 'pending' and expires_at <= $1 order by expires_at, approval_id limit $2`,
    [now.toISOString(), limit],
  );
  return rows.map((r) => r.approval_id);
}

/** The newest MCP request of a credential bound to `binding` (statement, parameters, policy version): where an agent's repeated call starts looking. */
export async function latestBoundApproval(db: pg.Pool, credentialId: string, binding: string): Promise<ApprovalRow | undefined> {
  const { rows } = await db.query<{ row: ApprovalRow }>(
    `select to_jsonb(a) as row from rm.approvals a where credential_id = $1 and binding = $2 and source = 'mcp' order by requested_at desc, approval_id desc limit 1`,
    [credentialId, binding],
  );
  return rows[0]?.row;
}
