/**
 * People in an organization (docs/identity.md#members-and-invitations): invitations by e-mail
 * with a role, their acceptance, role changes and removals, decided on the organization's stream
 * so that the last-owner rule and a token's single use hold under concurrent requests.
 */
import type { CatalogEvent } from '../../src/events/catalog.js';
import {
  OrganizationInvitationAccepted,
  OrganizationInvitationCreated,
  OrganizationInvitationRevoked,
  OrganizationMemberAdded,
  OrganizationMemberRemoved,
  OrganizationMemberRoleChanged,
} from '../../src/events/identity.js';
import type { ApiKeyRole, HumanRole } from '../../src/events/organizations.js';
import { matchesHash } from '../../src/crypto/tokens.js';
import { DomainError } from '../domain-error.js';
import { emit, type Emit } from '../handle.js';

/** How long an invitation admits its person (docs/identity.md#members-and-invitations). */
export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;

export interface InvitationState {
  readonly email: string;
  readonly role: HumanRole;
  readonly tokenHash: string;
  readonly expiresAt: string;
  readonly status: 'pending' | 'accepted' | 'revoked';
}

interface MembershipState {
  readonly apiKeys: ReadonlyMap<string, { readonly role: ApiKeyRole; readonly revoked: boolean }>;
  readonly members: ReadonlyMap<string, ApiKeyRole>;
  readonly invitations: ReadonlyMap<string, InvitationState>;
}

export type MembershipCommand =
  | { readonly kind: 'invite'; readonly orgId: string; readonly invitationId: string; readonly email: string; readonly role: HumanRole; readonly tokenHash: string }
  | { readonly kind: 'revoke-invitation'; readonly orgId: string; readonly invitationId: string }
  /** `email` is the signed-in person's sign-up address, lower-cased. */
  | { readonly kind: 'accept-invitation'; readonly orgId: string; readonly invitationId: string; readonly token: string; readonly userId: string; readonly email: string }
  /** `actorRole` is the caller's role in the organization: only an owner grants or takes `owner`. */
  | { readonly kind: 'change-member-role'; readonly orgId: string; readonly userId: string; readonly role: HumanRole; readonly actorRole: HumanRole }
  /** `self` when the member leaves on their own. */
  | { readonly kind: 'remove-member'; readonly orgId: string; readonly userId: string; readonly actorRole: HumanRole; readonly self: boolean };

/**
 * Who can still act as owner: live owner keys and owner members. A person who owns the
 * organization can always create a new key, and an owner key can always invite a new owner, so
 * only the last of them all is protected.
 */
export function ownerCount(state: Pick<MembershipState, 'apiKeys' | 'members'>): number {
  return [...state.apiKeys.values()].filter((k) => k.role === 'owner' && !k.revoked).length + [...state.members.values()].filter((role) => role === 'owner').length;
}

export function evolveMembership<S extends MembershipState>(state: S, event: CatalogEvent): S {
  switch (event.type) {
    case OrganizationMemberAdded.type:
    case OrganizationMemberRoleChanged.type:
      return { ...state, members: new Map(state.members).set(event.data.user_id, event.data.role) };
    case OrganizationMemberRemoved.type: {
      const members = new Map(state.members);
      members.delete(event.data.user_id);
      return { ...state, members };
    }
    case OrganizationInvitationCreated.type: {
      const { invitation_id: id, email, role, token_hash: tokenHash, expires_at: expiresAt } = event.data;
      return { ...state, invitations: new Map(state.invitations).set(id, { email, role, tokenHash, expiresAt, status: 'pending' }) };
    }
    case OrganizationInvitationRevoked.type:
    case OrganizationInvitationAccepted.type: {
      const invitation = state.invitations.get(event.data.invitation_id);
      if (!invitation) return state;
      const status = event.type === OrganizationInvitationRevoked.type ? 'revoked' : 'accepted';
      return { ...state, invitations: new Map(state.invitations).set(event.data.invitation_id, { ...invitation, status }) };
    }
    default:
      return state;
  }
}

