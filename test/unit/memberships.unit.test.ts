import { describe, expect, it } from 'vitest';
import { DomainError } from '../../commands/domain-error.js';
import { decideMembership, INVITATION_TTL_MS, type InvitationState } from '../../commands/organizations/memberships.js';
import { sha256Hex } from '../../src/crypto/tokens.js';
import type { ApiKeyRole } from '../../src/events/organizations.js';
import { Problem } from '../../src/http/problem.js';
import { actingMembership } from '../../src/identity/acting.js';

const NOW = '2026-11-26T12:00:00.000Z';
const orgId = 'org_aaaaaaaaaaaaaaaaaaaaaaaaaa';
const TOKEN = 'pgw_inv_secret';

function state(members: Record<string, ApiKeyRole>, invitation?: Partial<InvitationState>, ownerKeys = 0) {
  const invitations = new Map<string, InvitationState>(invitation ? [['inv_1', { email: 'bob@example.com', role: 'admin', tokenHash: sha256Hex(TOKEN), expiresAt: '2026-12-01T00:00:00.000Z', status: 'pending', ...invitation }]] : []);
  const apiKeys = new Map(Array.from({ length: ownerKeys }, (_, i) => [`key_${i}`, { role: 'owner' as const, revoked: false }]));
  return { members: new Map(Object.entries(members)), invitations, apiKeys };
}

const codeOf = (decided: unknown) => (decided instanceof DomainError ? decided.code : 'OK');

describe('decideMembership', () => {
  const accept = (s: ReturnType<typeof state>, overrides: { token?: string; email?: string; userId?: string } = {}) =>
    codeOf(decideMembership(s, { kind: 'accept-invitation', orgId, invitationId: 'inv_1', token: TOKEN, userId: 'usr_bob', email: 'bob@example.com', ...overrides }, NOW));

  it('accepts once, for the invited address, with the right token, before expiry', () => {
    expect(accept(state({ usr_o: 'owner' }, {}))).toBe('OK');
    expect(accept(state({ usr_o: 'owner' }, {}), { token: `${TOKEN}x` })).toBe('NOT_FOUND');
    expect(accept(state({ usr_o: 'owner' }))).toBe('NOT_FOUND');
    expect(accept(state({ usr_o: 'owner' }, {}), { email: 'eve@example.com' })).toBe('INVITATION_EMAIL_MISMATCH');
    expect(accept(state({ usr_o: 'owner' }, { status: 'accepted' }))).toBe('INVITATION_ALREADY_ACCEPTED');
    expect(accept(state({ usr_o: 'owner' }, { status: 'revoked' }))).toBe('INVITATION_REVOKED');
    expect(accept(state({ usr_o: 'owner' }, { expiresAt: NOW }))).toBe('INVITATION_EXPIRED');
    expect(accept(state({ usr_o: 'owner', usr_bob: 'viewer' }, {}))).toBe('ALREADY_A_MEMBER');
  });

  it('makes an invitation expire seven days after it is made', () => {
    const decided = decideMembership(state({}), { kind: 'invite', orgId, invitationId: 'inv_2', email: 'a@example.com', role: 'viewer', tokenHash: sha256Hex('t') }, NOW);
    expect(Array.isArray(decided) && decided[0]!.data).toMatchObject({ expires_at: new Date(Date.parse(NOW) + INVITATION_TTL_MS).toISOString() });
  });

  it('lets only an owner touch owners, and never the last one', () => {
    const change = (s: ReturnType<typeof state>, userId: string, role: 'owner' | 'admin' | 'viewer', actorRole: 'owner' | 'admin') => codeOf(decideMembership(s, { kind: 'change-member-role', orgId, userId, role, actorRole }, NOW));
    const remove = (s: ReturnType<typeof state>, userId: string, actorRole: 'owner' | 'admin' | 'viewer', self: boolean) => codeOf(decideMembership(s, { kind: 'remove-member', orgId, userId, actorRole, self }, NOW));
    const two = state({ usr_o: 'owner', usr_a: 'admin', usr_v: 'viewer' });
    expect(change(two, 'usr_a', 'owner', 'admin')).toBe('FORBIDDEN');
    expect(change(two, 'usr_o', 'viewer', 'admin')).toBe('FORBIDDEN');
    expect(change(two, 'usr_v', 'admin', 'admin')).toBe('OK');
    expect(change(two, 'usr_o', 'admin', 'owner')).toBe('LAST_OWNER');
    expect(change(state({ usr_o: 'owner' }, undefined, 1), 'usr_o', 'admin', 'owner')).toBe('OK');
    expect(remove(two, 'usr_o', 'admin', false)).toBe('FORBIDDEN');
    expect(remove(two, 'usr_o', 'owner', true)).toBe('LAST_OWNER');
    expect(remove(two, 'usr_v', 'viewer', true)).toBe('OK');
    expect(remove(two, 'usr_nobody', 'owner', false)).toBe('NOT_FOUND');
  });
});

describe('actingMembership', () => {
  const memberships = [{ orgId: 'org_first', role: 'owner' }, { orgId: 'org_second', role: 'viewer' }];
  const status = (run: () => unknown) => {
    try {
      return run();
    } catch (error) {
      return error instanceof Problem ? error.status : error;
    }
  };

  it('acts in the organization named, else the one carried, else the first; never one the person is not a member of', () => {
    expect(actingMembership(memberships, 'org_second', 'org_first')).toEqual(memberships[1]);
    expect(actingMembership(memberships, undefined, 'org_second')).toEqual(memberships[1]);
    expect(actingMembership(memberships, undefined, undefined)).toEqual(memberships[0]);
    expect(actingMembership([], undefined, undefined)).toBeUndefined();
    expect(status(() => actingMembership(memberships, 'org_other', undefined))).toBe(404);
    expect(status(() => actingMembership(memberships, 'org_other', 'org_first'))).toBe(404);
    expect(status(() => actingMembership(memberships, undefined, 'org_left'))).toBe(403);
  });
});
