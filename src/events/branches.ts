import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { BranchId, DatabaseId, ProjectId, text } from './fields.js';

/**
 * How a branch's database was copied: `template` (CREATE DATABASE … TEMPLATE, a file-level copy
 * that needs the source to have no other connections) or `logical` (pg_dump piped into psql).
 */
export const BranchCopyMethod = z.enum(['template', 'logical']);
export type BranchCopyMethod = z.infer<typeof BranchCopyMethod>;

/** The database name of a branch on the upstream server: `pgward_branch_` and the id's random part. */
export const BranchDatabaseName = z.string().regex(/^pgward_branch_[a-z0-9]{20,40}$/);

/** A sandbox branch of a project's database was asked for; its copy starts (status `copying`). */
export const BranchCreated = defineEvent(
  'BranchCreated',
  1,
  z.strictObject({ branch_id: BranchId, project_id: ProjectId, database_id: DatabaseId, name: text(100, 1), database_name: BranchDatabaseName }),
);
export type BranchCreated = z.infer<typeof BranchCreated.schema>;

/** The copy finished: the branch serves sandboxed sessions (status `ready`). */
export const BranchReady = defineEvent('BranchReady', 1, z.strictObject({ branch_id: BranchId, method: BranchCopyMethod }));
export type BranchReady = z.infer<typeof BranchReady.schema>;

/** The copy failed (status `failed`); `reason` says why. */
export const BranchFailed = defineEvent('BranchFailed', 1, z.strictObject({ branch_id: BranchId, reason: text(1000, 1) }));
export type BranchFailed = z.infer<typeof BranchFailed.schema>;

/** The branch was deleted and its database dropped. */
export const BranchDeleted = defineEvent('BranchDeleted', 1, z.strictObject({ branch_id: BranchId }));
export type BranchDeleted = z.infer<typeof BranchDeleted.schema>;
