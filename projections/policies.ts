import { decodeWith } from '../src/events/envelope.js';
import {
  DEFAULT_MIGRATION_SAFETY, DEFAULT_STATEMENT_TIMEOUT_MS, DEFAULT_WRITE_MODE, PolicyProfileCreated, PolicyProfileDeleted, PolicyProfileUpdated,
  type ApprovalRule, type MaskMode, type MigrationSafety, type PolicyStatementKind, type WriteMode,
} from '../src/events/policies.js';
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
  /** Null: every kind. */
  statement_allow: PolicyStatementKind[] | null;
  statement_deny: PolicyStatementKind[];
  denied_tables: string[];
  migration_safety: MigrationSafety;
  row_filters: Record<string, string>;
  /** Null: no cap. */
  max_affected_rows: number | null;
  write_mode: WriteMode;
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
      return {
        ...data,
        statement_timeout_ms: data.statement_timeout_ms ?? DEFAULT_STATEMENT_TIMEOUT_MS,
        statement_allow: data.statement_allow ?? null,
        statement_deny: data.statement_deny ?? [],
        denied_tables: data.denied_tables ?? [],
        migration_safety: data.migration_safety ?? DEFAULT_MIGRATION_SAFETY,
        row_filters: data.row_filters ?? {},
        max_affected_rows: data.max_affected_rows ?? null,
        write_mode: data.write_mode ?? DEFAULT_WRITE_MODE,
        version: 1,
        status: 'active',
        revision: event.revision,
        created_at: metadata.at,
        updated_at: metadata.at,
      };
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
      'approval', 'honeytokens', 'audit_mode', 'allow_catalog', 'statement_timeout_ms', 'statement_allow', 'statement_deny', 'denied_tables', 'migration_safety', 'row_filters', 'max_affected_rows', 'write_mode', 'version', 'status', 'revision', 'created_at', 'updated_at',
    ],
    columns: `policy_id text primary key, project_id text not null, name text not null, read_only boolean not null, allowed_tables jsonb not null,
      masked_columns jsonb not null, max_rows integer, queries_per_day integer not null, bytes_per_month text not null, approval jsonb not null,
      honeytokens jsonb not null, audit_mode text not null, allow_catalog boolean not null, statement_timeout_ms integer not null, statement_allow jsonb, statement_deny jsonb not null,
      denied_tables jsonb not null, migration_safety text not null, row_filters jsonb not null, max_affected_rows integer, write_mode text not null, version integer not null, status text not null,
      revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'policy_id',
    indexes: ['project_id, policy_id'],
    // Policies projected before these fields existed have the defaults they stand for.
    addedColumns: [
      `statement_timeout_ms integer not null default ${DEFAULT_STATEMENT_TIMEOUT_MS}`,
      'statement_allow jsonb',
      `statement_deny jsonb not null default '[]'`,
      `denied_tables jsonb not null default '[]'`,
      `migration_safety text not null default '${DEFAULT_MIGRATION_SAFETY}'`,
      `row_filters jsonb not null default '{}'`,
      'max_affected_rows integer',
      `write_mode text not null default '${DEFAULT_WRITE_MODE}'`,
    ],
  },
  keyOf: (event) => (handled.has(event.type) ? event.stream.slice('policy-'.length) : undefined),
  evolve: evolvePolicy,
});
