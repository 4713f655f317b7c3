import { decodeWith } from '../src/events/envelope.js';
import { ConsentRecorded, OrganizationMemberAdded } from '../src/events/identity.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type MembershipRow = { membership_id: string; org_id: string; user_id: string; role: string; created_at: string };

export const membershipsProjection = rowProjection<MembershipRow>({
  name: 'memberships',
  streamPrefixes: ['org-'],
  table: {
    name: 'memberships',
    key: 'membership_id',
    columnNames: ['membership_id', 'org_id', 'user_id', 'role', 'created_at'],
    columns: 'membership_id text primary key, org_id text not null, user_id text not null, role text not null, created_at timestamptz not null',
    orderBy: 'membership_id',
    indexes: ['user_id, created_at', 'org_id, user_id'],
  },
  keyOf: (event) => (event.type === OrganizationMemberAdded.type ? membershipId(decodeWith(OrganizationMemberAdded, event).data) : undefined),
  evolve(row, event: RecordedEvent) {
    if (event.type !== OrganizationMemberAdded.type) return row ?? null;
    const { data, metadata } = decodeWith(OrganizationMemberAdded, event);
    return { membership_id: membershipId(data), ...data, created_at: row?.created_at ?? metadata.at };
  },
});

function membershipId(data: { org_id: string; user_id: string }): string {
  return `${data.org_id}:${data.user_id}`;
}

export type ConsentRow = { consent_id: string; user_id: string; document_type: string; document_version: string; accepted: boolean; accepted_at: string; ip_address: string | null };

export const consentsProjection = rowProjection<ConsentRow>({
  name: 'consents',
  streamPrefixes: ['user-'],
  table: {
    name: 'consents',
    key: 'consent_id',
    columnNames: ['consent_id', 'user_id', 'document_type', 'document_version', 'accepted', 'accepted_at', 'ip_address'],
    columns: 'consent_id text primary key, user_id text not null, document_type text not null, document_version text not null, accepted boolean not null, accepted_at timestamptz not null, ip_address text',
    orderBy: 'consent_id',
    indexes: ['user_id, accepted_at'],
  },
  keyOf: (event) => (event.type === ConsentRecorded.type ? decodeWith(ConsentRecorded, event).data.consent_id : undefined),
  evolve: (row, event) => (event.type === ConsentRecorded.type ? decodeWith(ConsentRecorded, event).data : (row ?? null)),
});
