import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { changes, DatabaseId, HoneytokenId, Int64String, PolicyId, ProjectId, QualifiedColumn, QualifiedTable, SealedSecret, StatementKind, text } from './fields.js';

/**
 * A policy's statement timeout when it names none: long enough for an analyst's aggregate over a
 * large table, short enough that a runaway statement frees its upstream connection within a minute;
 * the hosted MCP's own limit is the same.
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
export const STATEMENT_TIMEOUT_MIN_MS = 100;
export const STATEMENT_TIMEOUT_MAX_MS = 3_600_000;

export const MaskMode = z.enum(['redact', 'hash', 'partial', 'null']);
export type MaskMode = z.infer<typeof MaskMode>;

export const AuditMode = z.enum(['best_effort', 'strict']);
export type AuditMode = z.infer<typeof AuditMode>;

/**
 * The statement kinds a policy may allow or deny: the policy analyzer's vocabulary
 * (proxy/policy/statements.ts): `ddl` is every schema, privilege or maintenance statement,
 * `transaction` BEGIN, COMMIT, ROLLBACK and savepoints, `other` what the analyzer has no kind for.
 */
export const POLICY_STATEMENT_KINDS = [
  'select', 'insert', 'update', 'delete', 'merge', 'copy', 'explain', 'set', 'show', 'transaction', 'call', 'do', 'lock', 'listen',
  'unlisten', 'notify', 'prepare', 'execute', 'deallocate', 'truncate', 'discard', 'declare', 'fetch', 'close', 'ddl', 'other',
] as const;
export const PolicyStatementKind = z.enum(POLICY_STATEMENT_KINDS);
export type PolicyStatementKind = z.infer<typeof PolicyStatementKind>;

/** What lock-heavy schema changes get: nothing more than any schema change, a `migration_flagged` row saying why, or a refusal. */
export const MigrationSafety = z.enum(['off', 'warn', 'block']);
export type MigrationSafety = z.infer<typeof MigrationSafety>;
/** Profiles that name none (all created before the field existed) flag lock-heavy schema changes and refuse nothing more. */
export const DEFAULT_MIGRATION_SAFETY: MigrationSafety = 'warn';

/**
 * What a write does: `commit` runs it, `rollback` runs it and rolls it back (the agent sees what
 * would have happened, nothing persists), `sandbox` would run it on a sandbox branch (refused
 * until branches exist).
 */
export const WriteMode = z.enum(['commit', 'rollback', 'sandbox']);
export type WriteMode = z.infer<typeof WriteMode>;
export const DEFAULT_WRITE_MODE: WriteMode = 'commit';

/** A ceiling under which a write to one table runs without a human decision. */
export const AutoApprove = z.strictObject({ max_rows: z.int().min(1).max(2_147_483_647) });
export type AutoApprove = z.infer<typeof AutoApprove>;

/**
 * Which statements are held for a human decision, and for how long. `held_kinds` is kept as the
 * event schema always had it (any lowercase kind); the API accepts only the policy statement kinds.
 */
export const ApprovalRule = z.strictObject({
  held_kinds: z.array(StatementKind).max(32),
  /** Also hold a write whose estimated rows exceed this (or cannot be estimated); null means no row threshold. */
  row_threshold: z.int().min(0).nullable(),
  expiry_seconds: z.int().min(1).max(604_800),
  /** Hold every write to these tables (`schema.table` or `schema.*`); absent: none. */
  tables: z.array(QualifiedTable).max(10_000).optional(),
  /** `schema.table` → a ceiling under which a counted write to it is not held; never a schema change. Absent: none. */
  auto_approve: z.record(QualifiedTable, AutoApprove).optional(),
  /** How far (percent of the trial count its reviewer saw) an approved write's rows may drift before it is rolled back; absent: 0, exact. */
  row_tolerance_percent: z.int().min(0).max(100).optional(),
});
export type ApprovalRule = z.infer<typeof ApprovalRule>;

