import { decodeEvent } from '../src/events/catalog.js';
import { decodeWith } from '../src/events/envelope.js';
import {
  ConsentRecorded,
  OrganizationInvitationAccepted,
  OrganizationInvitationCreated,
  OrganizationInvitationRevoked,
  OrganizationMemberAdded,
  OrganizationMemberRemoved,
  OrganizationMemberRoleChanged,
} from '../src/events/identity.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type MembershipRow = { membership_id: string; org_id: string; user_id: string; role: string; created_at: string };

const MEMBER_EVENTS = new Set<string>([OrganizationMemberAdded.type, OrganizationMemberRoleChanged.type, OrganizationMemberRemoved.type]);

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
  keyOf: (event) => (MEMBER_EVENTS.has(event.type) ? membershipId(decodeEvent(event).data as { org_id: string; user_id: string }) : undefined),
  evolve(row, event: RecordedEvent) {
    switch (event.type) {
      case OrganizationMemberAdded.type: {
        const { data, metadata } = decodeWith(OrganizationMemberAdded, event);
        return { membership_id: membershipId(data), ...data, created_at: metadata.at };
      }
      case OrganizationMemberRoleChanged.type: {
        const { data } = decodeWith(OrganizationMemberRoleChanged, event);
        return row ? { ...row, role: data.role } : null;
      }
      case OrganizationMemberRemoved.type:
        return null;
      default:
        return row ?? null;
    }
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

export type InvitationRow = {
  invitation_id: string;
  org_id: string;
  email: string;
  role: string;
  status: 'pending' | 'accepted' | 'revoked';
  invited_by: string;
  expires_at: string;
  created_at: string;
  accepted_by: string | null;
  updated_at: string;
};

const INVITATION_EVENTS = new Set<string>([OrganizationInvitationCreated.type, OrganizationInvitationRevoked.type, OrganizationInvitationAccepted.type]);

/** Invitations without their token's hash: the hash stays on the organization's stream, where accepting checks it. */
export const invitationsProjection = rowProjection<InvitationRow>({
  name: 'invitations',
  streamPrefixes: ['org-'],
  table: {
    name: 'invitations',
    key: 'invitation_id',
    columnNames: ['invitation_id', 'org_id', 'email', 'role', 'status', 'invited_by', 'expires_at', 'created_at', 'accepted_by', 'updated_at'],
    columns:
      'invitation_id text primary key, org_id text not null, email text not null, role text not null, status text not null, invited_by text not null, expires_at timestamptz not null, created_at timestamptz not null, accepted_by text, updated_at timestamptz not null',
    orderBy: 'invitation_id',
    indexes: ['org_id, invitation_id'],
  },
  keyOf: (event) => (INVITATION_EVENTS.has(event.type) ? (decodeEvent(event).data as { invitation_id: string }).invitation_id : undefined),
  evolve: evolveInvitation,
});

export function evolveInvitation(row: InvitationRow | undefined, event: RecordedEvent): InvitationRow | null {
  switch (event.type) {
    case OrganizationInvitationCreated.type: {
      const { data, metadata } = decodeWith(OrganizationInvitationCreated, event);
      return { invitation_id: data.invitation_id, org_id: data.org_id, email: data.email, role: data.role, status: 'pending', invited_by: metadata.actor, expires_at: data.expires_at, created_at: metadata.at, accepted_by: null, updated_at: metadata.at };
    }
    case OrganizationInvitationRevoked.type:
      return row ? { ...row, status: 'revoked', updated_at: decodeWith(OrganizationInvitationRevoked, event).metadata.at } : null;
    case OrganizationInvitationAccepted.type: {
      const { data, metadata } = decodeWith(OrganizationInvitationAccepted, event);
      return row ? { ...row, status: 'accepted', accepted_by: data.user_id, updated_at: metadata.at } : null;
    }
    default:
      return row ?? null;
  }
}
