import { decodeWith } from '../src/events/envelope.js';
import { DEFAULT_STATEMENT_TIMEOUT_MS, PolicyProfileCreated, PolicyProfileDeleted, PolicyProfileUpdated, type ApprovalRule, type MaskMode } from '../src/events/policies.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type PolicyRow = {
  policy_id: string;
  project_id: string;
  name: string;
  read_only: boolean;
  allowed_tables: string[];
  masked_columns: Record<string, MaskMode>;
  max_rows: number | null;
  queries_per_day: number;
  bytes_per_month: string;
  approval: ApprovalRule;
  honeytokens: string[];
  audit_mode: string;
  allow_catalog: boolean;
  statement_timeout_ms: number;
  version: number;
  status: 'active' | 'deleted';
  revision: number;
  created_at: string;
  updated_at: string;
};

const handled: ReadonlySet<string> = new Set([PolicyProfileCreated.type, PolicyProfileUpdated.type, PolicyProfileDeleted.type]);

export function evolvePolicy(row: PolicyRow | undefined, event: RecordedEvent): PolicyRow | null {
  switch (event.type) {
    case PolicyProfileCreated.type: {
      const { data, metadata } = decodeWith(PolicyProfileCreated, event);
      return { ...data, statement_timeout_ms: data.statement_timeout_ms ?? DEFAULT_STATEMENT_TIMEOUT_MS, version: 1, status: 'active', revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case PolicyProfileUpdated.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(PolicyProfileUpdated, event);
      return { ...row, ...data.changes, version: data.version, revision: event.revision, updated_at: metadata.at };
    }
    case PolicyProfileDeleted.type:
      return row ? { ...row, status: 'deleted', revision: event.revision, updated_at: decodeWith(PolicyProfileDeleted, event).metadata.at } : null;
    default:
      return row ?? null;
  }
}

export const policiesProjection = rowProjection<PolicyRow>({
  name: 'policies',
  streamPrefixes: ['policy-'],
  table: {
    name: 'policies',
    key: 'policy_id',
    columnNames: [
      'policy_id', 'project_id', 'name', 'read_only', 'allowed_tables', 'masked_columns', 'max_rows', 'queries_per_day', 'bytes_per_month',
      'approval', 'honeytokens', 'audit_mode', 'allow_catalog', 'statement_timeout_ms', 'version', 'status', 'revision', 'created_at', 'updated_at',
    ],
    columns: `policy_id text primary key, project_id text not null, name text not null, read_only boolean not null, allowed_tables jsonb not null,
      masked_columns jsonb not null, max_rows integer, queries_per_day integer not null, bytes_per_month text not null, approval jsonb not null,
      honeytokens jsonb not null, audit_mode text not null, allow_catalog boolean not null, statement_timeout_ms integer not null, version integer not null, status text not null,
      revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'policy_id',
    indexes: ['project_id, policy_id'],
    // Policies projected before statement_timeout_ms existed have the default it stands for.
    addedColumns: [`statement_timeout_ms integer not null default ${DEFAULT_STATEMENT_TIMEOUT_MS}`],
  },
  keyOf: (event) => (handled.has(event.type) ? event.stream.slice('policy-'.length) : undefined),
  evolve: evolvePolicy,
});