const policyFields = {
  name: text(128, 1),
  read_only: z.boolean(),
  allowed_tables: z.array(QualifiedTable).max(10_000),
  masked_columns: z.record(QualifiedColumn, MaskMode),
  /** Result rows beyond this are cut off (event `truncated`); null means no cap. */
  max_rows: z.int().min(1).nullable(),
  /** 0 means no limit. */
  queries_per_day: z.int().min(0),
  /** "0" means no limit. */
  bytes_per_month: Int64String,
  approval: ApprovalRule,
  honeytokens: z.array(HoneytokenId).max(1_000),
  audit_mode: AuditMode,
  /** Whether statements may read pg_catalog and information_schema. */
  allow_catalog: z.boolean(),
  /** Each statement of an agent session is cancelled past this; absent in profiles created before it existed (DEFAULT_STATEMENT_TIMEOUT_MS). */
  statement_timeout_ms: z.int().min(STATEMENT_TIMEOUT_MIN_MS).max(STATEMENT_TIMEOUT_MAX_MS).optional(),
  /** Only statements of these kinds run (deny still wins); null or absent: every kind. */
  statement_allow: z.array(PolicyStatementKind).max(POLICY_STATEMENT_KINDS.length).nullable().optional(),
  /** Statements of these kinds, or running one of them anywhere inside, are refused; absent: none. */
  statement_deny: z.array(PolicyStatementKind).max(POLICY_STATEMENT_KINDS.length).optional(),
  /** Tables (`schema.table` or `schema.*`) refused whatever allowed_tables says; absent: none. */
  denied_tables: z.array(QualifiedTable).max(10_000).optional(),
  /** Absent: DEFAULT_MIGRATION_SAFETY. */
  migration_safety: MigrationSafety.optional(),
  /** `schema.table` → a predicate on the table's own columns, vetted when saved (proxy/policy/row-filters.ts); absent: none. */
  row_filters: z.record(QualifiedTable, z.string().min(1).max(4_000)).optional(),
  /** A write that affects more rows is rolled back and refused; null or absent: no cap. */
  max_affected_rows: z.int().min(1).max(2_147_483_647).nullable().optional(),
  /** Absent: DEFAULT_WRITE_MODE. */
  write_mode: WriteMode.optional(),
};

/** A policy profile was created; it is version 1. */
export const PolicyProfileCreated = defineEvent(
  'PolicyProfileCreated',
  1,
  z.strictObject({ policy_id: PolicyId, project_id: ProjectId, ...policyFields }),
);
export type PolicyProfileCreated = z.infer<typeof PolicyProfileCreated.schema>;

/** A policy profile changed; `version` is the profile's version after this change, so decisions cached under an older one are stale. */
export const PolicyProfileUpdated = defineEvent(
  'PolicyProfileUpdated',
  1,
  z.strictObject({ policy_id: PolicyId, changes: changes(policyFields), version: z.int().min(2) }),
);
export type PolicyProfileUpdated = z.infer<typeof PolicyProfileUpdated.schema>;

/** A policy profile was deleted. */
export const PolicyProfileDeleted = defineEvent('PolicyProfileDeleted', 1, z.strictObject({ policy_id: PolicyId }));
export type PolicyProfileDeleted = z.infer<typeof PolicyProfileDeleted.schema>;

/** An upstream PostgreSQL role name: what `CREATE ROLE` accepts unquoted, at most 63 bytes. */
const UpstreamRoleName = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, { message: 'expected a lowercase role name' });

/**
 * An upstream login role was made for a read-only policy on one of the project's databases: it
 * may SELECT exactly `tables` and its transactions are read-only by default. The proxy runs the
 * policy's sessions on that database as this role; re-provisioning replaces role and grants.
 */
export const PolicyRoleProvisioned = defineEvent(
  'PolicyRoleProvisioned',
  1,
  z.strictObject({
    policy_id: PolicyId,
    database_id: DatabaseId,
    role_name: UpstreamRoleName,
    /** Sealed under the keyring with the role name as associated data. */
    password: SealedSecret,
    tables: z.array(QualifiedTable).max(10_000),
  }),
);
export type PolicyRoleProvisioned = z.infer<typeof PolicyRoleProvisioned.schema>;
