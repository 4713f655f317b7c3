import type pg from 'pg';
import type { TimeCursor } from './cursor.js';
import type { CancellationFeedbackRow, SupportCaseRow, SupportMessageRow } from '../projections/support.js';

export interface SupportCaseFilter {
  /** Only this organization's cases; all organizations' for the deployment's operators. */
  readonly orgId?: string;
  readonly status?: 'open' | 'closed';
  readonly severity?: number;
}

export async function findSupportCase(db: pg.Pool, caseId: string): Promise<SupportCaseRow | undefined> {
  const { rows } = await db.query<{ row: SupportCaseRow }>('select to_jsonb(c) as row from rm.support_cases c where case_id = $1', [caseId]);
  return rows[0]?.row;
}

/** Newest first (ties by id), after `before` when given. */
export async function listSupportCases(db: pg.Pool, filter: SupportCaseFilter, before: TimeCursor | undefined, limit: number): Promise<SupportCaseRow[]> {
  const { rows } = await db.query<{ row: SupportCaseRow }>(
    `select to_jsonb(c) as row from rm.support_cases c
      where ($1::text is null or org_id = $1) and ($2::text is null or status = $2) and ($3::int is null or severity = $3)
        and ($4::timestamptz is null or (created_at, case_id) < ($4::timestamptz, $5::text))
      order by created_at desc, case_id desc limit $6`,
    [filter.orgId ?? null, filter.status ?? null, filter.severity ?? null, before?.createdAt ?? null, before?.id ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** A case's thread, oldest first. */
export async function listSupportMessages(db: pg.Pool, caseId: string): Promise<SupportMessageRow[]> {
  const { rows } = await db.query<{ row: SupportMessageRow }>('select to_jsonb(m) as row from rm.support_messages m where case_id = $1 order by seq', [caseId]);
  return rows.map((r) => r.row);
}

export async function listCancellationFeedback(db: pg.Pool, orgId: string, after: string | undefined, limit: number): Promise<CancellationFeedbackRow[]> {
  const { rows } = await db.query<{ row: CancellationFeedbackRow }>(
    'select to_jsonb(f) as row from rm.cancellation_feedback f where org_id = $1 and ($2::text is null or feedback_id > $2) order by feedback_id limit $3',
    [orgId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}
