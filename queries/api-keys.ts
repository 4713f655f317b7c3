import type pg from 'pg';
import type { ApiKeyRow } from '../projections/api-keys.js';

export type ApiKeyView = Omit<ApiKeyRow, 'token_hash'>;

/** The active key whose hash is `tokenHash`: a lookup by the hash of a 256-bit secret, so timing reveals nothing usable. */
export async function findActiveApiKeyByHash(db: pg.Pool, tokenHash: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<{ row: ApiKeyRow }>(`select to_jsonb(k) as row from rm.api_keys k where token_hash = $1 and status = 'active'`, [tokenHash]);
  return rows[0]?.row;
}

export async function listApiKeys(db: pg.Pool, orgId: string, after: string | undefined, limit: number): Promise<ApiKeyView[]> {
  const { rows } = await db.query<{ row: ApiKeyView }>(
    `select to_jsonb(k) - 'token_hash' as row from rm.api_keys k where org_id = $1 and ($2::text is null or key_id > $2) order by key_id limit $3`,
    [orgId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

export async function findApiKey(db: pg.Pool, orgId: string, keyId: string): Promise<ApiKeyView | undefined> {
  const { rows } = await db.query<{ row: ApiKeyView }>(`select to_jsonb(k) - 'token_hash' as row from rm.api_keys k where org_id = $1 and key_id = $2`, [orgId, keyId]);
  return rows[0]?.row;
}
