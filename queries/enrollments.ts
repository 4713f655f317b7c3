import type pg from 'pg';
import type { EnrollmentRow } from '../projections/enrollments.js';

const ROW = 'to_jsonb(e)';

export async function findEnrollment(db: pg.Pool, projectId: string, enrollmentId: string): Promise<EnrollmentRow | undefined> {
  const { rows } = await db.query<{ row: EnrollmentRow }>(`select ${ROW} as row from rm.self_host_enrollments e where project_id = $1 and enrollment_id = $2`, [projectId, enrollmentId]);
  return rows[0]?.row;
}

/** The enrollment whose token hashes to `tokenHash`: a lookup by the hash of a 256-bit secret, so timing reveals nothing usable. */
export async function findEnrollmentByHash(db: pg.Pool, tokenHash: string): Promise<EnrollmentRow | undefined> {
  const { rows } = await db.query<{ row: EnrollmentRow }>(`select ${ROW} as row from rm.self_host_enrollments e where token_hash = $1`, [tokenHash]);
  return rows[0]?.row;
}

export async function listEnrollments(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<EnrollmentRow[]> {
  const { rows } = await db.query<{ row: EnrollmentRow }>(
    `select ${ROW} as row from rm.self_host_enrollments e where project_id = $1 and ($2::text is null or enrollment_id > $2) order by enrollment_id limit $3`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}
