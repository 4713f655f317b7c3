import type { BranchStatus } from '../commands/branches/branch.js';
import { BranchCreated, BranchDeleted, BranchFailed, BranchReady, type BranchCopyMethod } from '../src/events/branches.js';
import { decodeWith } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** A sandbox branch as of its last event. */
export type BranchRow = {
  branch_id: string;
  project_id: string;
  database_id: string;
  name: string;
  database_name: string;
  status: BranchStatus;
  method: BranchCopyMethod | null;
  failure_reason: string | null;
  revision: number;
  created_at: string;
  updated_at: string;
};

export const BRANCH_STREAM = 'branch-';

export function evolveBranch(row: BranchRow | undefined, event: RecordedEvent): BranchRow | null {
  switch (event.type) {
    case BranchCreated.type: {
      const { data, metadata } = decodeWith(BranchCreated, event);
      return { ...data, status: 'copying', method: null, failure_reason: null, revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case BranchReady.type: {
      const { data, metadata } = decodeWith(BranchReady, event);
      return row ? { ...row, status: 'ready', method: data.method, revision: event.revision, updated_at: metadata.at } : null;
    }
    case BranchFailed.type: {
      const { data, metadata } = decodeWith(BranchFailed, event);
      return row ? { ...row, status: 'failed', failure_reason: data.reason, revision: event.revision, updated_at: metadata.at } : null;
    }
    case BranchDeleted.type:
      return row ? { ...row, status: 'deleted', revision: event.revision, updated_at: decodeWith(BranchDeleted, event).metadata.at } : null;
    default:
      return row ?? null;
  }
}

export function branchIdOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(BRANCH_STREAM) ? event.stream.slice(BRANCH_STREAM.length) : undefined;
}

export const branchesProjection = rowProjection<BranchRow>({
  name: 'branches',
  streamPrefixes: [BRANCH_STREAM],
  table: {
    name: 'branches',
    key: 'branch_id',
    columnNames: ['branch_id', 'project_id', 'database_id', 'name', 'database_name', 'status', 'method', 'failure_reason', 'revision', 'created_at', 'updated_at'],
    columns: `branch_id text primary key, project_id text not null, database_id text not null, name text not null, database_name text not null, status text not null,
      method text, failure_reason text, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'branch_id',
    indexes: ['project_id, branch_id'],
  },
  keyOf: branchIdOf,
  evolve: evolveBranch,
});
