import type pg from 'pg';
import type { HoneytokenRow } from '../projections/honeytokens.js';

export async function findHoneytoken(db: pg.Pool, projectId: string, honeytokenId: string): Promise<HoneytokenRow | undefined> {
  const { rows } = await db.query<{ row: HoneytokenRow }>(
    `select to_jsonb(h) as row from rm.honeytokens h where project_id = $1 and honeytoken_id = $2 and status = 'active'`,
    [projectId, honeytokenId],
  );
  return rows[0]?.row;
}

export async function listHoneytokens(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<HoneytokenRow[]> {
  const { rows } = await db.query<{ row: HoneytokenRow }>(
    `select to_jsonb(h) as row from rm.honeytokens h where project_id = $1 and status = 'active' and ($2::text is null or honeytoken_id > $2) order by honeytoken_id limit $3`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** Which of `ids` name no live honeytoken of the project. */
export async function unknownHoneytokens(db: pg.Pool, projectId: string, ids: readonly string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `select id from unnest($2::text[]) id where not exists (select 1 from rm.honeytokens where project_id = $1 and honeytoken_id = id and status = 'active')`,
    [projectId, ids],
  );
  return rows.map((r) => r.id);
}

/** The project's live honeytokens among `ids` (a policy's list), by id. */
export async function honeytokensById(db: pg.Pool, projectId: string, ids: readonly string[]): Promise<Map<string, HoneytokenRow>> {
  const { rows } = await db.query<{ row: HoneytokenRow }>(
    `select to_jsonb(h) as row from rm.honeytokens h where project_id = $1 and honeytoken_id = any($2::text[]) and status = 'active'`,
    [projectId, ids],
  );
  return new Map(rows.map((r) => [r.row.honeytoken_id, r.row]));
}
