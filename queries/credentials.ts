import type pg from 'pg';
import type { CredentialRow } from '../projections/credentials.js';

/** A credential as its MCP token finds it: everything but the password's verifier. */
export type TokenCredential = Omit<CredentialRow, 'scram'>;

/** What an API response may be built from: no verifier, no token hash. */
export type CredentialView = Omit<CredentialRow, 'scram' | 'token_hash' | 'token_prefix' | 'secret_version'>;

const viewColumns = `credential_id, project_id, database_id, policy_profile_id, name, pg_username, principal_type, status,
  expires_at, expired_at, last_used_at, ip_rules, revision, created_at, updated_at`;

/** Any status, revoked included: the status is part of the representation. */
export async function findCredential(db: pg.Pool, projectId: string, credentialId: string): Promise<CredentialView | undefined> {
  const { rows } = await db.query<{ row: CredentialView }>(
    `select to_jsonb(c) as row from (select ${viewColumns} from rm.credentials where project_id = $1 and credential_id = $2) c`,
    [projectId, credentialId],
  );
  return rows[0]?.row;
}

export async function listCredentials(db: pg.Pool, projectId: string, after: string | undefined, limit: number): Promise<CredentialView[]> {
  const { rows } = await db.query<{ row: CredentialView }>(
    `select to_jsonb(c) as row from (select ${viewColumns} from rm.credentials
       where project_id = $1 and ($2::text is null or credential_id > $2) order by credential_id limit $3) c`,
    [projectId, after ?? null, limit],
  );
  return rows.map((r) => r.row);
}

/** Credentials not revoked that enforce `policyId`: a policy they use cannot be deleted. */
export async function countLiveCredentialsUsingPolicy(pool: pg.Pool, policyId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`select count(*)::int as n from rm.credentials where policy_profile_id = $1 and status <> 'revoked'`, [policyId]);
  return rows[0]?.n ?? 0;
}

/** Credentials of the project not revoked: a project that has any cannot be deleted. */
export async function countLiveCredentialsInProject(pool: pg.Pool, projectId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`select count(*)::int as n from rm.credentials where project_id = $1 and status <> 'revoked'`, [projectId]);
  return rows[0]?.n ?? 0;
}

/**
 * The credential whose MCP token hashes to `tokenHash`, only while it is usable: active, and
 * not past expires_at by the database's clock (fail-closed), so every refusal looks alike.
 */
export async function findCredentialByTokenHash(pool: pg.Pool, tokenHash: string): Promise<TokenCredential | undefined> {
  const { rows } = await pool.query<{ row: TokenCredential }>(
    `select to_jsonb(c) - 'scram' as row from rm.credentials c
      where token_hash = $1 and status = 'active' and (expires_at is null or expires_at > now())`,
    [tokenHash],
  );
  return rows[0]?.row;
}

/** Ids of credentials past expires_at at `now` whose expiry no event records yet (revoked ones need none). */
export async function credentialsPastExpiry(pool: pg.Pool, now: Date): Promise<string[]> {
  const { rows } = await pool.query<{ credential_id: string }>(
    `select credential_id from rm.credentials where expires_at <= $1 and expired_at is null and status <> 'revoked' order by credential_id`,
    [now.toISOString()],
  );
  return rows.map((r) => r.credential_id);
}

/** The project's active credentials with an expiry still ahead at `now`: how many, and the first instant one of them expires. */
export async function expiringCredentials(pool: pg.Pool, projectId: string, now: Date): Promise<{ count: number; firstExpiry: string | null }> {
  const { rows } = await pool.query<{ n: number; first: Date | null }>(
    `select count(*)::int as n, min(expires_at) as first from rm.credentials where project_id = $1 and status = 'active' and expires_at > $2`,
    [projectId, now.toISOString()],
  );
  return { count: rows[0]?.n ?? 0, firstExpiry: rows[0]?.first ? rows[0].first.toISOString() : null };
}

/** Ids of the project's active credentials, expired or not: what a project-wide kill-switch disables. */
export async function activeCredentialIds(pool: pg.Pool, projectId: string): Promise<string[]> {
  const { rows } = await pool.query<{ credential_id: string }>(`select credential_id from rm.credentials where project_id = $1 and status = 'active' order by credential_id`, [projectId]);
  return rows.map((r) => r.credential_id);
}
