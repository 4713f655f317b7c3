/**
 * Database-side enforcement of a read-only policy: an upstream login role that may SELECT exactly
 * the policy's tables, whose transactions are read-only by default. Made with the registered
 * database user, which needs CREATEROLE (or superuser) and the right to grant SELECT on the tables.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';

export type ProvisionErrorCode = 'CANNOT_CREATE_ROLES' | 'CANNOT_GRANT' | 'UNREACHABLE';

export class ProvisionError extends Error {
  override readonly name = 'ProvisionError';
  constructor(
    readonly code: ProvisionErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface RoleRequest {
  readonly roleName: string;
  readonly password: string;
  /** The policy's allowed_tables: `schema.table` or `schema.*`. */
  readonly allowedTables: readonly string[];
  /** Stored as the role's comment, so a DBA can tell what made it. */
  readonly comment: string;
}

export interface ProvisionedRole {
  /** Every table the role may SELECT, `schema.table`, sorted. */
  readonly tables: readonly string[];
  /** Allowed `schema.table` entries with no such relation upstream (granted nothing). */
  readonly missing: readonly string[];
}

/** The upstream role of a policy on a database: stable, lowercase, 31 characters. */
export function policyRoleName(policyId: string, databaseId: string): string {
  return `pgward_${createHash('sha256').update(`${policyId}\u0000${databaseId}`).digest('hex').slice(0, 24)}`;
}

const INSUFFICIENT_PRIVILEGE = '42501';

/** The relations an allowed entry names that exist: one for `schema.table`, every table, view and foreign table for `schema.*`. */
async function resolve(client: pg.Client, entry: string): Promise<string[]> {
  const dot = entry.indexOf('.');
  const schema = entry.slice(0, dot);
  const name = entry.slice(dot + 1);
  const { rows } = await client.query<{ qualified: string }>(
    `select n.nspname || '.' || c.relname as qualified from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and ($2::text is null or c.relname = $2) and c.relkind in ('r', 'p', 'v', 'm', 'f') order by 1`,
    [schema, name === '*' ? null : name],
  );
  return rows.map((r) => r.qualified);
}

function identifier(qualified: string): string {
  const dot = qualified.indexOf('.');
  return `${pg.escapeIdentifier(qualified.slice(0, dot))}.${pg.escapeIdentifier(qualified.slice(dot + 1))}`;
}

async function grant(client: pg.Client, role: string, tables: readonly string[]): Promise<void> {
  const quoted = pg.escapeIdentifier(role);
  const { rows: granted } = await client.query<{ qualified: string }>(
    `select distinct n.nspname || '.' || c.relname as qualified from pg_class c join pg_namespace n on n.oid = c.relnamespace, aclexplode(c.relacl) a
      where a.grantee = (select oid from pg_roles where rolname = $1)`,
    [role],
  );
  for (const { qualified } of granted) await client.query(`revoke all on table ${identifier(qualified)} from ${quoted}`);
  const schemas = [...new Set(tables.map((t) => t.slice(0, t.indexOf('.'))))];
  for (const schema of schemas) {
    const { rows } = await client.query<{ ok: boolean }>(`select has_schema_privilege($1, $2, 'USAGE') as ok`, [role, schema]);
    if (!rows[0]?.ok) await client.query(`grant usage on schema ${pg.escapeIdentifier(schema)} to ${quoted}`);
  }
  for (const table of tables) {
    try {
      await client.query(`grant select on table ${identifier(table)} to ${quoted}`);
    } catch (error) {
      if ((error as { code?: string }).code === INSUFFICIENT_PRIVILEGE) {
        throw new ProvisionError('CANNOT_GRANT', `the registered database user may not grant SELECT on ${table}; it must own the table or hold SELECT WITH GRANT OPTION`);
      }
      throw error;
    }
  }
}

/**
 * Creates the role, or replaces its password and grants when it exists: one transaction, so a
 * failure leaves the upstream as it was. The role inherits nothing and can create nothing.
 */
export async function provisionPolicyRole(config: pg.ClientConfig, request: RoleRequest): Promise<ProvisionedRole> {
  const client = new pg.Client(config);
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    throw new ProvisionError('UNREACHABLE', `the upstream database did not accept a connection: ${(error as Error).message}`);
  }
  try {
    const { rows } = await client.query<{ user: string; can: boolean }>(`select current_user as user, rolsuper or rolcreaterole as can from pg_roles where rolname = current_user`);
    if (!rows[0]?.can) {
      throw new ProvisionError('CANNOT_CREATE_ROLES', `the registered database user ${rows[0]?.user ?? ''} cannot create roles (it needs CREATEROLE); the policy is still enforced by the proxy`);
    }
    const resolved: { entry: string; tables: string[] }[] = [];
    for (const entry of request.allowedTables) resolved.push({ entry, tables: await resolve(client, entry) });
    const tables = [...new Set(resolved.flatMap((r) => r.tables))].sort();
    const missing = resolved.filter((r) => r.tables.length === 0 && !r.entry.endsWith('.*')).map((r) => r.entry);
    const role = pg.escapeIdentifier(request.roleName);
    await client.query('begin');
    const { rowCount } = await client.query('select 1 from pg_roles where rolname = $1', [request.roleName]);
    const password = `password ${client.escapeLiteral(request.password)}`;
    // Only a superuser may name SUPERUSER, REPLICATION or BYPASSRLS in ALTER ROLE; the role was created without them.
    await client.query(
      rowCount ? `alter role ${role} with login noinherit ${password}` : `create role ${role} with login nosuperuser nocreatedb nocreaterole noinherit noreplication nobypassrls ${password}`,
    );
    await client.query(`alter role ${role} set default_transaction_read_only = on`);
    await client.query(`comment on role ${role} is ${client.escapeLiteral(request.comment)}`);
    await grant(client, request.roleName, tables);
    await client.query('commit');
    return { tables, missing };
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
}
