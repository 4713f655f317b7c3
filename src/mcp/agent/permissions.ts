import { z } from 'zod';
import type { TokenCredential } from '../../../queries/credentials.js';
import type { PolicyRow } from '../../../projections/policies.js';
import type { Canary } from '../../../proxy/policy/rules.js';

const when = (value: string | null): string | null => (value === null ? null : new Date(value).toISOString());

export const CredentialSummary = z.object({
  id: z.string(),
  name: z.string(),
  project_id: z.string(),
  principal_type: z.string(),
  status: z.enum(['active', 'disabled', 'revoked']),
  expires_at: z.string().nullable().describe('After this instant the credential is refused; null means never'),
  last_used_at: z.string().nullable(),
  created_at: z.string(),
});

export const PolicySummary = z.object({
  policy_id: z.string(),
  name: z.string(),
  version: z.int(),
  read_only: z.boolean(),
  allowed_tables: z.array(z.string()).describe('schema.table, or schema.* for every table of a schema'),
  masked_columns: z.record(z.string(), z.string()).describe('schema.table.column → mask (redact, hash, partial, null)'),
  max_rows: z.int().nullable().describe('Rows per result at most; null for no cap'),
  queries_per_day: z.int().describe('0 means no limit'),
  bytes_per_month: z.string().describe('"0" means no limit'),
  allow_catalog: z.boolean().describe('Whether statements may read pg_catalog and information_schema'),
  audit_mode: z.string().describe('strict: nothing runs while the audit trail cannot record it'),
  statement_timeout_ms: z.int().describe('A statement running longer is cancelled (SQLSTATE 57014); the database’s query_timeout_ms may be smaller'),
  approval: z.object({ held_kinds: z.array(z.string()), row_threshold: z.int().nullable(), expiry_seconds: z.int(), tables: z.array(z.string()), auto_approve: z.record(z.string(), z.object({ max_rows: z.int() })), row_tolerance_percent: z.int() }),
  statement_allow: z.array(z.string()).nullable().describe('Only statements whose every kind is listed run (rule statement_kind.not_allowed); null for every kind'),
  statement_deny: z.array(z.string()).describe('Statements of these kinds, also inside another (WITH x AS (DELETE ...) SELECT), are refused (rule statement_kind.denied)'),
  denied_tables: z.array(z.string()).describe('Tables refused wherever a statement names them, whatever allowed_tables says (rule table.denied)'),
  migration_safety: z.string().describe('Lock-heavy schema changes: off, warn (they run and are flagged) or block (refused with the safe alternative, rule migration_safety.*)'),
  row_filtered_tables: z.array(z.string()).describe('Tables whose rows are limited by a row filter: every statement sees, changes and deletes only the rows it allows (the predicate is not shown); INSERT into them and UPDATE of the filter columns are refused (rule row_filters.*)'),
  max_affected_rows: z.int().nullable().describe('A write affecting more rows is rolled back and refused (SQLSTATE 54000, rule write_cap.exceeded); null for no cap'),
  write_mode: z.string().describe('commit (writes run), rollback (each write runs and is rolled back: you see what it would do, nothing changes) or sandbox (statements run on the newest ready sandbox branch of the database; writes refused while there is none)'),
});

export function credentialSummary(row: TokenCredential): z.infer<typeof CredentialSummary> {
  return {
    id: row.credential_id,
    name: row.name,
    project_id: row.project_id,
    principal_type: row.principal_type,
    status: row.status,
    expires_at: when(row.expires_at),
    last_used_at: when(row.last_used_at),
    created_at: when(row.created_at)!,
  };
}

/** What the agent may know of its policy: nothing of its honeytokens, not even a canary table on its allowlist. */
export function policySummary(row: PolicyRow, canaries: readonly Canary[]): z.infer<typeof PolicySummary> {
  const planted = new Set(canaries.flatMap((canary) => (canary.kind === 'table' ? [canary.target] : [])));
  return {
    policy_id: row.policy_id,
    name: row.name,
    version: row.version,
    read_only: row.read_only,
    allowed_tables: row.allowed_tables.filter((table) => !planted.has(table)),
    masked_columns: row.masked_columns,
    max_rows: row.max_rows,
    queries_per_day: row.queries_per_day,
    bytes_per_month: row.bytes_per_month,
    allow_catalog: row.allow_catalog,
    audit_mode: row.audit_mode,
    statement_timeout_ms: row.statement_timeout_ms,
    approval: { tables: [], auto_approve: {}, row_tolerance_percent: 0, ...row.approval },
    statement_allow: row.statement_allow,
    statement_deny: row.statement_deny,
    denied_tables: row.denied_tables,
    migration_safety: row.migration_safety,
    row_filtered_tables: Object.keys(row.row_filters),
    max_affected_rows: row.max_affected_rows,
    write_mode: row.write_mode,
  };
}
