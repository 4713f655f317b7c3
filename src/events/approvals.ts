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
  StatementKind,
  TableName,
  text,
  Timestamp,
} from './fields.js';

/** A statement was held for a human decision (spec §2.8). The full text is kept, since it may be executed. */
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
    expires_at: Timestamp,
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

/** An approved statement ran upstream. */
export const ApprovalExecuted = defineEvent('ApprovalExecuted', 1, z.strictObject({ approval_id: ApprovalId, rows_affected: Int64String }));
export type ApprovalExecuted = z.infer<typeof ApprovalExecuted.schema>;

/** An approved statement failed upstream. */
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
