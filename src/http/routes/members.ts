/**
 * An organization's people (docs/identity.md#members-and-invitations): its members and their
 * roles, and invitations by e-mail that a signed-in person accepts with the token shown once.
 */
import { z } from 'zod';
import { organization } from '../../../commands/organizations/organization.js';
import type { MembershipCommand } from '../../../commands/organizations/memberships.js';
import { evolveInvitation, type InvitationRow } from '../../../projections/identity.js';
import { findInvitation, findMember, listInvitations, membersOfOrg, type MemberView } from '../../../queries/identity.js';
import { newSecret, sha256Hex } from '../../crypto/tokens.js';
import { OrganizationInvitationCreated } from '../../events/identity.js';
import { HumanRole } from '../../events/organizations.js';
import type { IdentityPlane } from '../../identity/plane.js';
import { newId } from '../../ids.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { callerOf, personOf, requirePerson, type Caller } from '../plugins/auth.js';
import { Problem } from '../problem.js';
import { OrgParams } from './organizations.js';
import { fold } from './projects.js';
import { addressedOrg, errorResponses, execute, IdParam, iso, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const TOKEN_PREFIX = 'pgw_inv_';
/** `pgw_inv_<invitation id suffix>.<secret>`: the id finds the invitation, the whole token is compared with its hash in constant time. */
const TOKEN = /^pgw_inv_([a-z2-7]{26})\.[A-Za-z0-9_-]{43}$/;

const Member = z
  .object({
    user_id: z.string(),
    name: z.string().nullable(),
    email: z.string().nullable().describe('The person’s sign-up address'),
    role: HumanRole,
    joined_at: Timestamp,
  })
  .meta({ id: 'Member' });

const Invitation = z
  .object({
    id: z.string(),
    org_id: z.string(),
    email: z.string(),
    role: HumanRole,
    status: z.enum(['pending', 'accepted', 'revoked', 'expired']),
    invited_by: z.string().describe('Who invited: `user:<id>` or `api_key:<id>`'),
    accepted_by: z.string().nullable().describe('The person who accepted it'),
    expires_at: Timestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Invitation' });

const MemberParams = OrgParams.extend({ user_id: IdParam('member’s user id (usr_...)') });
const InvitationParams = OrgParams.extend({ invitation_id: IdParam('invitation id (inv_...)') });

function toMember(row: MemberView): z.infer<typeof Member> {
  return { user_id: row.user_id, name: row.name, email: row.email, role: HumanRole.parse(row.role), joined_at: iso(row.created_at) };
}

function toInvitation(row: InvitationRow, now: Date): z.infer<typeof Invitation> {
  const status = row.status === 'pending' && Date.parse(row.expires_at) <= now.getTime() ? 'expired' : row.status;
  return {
    id: row.invitation_id,
    org_id: row.org_id,
    email: row.email,
    role: HumanRole.parse(row.role),
    status,
    invited_by: row.invited_by,
    accepted_by: row.accepted_by,
    expires_at: iso(row.expires_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** The caller's role as a person's role: requireRole has refused agent roles. */
const humanRole = (caller: Caller) => HumanRole.parse(caller.role);

async function memberOrNotFound(deps: ApiDeps, orgId: string, userId: string): Promise<MemberView> {
  const member = await findMember(deps.pool, orgId, userId);
  if (!member) throw new Problem('NOT_FOUND', `member ${userId} not found`);
  return member;
}

export function memberRoutes(app: Api, deps: ApiDeps, identity: IdentityPlane): void {
  const orgCommand = (request: Parameters<typeof execute>[1], orgId: string, command: MembershipCommand) => execute(deps, request, `org-${orgId}`, organization, command);

  app.get(
    '/v1/orgs/:org_id/members',
    {
      schema: {
        operationId: 'listMembers',
        summary: 'List an organization’s members (people) and their roles',
        tags: ['members'],
        params: OrgParams,
        querystring: PageQuery,
        response: { 200: z.object({ members: z.array(Member), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const orgId = addressedOrg(caller, request.params.org_id);
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await membersOfOrg(deps.pool, orgId, decodePageToken(token), size + 1), size, (row) => row.user_id);
      return { members: page.items.map(toMember), next_page_token: page.next_page_token };
    },
  );

  app.patch(
    '/v1/orgs/:org_id/members/:user_id',
    {
      schema: {
        operationId: 'changeMemberRole',
        summary: 'Change a member’s role',
        description: 'Admin or owner. Only an owner grants the owner role or changes an owner’s; the last owner cannot be demoted (409 LAST_OWNER). The member’s sessions and tokens act with the new role from their next request.',
        tags: ['members'],
        params: MemberParams,
        body: z.strictObject({ role: HumanRole }).meta({ title: 'ChangeMemberRoleRequest' }),
        response: { 200: Member, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'LAST_OWNER', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'admin');
      const orgId = addressedOrg(caller, request.params.org_id);
      await orgCommand(request, orgId, { kind: 'change-member-role', orgId, userId: request.params.user_id, role: request.body.role, actorRole: humanRole(caller) });
      return toMember(await memberOrNotFound(deps, orgId, request.params.user_id));
    },
  );

  app.delete(
    '/v1/orgs/:org_id/members/:user_id',
    {
      schema: {
        operationId: 'removeMember',
        summary: 'Remove a member, or leave the organization',
        description: 'Admin or owner removes others (only an owner removes an owner); any member may remove themselves. The last owner cannot go (409 LAST_OWNER). The person’s sessions and tokens no longer reach the organization from their next request.',
        tags: ['members'],
        params: MemberParams,
        response: { 204: z.null().describe('Removed'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'LAST_OWNER') },
      },
    },
    async (request, reply) => {
      const self = personOf(callerOf(request), identity.issuer) === request.params.user_id;
      const caller = requireRole(request, self ? 'viewer' : 'admin');
      const orgId = addressedOrg(caller, request.params.org_id);
      await orgCommand(request, orgId, { kind: 'remove-member', orgId, userId: request.params.user_id, actorRole: humanRole(caller), self });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v1/orgs/:org_id/invitations',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createInvitation',
        summary: 'Invite a person by e-mail address, with a role',
        description:
          'Admin or owner; only an owner invites an owner. The token is returned once, in `token` (and inside `accept_url`, in its fragment, which browsers never send to a server); only its hash is stored. It admits the person whose sign-up address is `email`, once, within 7 days (POST /v1/invitations/accept).',
        tags: ['members'],
        params: OrgParams,
        body: z.strictObject({ email: z.email().max(254).transform((email) => email.toLowerCase()), role: HumanRole.default('member') }).meta({ title: 'CreateInvitationRequest' }),
        response: {
          201: z.object({ invitation: Invitation, token: z.string().describe('The secret, shown once'), accept_url: z.string().describe('The dashboard page that accepts it, the token in its fragment; shown once') }),
          ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'RESOURCE_EXISTS', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE'),
        },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, request.body.role === 'owner' ? 'owner' : 'admin');
      const orgId = addressedOrg(caller, request.params.org_id);
      const invitationId = newId('inv_');
      const token = newSecret(`${TOKEN_PREFIX}${invitationId.slice(4)}.`);
      const result = await orgCommand(request, orgId, { kind: 'invite', orgId, invitationId, email: request.body.email, role: request.body.role, tokenHash: sha256Hex(token) });
      const created = result.recorded.filter((e) => e.type === OrganizationInvitationCreated.type);
      const row = fold(evolveInvitation, created);
      if (row.invitation_id !== invitationId) throw new Problem('CONFLICT', 'this request was already served; its token was shown then and cannot be shown again');
      const acceptUrl = `${new URL(identity.publicUrl).origin}/dashboard/#/invitations/accept?token=${token}`;
      return reply.code(201).send({ invitation: toInvitation(row, deps.now()), token, accept_url: acceptUrl });
    },
  );

  app.get(
    '/v1/orgs/:org_id/invitations',
    {
      schema: {
        operationId: 'listInvitations',
        summary: 'List an organization’s invitations (never their tokens)',
        tags: ['members'],
        params: OrgParams,
        querystring: PageQuery,
        response: { 200: z.object({ invitations: z.array(Invitation), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'admin');
      const orgId = addressedOrg(caller, request.params.org_id);
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listInvitations(deps.pool, orgId, decodePageToken(token), size + 1), size, (row) => row.invitation_id);
      return { invitations: page.items.map((row) => toInvitation(row, deps.now())), next_page_token: page.next_page_token };
    },
  );

  app.delete(
    '/v1/orgs/:org_id/invitations/:invitation_id',
    {
      schema: {
        operationId: 'revokeInvitation',
        summary: 'Revoke a pending invitation',
        description: 'Admin or owner. Its token admits no one from then on; an accepted invitation answers 409 INVITATION_ALREADY_ACCEPTED (remove the member instead).',
        tags: ['members'],
        params: InvitationParams,
        response: { 204: z.null().describe('Revoked'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVITATION_ALREADY_ACCEPTED', 'INVITATION_REVOKED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const orgId = addressedOrg(caller, request.params.org_id);
      await orgCommand(request, orgId, { kind: 'revoke-invitation', orgId, invitationId: request.params.invitation_id });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v1/invitations/accept',
    {
      schema: {
        operationId: 'acceptInvitation',
        summary: 'Accept an invitation: the signed-in person becomes a member with its role',
        description:
          'A person only (the session cookie or a token of this identity server), whose sign-up address is the invited one (403 INVITATION_EMAIL_MISMATCH otherwise). An unknown or wrong token is 404 NOT_FOUND; a used one 409 INVITATION_ALREADY_ACCEPTED; a revoked one 410 INVITATION_REVOKED; one past its 7 days 410 INVITATION_EXPIRED; a person already a member 409 ALREADY_A_MEMBER.',
        tags: ['members'],
        body: z.strictObject({ token: z.string().max(200).describe('The invitation’s token, as shown once to whoever invited') }).meta({ title: 'AcceptInvitationRequest' }),
        response: {
          200: z.object({ org_id: z.string(), member: Member }),
          ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'ALREADY_A_MEMBER', 'INVITATION_ALREADY_ACCEPTED', 'INVITATION_EMAIL_MISMATCH', 'INVITATION_REVOKED', 'INVITATION_EXPIRED', 'UNSUPPORTED_MEDIA_TYPE'),
        },
      },
    },
    async (request) => {
      const userId = requirePerson(request, identity.issuer);
      const match = TOKEN.exec(request.body.token);
      const invitation = match ? await findInvitation(deps.pool, `inv_${match[1]}`) : undefined;
      if (!invitation) throw new Problem('NOT_FOUND', 'invitation not found');
      const user = await (await identity.server.$context).internalAdapter.findUserById(userId);
      if (!user) throw new Problem('FORBIDDEN', 'the signed-in person is not found');
      const orgId = invitation.org_id;
      await orgCommand(request, orgId, { kind: 'accept-invitation', orgId, invitationId: invitation.invitation_id, token: request.body.token, userId, email: user.email.toLowerCase() });
      return { org_id: orgId, member: toMember(await memberOrNotFound(deps, orgId, userId)) };
    },
  );
}
