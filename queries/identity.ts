import type pg from 'pg';
import type { ConsentRow, MembershipRow } from '../projections/identity.js';

/** A person's memberships, oldest first: the first is the organization they act in unless they name another. */
export async function membershipsOfUser(db: pg.Pool, userId: string): Promise<MembershipRow[]> {
  const { rows } = await db.query<{ row: MembershipRow }>('select to_jsonb(m) as row from rm.memberships m where user_id = $1 order by created_at, org_id', [userId]);
  return rows.map((r) => r.row);
}

export async function consentsOfUser(db: pg.Pool, userId: string): Promise<ConsentRow[]> {
  const { rows } = await db.query<{ row: ConsentRow }>('select to_jsonb(c) as row from rm.consents c where user_id = $1 order by accepted_at, consent_id', [userId]);
  return rows.map((r) => r.row);
}
