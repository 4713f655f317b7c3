import type pg from 'pg';
import { searchForm, type CrmActivityRow, type CrmContextRow, type CrmRecordRow } from '../projections/crm.js';
import type { CrmRecordType } from '../src/events/crm.js';
import type { TimeCursor } from './cursor.js';

/** A filter on one field of a record: `equals` its value, or `includes` it in an array field. */
export interface FieldFilter {
  readonly field: string;
  readonly value: string;
  readonly match: 'equals' | 'includes';
}

export interface CrmRecordFilter {
  readonly orgId: string;
  readonly type: CrmRecordType;
  /** Text the record's names, domains or e-mail addresses contain, case-insensitively. */
  readonly q?: string;
  readonly fields?: readonly FieldFilter[];
  /** Only artifacts in this status. */
  readonly status?: string;
}

export async function findCrmRecord(db: pg.Pool, recordId: string): Promise<CrmRecordRow | undefined> {
  const { rows } = await db.query<{ row: CrmRecordRow }>('select to_jsonb(r) as row from rm.crm_records r where record_id = $1', [recordId]);
  return rows[0]?.row;
}

/** LIKE's wildcards and escape character as plain text. */
function likePattern(text: string): string {
  return `%${searchForm(text).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** Newest first (ties by id), after `before` when given. */
export async function listCrmRecords(db: pg.Pool, filter: CrmRecordFilter, before: TimeCursor | undefined, limit: number): Promise<CrmRecordRow[]> {
  const values: unknown[] = [filter.orgId, filter.type, before?.createdAt ?? null, before?.id ?? null, limit];
  const where = ['org_id = $1', 'record_type = $2', '($3::timestamptz is null or (created_at, record_id) < ($3::timestamptz, $4::text))'];
  const param = (value: unknown): string => `$${values.push(value)}`;
  if (filter.q !== undefined) where.push(`search like ${param(likePattern(filter.q))}`);
  if (filter.status !== undefined) where.push(`status = ${param(filter.status)}`);
  for (const { field, value, match } of filter.fields ?? []) {
    where.push(match === 'equals' ? `fields ->> ${param(field)} = ${param(value)}` : `fields -> ${param(field)} ? ${param(value)}`);
  }
  const { rows } = await db.query<{ row: CrmRecordRow }>(`select to_jsonb(r) as row from rm.crm_records r where ${where.join(' and ')} order by created_at desc, record_id desc limit $5`, values);
  return rows.map((r) => r.row);
}

/** The records of `type` in the organization whose `field` names `id` (equals it, or lists it). */
export async function referencingRecords(db: pg.Pool, orgId: string, type: CrmRecordType, filter: FieldFilter, limit: number): Promise<string[]> {
  return (await listCrmRecords(db, { orgId, type, fields: [filter] }, undefined, limit)).map((row) => row.record_id);
}

export async function findCrmContext(db: pg.Pool, orgId: string): Promise<CrmContextRow | undefined> {
  const { rows } = await db.query<{ row: CrmContextRow }>('select to_jsonb(c) as row from rm.crm_contexts c where org_id = $1', [orgId]);
  return rows[0]?.row;
}

export interface ActivityFilter {
  readonly orgId: string;
  readonly subjectId?: string;
  readonly recordId?: string;
  readonly verb?: string;
}

/** A timeline, oldest first, after the activity at position `after` when given. */
export async function listActivities(db: pg.Pool, filter: ActivityFilter, after: string | undefined, limit: number): Promise<CrmActivityRow[]> {
  const { rows } = await db.query<{ row: CrmActivityRow }>(
    `select to_jsonb(a) || jsonb_build_object('position', a.position::text) as row from rm.crm_activities a
      where org_id = $1 and ($2::text is null or subject_id = $2) and ($3::text is null or record_id = $3) and ($4::text is null or verb = $4)
        and ($5::bigint is null or position > $5::bigint)
      order by position limit $6`,
    [filter.orgId, filter.subjectId ?? null, filter.recordId ?? null, filter.verb ?? null, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

export async function findActivity(db: pg.Pool, activityId: string): Promise<CrmActivityRow | undefined> {
  const { rows } = await db.query<{ row: CrmActivityRow }>(`select to_jsonb(a) || jsonb_build_object('position', a.position::text) as row from rm.crm_activities a where activity_id = $1`, [activityId]);
  return rows[0]?.row;
}
