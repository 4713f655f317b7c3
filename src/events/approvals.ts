import { z } from 'zod';
import { defineEvent } from './envelope.js';
import {
  Actor,
  ApprovalId,
  CredentialId,
  DatabaseId,
  Int64String,
  PolicyId,
  ProjectId,
  Reason,
  Region,
  SessionId,
  Sha256Hex,
  StatementKind,
  TableName,
  text,
  Timestamp,
} from './fields.js';

/** `trial`: the exact rows of a run rolled back; `plan`: the planner's estimate (EXPLAIN), when the trial ran out of time. */
export const EstimateMethod = z.enum(['trial', 'plan']);
export type EstimateMethod = z.infer<typeof EstimateMethod>;

/** Where a held statement came from: its wire session waits for it; an MCP request is run by the agent's next call. */
export const ApprovalSource = z.enum(['wire', 'mcp']);
export type ApprovalSource = z.infer<typeof ApprovalSource>;

/**
 * A statement was held for a human decision (spec §2.8). The full text is kept, since it may be
 * executed; `binding` is the SHA-256 of what an approval is bound to (commands/approvals/binding.ts):
 * the statement's exact bytes, its parameters, the credential, the policy and its version.
 */
export const ApprovalRequested = defineEvent(
  'ApprovalRequested',
  1,
  z.strictObject({
    approval_id: ApprovalId,
    project_id: ProjectId,
    /** The upstream the statement runs on once approved. */
    database_id: DatabaseId,
    policy_profile_id: PolicyId,
    credential_id: CredentialId.nullable(),
    session_id: SessionId,
    region: Region,
    sql: text(1_000_000, 1),
    normalized_sql: text(1_000_000, 1),
    statement_kind: StatementKind,
    target_tables: z.array(TableName).max(1_000),
    /** A planner estimate or a rolled-back trial count; null when unknown. */
    estimated_rows: Int64String.nullable(),
    /** How estimated_rows was made (proxy/approval-estimate.ts); null or absent when it was not. */
    estimate_method: EstimateMethod.nullable().optional(),
    expires_at: Timestamp,
    source: ApprovalSource,
    policy_version: z.int().min(1),
    binding: Sha256Hex,
    /** The approval rule that held it, and why, as the agent was told. */
    hold_rule: z.string().regex(/^[a-z0-9_.]{1,64}$/, { message: 'expected a machine-readable rule name' }),
    hold_reason: text(2_000),
  }),
);
export type ApprovalRequested = z.infer<typeof ApprovalRequested.schema>;

const decisionFields = { approval_id: ApprovalId, decided_by: Actor, reason: Reason };

/** A human approved a held statement. */
export const ApprovalApproved = defineEvent('ApprovalApproved', 1, z.strictObject(decisionFields));
export type ApprovalApproved = z.infer<typeof ApprovalApproved.schema>;

/** A human rejected a held statement. */
export const ApprovalRejected = defineEvent('ApprovalRejected', 1, z.strictObject(decisionFields));
export type ApprovalRejected = z.infer<typeof ApprovalRejected.schema>;

/** A held statement lapsed undecided at its expires_at. */
export const ApprovalExpired = defineEvent('ApprovalExpired', 1, z.strictObject({ approval_id: ApprovalId, expired_at: Timestamp }));
export type ApprovalExpired = z.infer<typeof ApprovalExpired.schema>;

/**
 * The one party allowed to run an approved statement took it: its wire session, or an MCP call of its
 * credential. Appended at the stream revision it read, so a second taker conflicts: it runs at most once.
 */
export const ApprovalExecutionStarted = defineEvent('ApprovalExecutionStarted', 1, z.strictObject({ approval_id: ApprovalId, executor: text(200, 1) }));
export type ApprovalExecutionStarted = z.infer<typeof ApprovalExecutionStarted.schema>;

/** An approved statement ran upstream. */
export const ApprovalExecuted = defineEvent('ApprovalExecuted', 1, z.strictObject({ approval_id: ApprovalId, rows_affected: Int64String }));
export type ApprovalExecuted = z.infer<typeof ApprovalExecuted.schema>;

/** A held or approved statement did not run to its end: it failed upstream, its wait was ended (kill-switch, revocation, policy change), or its session was lost. */
export const ApprovalFailed = defineEvent(
  'ApprovalFailed',
  1,
  z.strictObject({
    approval_id: ApprovalId,
    sqlstate: z.string().regex(/^[0-9A-Z]{5}$/, { message: 'expected a five-character SQLSTATE' }),
    message: text(2_000),
  }),
);
export type ApprovalFailed = z.infer<typeof ApprovalFailed.schema>;