const expired = (invitation: InvitationState, now: string) => Date.parse(invitation.expiresAt) <= Date.parse(now);

/** Refuses a change that would leave the organization with no owner, or one by a non-owner touching an owner. */
function guardOwner(state: MembershipState, current: ApiKeyRole, next: ApiKeyRole | undefined, actorRole: HumanRole, self: boolean): DomainError | undefined {
  if ((current === 'owner' || next === 'owner') && actorRole !== 'owner' && !self) return new DomainError('FORBIDDEN', 'only an owner may grant the owner role or change or remove an owner');
  if (current === 'owner' && next !== 'owner' && ownerCount(state) === 1) return new DomainError('LAST_OWNER', 'this is the organization’s last owner: make another member owner first');
  return undefined;
}

export function decideMembership(state: MembershipState, command: MembershipCommand, now: string): Emit[] | DomainError {
  const org = command.orgId;
  switch (command.kind) {
    case 'invite': {
      const pending = [...state.invitations.values()].some((i) => i.email === command.email && i.status === 'pending' && !expired(i, now));
      if (pending) return new DomainError('RESOURCE_EXISTS', `${command.email} already has a pending invitation: revoke it first to invite again`);
      return [emit(OrganizationInvitationCreated, { org_id: org, invitation_id: command.invitationId, email: command.email, role: command.role, token_hash: command.tokenHash, expires_at: new Date(Date.parse(now) + INVITATION_TTL_MS).toISOString() })];
    }
    case 'revoke-invitation': {
      const invitation = state.invitations.get(command.invitationId);
      if (!invitation) return new DomainError('NOT_FOUND', `invitation ${command.invitationId} not found`);
      if (invitation.status === 'accepted') return new DomainError('INVITATION_ALREADY_ACCEPTED', `invitation ${command.invitationId} was accepted: remove the member instead`);
      if (invitation.status === 'revoked') return new DomainError('INVITATION_REVOKED', `invitation ${command.invitationId} is already revoked`);
      return [emit(OrganizationInvitationRevoked, { org_id: org, invitation_id: command.invitationId })];
    }
    case 'accept-invitation': {
      const invitation = state.invitations.get(command.invitationId);
      // A wrong secret is answered as an unknown invitation: the id alone reveals nothing.
      if (!invitation || !matchesHash(command.token, invitation.tokenHash)) return new DomainError('NOT_FOUND', 'invitation not found');
      if (invitation.status === 'accepted') return new DomainError('INVITATION_ALREADY_ACCEPTED', 'this invitation was already accepted');
      if (invitation.status === 'revoked') return new DomainError('INVITATION_REVOKED', 'this invitation was revoked');
      if (expired(invitation, now)) return new DomainError('INVITATION_EXPIRED', 'this invitation expired');
      if (invitation.email !== command.email) return new DomainError('INVITATION_EMAIL_MISMATCH', 'this invitation is for another e-mail address: sign in as the person it was sent to');
      if (state.members.has(command.userId)) return new DomainError('ALREADY_A_MEMBER', 'you are already a member of this organization');
      return [
        emit(OrganizationInvitationAccepted, { org_id: org, invitation_id: command.invitationId, user_id: command.userId }),
        emit(OrganizationMemberAdded, { org_id: org, user_id: command.userId, role: invitation.role }),
      ];
    }
    case 'change-member-role': {
      const current = state.members.get(command.userId);
      if (!current) return new DomainError('NOT_FOUND', `member ${command.userId} not found`);
      const refused = guardOwner(state, current, command.role, command.actorRole, false);
      if (refused) return refused;
      return [emit(OrganizationMemberRoleChanged, { org_id: org, user_id: command.userId, role: command.role })];
    }
    case 'remove-member': {
      const current = state.members.get(command.userId);
      if (!current) return new DomainError('NOT_FOUND', `member ${command.userId} not found`);
      const refused = guardOwner(state, current, undefined, command.actorRole, command.self);
      if (refused) return refused;
      return [emit(OrganizationMemberRemoved, { org_id: org, user_id: command.userId })];
    }
  }
}
