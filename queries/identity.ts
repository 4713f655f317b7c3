import type pg from 'pg';
import type { ConsentRow, InvitationRow, MembershipRow } from '../projections/identity.js';
import { IDENTITY_SCHEMA } from '../src/identity/server.js';

/** A person's memberships, oldest first: the first is the organization they act in unless they name another. */
export async function membershipsOfUser(db: pg.Pool, userId: string): Promise<MembershipRow[]> {
  const { rows } = await db.query<{ row: MembershipRow }>('select to_jsonb(m) as row from rm.memberships m where user_id = $1 order by created_at, org_id', [userId]);
  return rows.map((r) => r.row);
}

export async function consentsOfUser(db: pg.Pool, userId: string): Promise<ConsentRow[]> {
  const { rows } = await db.query<{ row: ConsentRow }>('select to_jsonb(c) as row from rm.consents c where user_id = $1 order by accepted_at, consent_id', [userId]);
  return rows.map((r) => r.row);
}

/** A member as the members list shows them: the membership and the person's name and sign-up address from the identity server. */
export type MemberView = MembershipRow & { name: string | null; email: string | null };

async function members(db: pg.Pool, where: string, params: unknown[]): Promise<MemberView[]> {
  const { rows } = await db.query<{ row: MemberView }>(
    `select to_jsonb(m) || jsonb_build_object('name', u.name, 'email', u.email) as row
       from rm.memberships m left join ${IDENTITY_SCHEMA}."user" u on u.id = m.user_id
      where ${where}`,
    params,
  );
  return rows.map((r) => r.row);
}

export function membersOfOrg(db: pg.Pool, orgId: string, after: string | undefined, limit: number): Promise<MemberView[]> {
  return members(db, 'm.org_id = $1 and ($2::text is null or m.user_id > $2) order by m.user_id limit $3', [orgId, after ?? null, limit]);
}

export async function findMember(db: pg.Pool, orgId: string, userId: string): Promise<MemberView | undefined> {
  return (await members(db, 'm.org_id = $1 and m.user_id = $2', [orgId, userId]))[0];
}

export async function listInvitations(db: pg.Pool, orgId: string, after: string | undefined, limit: number): Promise<InvitationRow[]> {
  const { rows } = await db.query<{ row: InvitationRow }>(
    'select to_jsonb(i) as row from rm.invitations i where org_id = $1 and ($2::text is null or invitation_id > $2) order by invitation_id limit $3',
    [orgId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** An invitation by id, whatever its organization (accepting names only the token). */
export async function findInvitation(db: pg.Pool, invitationId: string): Promise<InvitationRow | undefined> {
  const { rows } = await db.query<{ row: InvitationRow }>('select to_jsonb(i) as row from rm.invitations i where invitation_id = $1', [invitationId]);
  return rows[0]?.row;
}
