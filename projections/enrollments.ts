import { decodeWith } from '../src/events/envelope.js';
import { SelfHostEnrollmentCreated, SelfHostEnrollmentRevoked } from '../src/events/enrollments.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** A self-host enrollment as of its last event; `token_hash` never leaves the server. */
export type EnrollmentRow = {
  enrollment_id: string;
  project_id: string;
  org_id: string;
  description: string;
  region_label: string;
  token_hash: string;
  token_prefix: string;
  expires_at: string | null;
  revoked_at: string | null;
  revision: number;
  created_at: string;
  updated_at: string;
};

export const ENROLLMENT_STREAM = 'enrollment-';

export function evolveEnrollment(row: EnrollmentRow | undefined, event: RecordedEvent): EnrollmentRow | null {
  switch (event.type) {
    case SelfHostEnrollmentCreated.type: {
      const { data, metadata } = decodeWith(SelfHostEnrollmentCreated, event);
      return { ...data, revoked_at: null, revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case SelfHostEnrollmentRevoked.type: {
      if (!row) return null;
      const { metadata } = decodeWith(SelfHostEnrollmentRevoked, event);
      return { ...row, revoked_at: metadata.at, revision: event.revision, updated_at: metadata.at };
    }
    default:
      return row ?? null;
  }
}

export function enrollmentIdOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(ENROLLMENT_STREAM) ? event.stream.slice(ENROLLMENT_STREAM.length) : undefined;
}

export type EnrollmentStatus = 'active' | 'revoked' | 'expired';

/** Whether the token still authenticates at `now`: revoked wins over expired. */
export function enrollmentStatus(row: Pick<EnrollmentRow, 'revoked_at' | 'expires_at'>, now: Date): EnrollmentStatus {
  if (row.revoked_at !== null) return 'revoked';
  if (row.expires_at !== null && Date.parse(row.expires_at) <= now.getTime()) return 'expired';
  return 'active';
}

export const enrollmentsProjection = rowProjection<EnrollmentRow>({
  name: 'self_host_enrollments',
  streamPrefixes: [ENROLLMENT_STREAM],
  table: {
    name: 'self_host_enrollments',
    key: 'enrollment_id',
    columnNames: ['enrollment_id', 'project_id', 'org_id', 'description', 'region_label', 'token_hash', 'token_prefix', 'expires_at', 'revoked_at', 'revision', 'created_at', 'updated_at'],
    columns: `enrollment_id text primary key, project_id text not null, org_id text not null, description text not null, region_label text not null,
      token_hash text not null, token_prefix text not null, expires_at timestamptz, revoked_at timestamptz, revision integer not null,
      created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'enrollment_id',
    indexes: ['project_id, enrollment_id', 'token_hash'],
  },
  keyOf: enrollmentIdOf,
  evolve: evolveEnrollment,
});
