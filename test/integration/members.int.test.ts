import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handle } from '../../commands/handle.js';
import { organization } from '../../commands/organizations/organization.js';
import { invitationsProjection } from '../../projections/identity.js';
import { awaitCaughtUp } from '../../projections/maintenance.js';
import { newSecret, sha256Hex } from '../../src/crypto/tokens.js';
import { newId } from '../../src/ids.js';
import type { TestApi } from '../support/api.js';
import { authorizeInBrowser, MemoryOAuthClient, signUp, startListeningApi } from '../support/identity.js';
import { captureLogs, type CapturedLogs } from '../support/logs.js';

let api: TestApi;
let base: string;
let logs: CapturedLogs;

beforeAll(async () => {
  logs = captureLogs();
  ({ api, base } = await startListeningApi('members', {}, undefined, logs.logger));
});
afterAll(async () => {
  await api?.stop();
});

/** A person: their session cookie, or a bearer token of this identity server. */
type Credential = { cookie: string } | { bearer: string };

async function call(who: Credential, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const auth: Record<string, string> = 'cookie' in who ? { cookie: who.cookie, origin: base } : { authorization: `Bearer ${who.bearer}` };
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...auth, ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Signs a person up, waiting out the identity server's limit of 10 sign-ups per address in 10 s. */
async function person(email: string, name: string) {
  let signedUp: Awaited<ReturnType<typeof signUp>> | undefined;
  while (!signedUp) {
    signedUp = await signUp(base, email, name).catch(async (error: Error) => {
      if (!error.message.startsWith('sign-up: 429')) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return undefined;
    });
  }
  const { cookie, userId } = signedUp;
  const me = await call({ cookie }, 'GET', '/v1/me');
  return { cookie: { cookie }, userId, orgId: me.body.org_id as string };
}

/** An access token for the person, through the OAuth flow an MCP client runs (docs/identity.md). */
async function oauthToken(cookie: string): Promise<string> {
  const provider = new MemoryOAuthClient('http://127.0.0.1:53682/callback');
  const url = new URL(`${base}/v1/mcp`);
  await expect(new Client({ name: 'members-test', version: '1.0.0' }).connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  const { code } = await authorizeInBrowser(base, provider.authorizationUrl!, cookie);
  await new StreamableHTTPClientTransport(url, { authProvider: provider }).finishAuth(code);
  return provider.saved!.access_token;
}

async function invite(who: Credential, orgId: string, email: string, role: string) {
  return call(who, 'POST', `/v1/orgs/${orgId}/invitations`, { email, role });
}

const code = (response: { body: Record<string, unknown> }) => response.body.code;

describe('members and invitations (docs/identity.md#members-and-invitations)', () => {
  it('invites by e-mail with a role; only the invited person accepts, once; the token is shown once and stored hashed', async () => {
    const olivia = await person('olivia@example.test', 'Olivia');
    const bob = await person('bob@example.test', 'Bob');
    const carol = await person('carol@example.test', 'Carol');

    const created = await invite(olivia.cookie, olivia.orgId, 'Bob@Example.TEST', 'admin');
    expect(created.status).toBe(201);
    const token = created.body.token as string;
    expect(token).toMatch(/^pgw_inv_[a-z2-7]{26}\.[A-Za-z0-9_-]{43}$/);
    expect(created.body.accept_url).toBe(`${base}/dashboard/#/invitations/accept?token=${token}`);
    const invitation = created.body.invitation as Record<string, unknown>;
    expect(invitation).toMatchObject({ org_id: olivia.orgId, email: 'bob@example.test', role: 'admin', status: 'pending', invited_by: `user:${olivia.userId}`, accepted_by: null });
    expect(Date.parse(invitation.expires_at as string) - Date.parse(invitation.created_at as string)).toBe(7 * 24 * 3600 * 1000);
    // Only the hash is kept, in the event; the list never shows the token.
    const events = await api.store.readStream(`org-${olivia.orgId}`);
    const stored = events.find((e) => e.type === 'OrganizationInvitationCreated.v1')!;
    expect(JSON.parse(Buffer.from(stored.data).toString())).toMatchObject({ invitation_id: invitation.id, token_hash: sha256Hex(token) });
    expect(events.map((e) => Buffer.from(e.data).toString()).join('\n')).not.toContain(token.split('.')[1]);
    const listed = await call(olivia.cookie, 'GET', `/v1/orgs/${olivia.orgId}/invitations`);
    expect(listed.status).toBe(200);
    expect(listed.body.invitations).toEqual([invitation]);
    expect(JSON.stringify(listed.body)).not.toContain(token.split('.')[1]);

    // Another address, a wrong secret for the right id, garbage: refused without membership.
    const mismatch = await call(carol.cookie, 'POST', '/v1/invitations/accept', { token });
    expect([mismatch.status, code(mismatch)]).toEqual([403, 'INVITATION_EMAIL_MISMATCH']);
    const forged = `${token.split('.')[0]}.${newSecret('')}`;
    for (const wrong of [forged, 'pgw_inv_nonsense', '']) {
      const refused = await call(bob.cookie, 'POST', '/v1/invitations/accept', { token: wrong });
      expect([refused.status, code(refused)]).toEqual([404, 'NOT_FOUND']);
    }
    // An organization key names no person.
    const key = await call(olivia.cookie, 'POST', `/v1/orgs/${olivia.orgId}/api-keys`, { name: 'ci', role: 'owner' });
    const byKey = await call({ bearer: key.body.api_key as string }, 'POST', '/v1/invitations/accept', { token });
    expect([byKey.status, code(byKey)]).toEqual([403, 'FORBIDDEN']);

    const accepted = await call(bob.cookie, 'POST', '/v1/invitations/accept', { token });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ org_id: olivia.orgId, member: { user_id: bob.userId, name: 'Bob', email: 'bob@example.test', role: 'admin' } });
    const after = (await api.store.readStream(`org-${olivia.orgId}`)).slice(-2).map((e) => [e.type, JSON.parse(Buffer.from(e.data).toString())]);
    expect(after).toEqual([
      ['OrganizationInvitationAccepted.v1', { org_id: olivia.orgId, invitation_id: invitation.id, user_id: bob.userId }],
      ['OrganizationMemberAdded.v1', { org_id: olivia.orgId, user_id: bob.userId, role: 'admin' }],
    ]);
    const replay = await call(bob.cookie, 'POST', '/v1/invitations/accept', { token });
    expect([replay.status, code(replay)]).toEqual([409, 'INVITATION_ALREADY_ACCEPTED']);
    expect((await call(olivia.cookie, 'GET', `/v1/orgs/${olivia.orgId}/invitations`)).body.invitations).toMatchObject([{ id: invitation.id, status: 'accepted', accepted_by: bob.userId }]);
    // The request log saw the accept calls, never the token.
    expect(logs.lines.some((line) => line.includes('/v1/invitations/accept'))).toBe(true);
    expect(logs.lines.filter((line) => line.includes(token.split('.')[1]!))).toEqual([]);
    const members = await call(bob.cookie, 'GET', `/v1/orgs/${olivia.orgId}/members`);
    expect(members.status).toBe(200);
    expect((members.body.members as { user_id: string; role: string }[]).map((m) => [m.user_id, m.role]).sort()).toEqual([[bob.userId, 'admin'], [olivia.userId, 'owner']].sort());
  });

  it('refuses role escalation, invitations to another organization, and keeps the last owner', async () => {
    const owner = await person('owner2@example.test', 'Owen');
    const admin = await person('admin2@example.test', 'Ada');
    const stranger = await person('stranger2@example.test', 'Stan');
    const joined = await invite(owner.cookie, owner.orgId, 'admin2@example.test', 'admin');
    expect((await call(admin.cookie, 'POST', '/v1/invitations/accept', { token: joined.body.token })).status).toBe(200);

    // An admin invites, but never an owner; nor makes anyone owner, nor touches the owner.
    expect((await invite(admin.cookie, owner.orgId, 'viewer2@example.test', 'viewer')).status).toBe(201);
    const dup = await invite(admin.cookie, owner.orgId, 'viewer2@example.test', 'member');
    expect([dup.status, code(dup)]).toEqual([409, 'RESOURCE_EXISTS']);
    for (const refused of [
      await invite(admin.cookie, owner.orgId, 'boss@example.test', 'owner'),
      await call(admin.cookie, 'PATCH', `/v1/orgs/${owner.orgId}/members/${admin.userId}`, { role: 'owner' }),
      await call(admin.cookie, 'PATCH', `/v1/orgs/${owner.orgId}/members/${owner.userId}`, { role: 'viewer' }),
      await call(admin.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/members/${owner.userId}`),
    ]) {
      expect([refused.status, code(refused)]).toEqual([403, 'FORBIDDEN']);
    }
    // Another organization's id is not found, for a person and for a key of another organization.
    const strangerKey = (await call(stranger.cookie, 'POST', `/v1/orgs/${stranger.orgId}/api-keys`, { name: 'k', role: 'owner' })).body.api_key as string;
    for (const who of [stranger.cookie, { bearer: strangerKey }]) {
      const other = await invite(who, owner.orgId, 'stranger2@example.test', 'owner');
      expect([other.status, code(other)]).toEqual([404, 'NOT_FOUND']);
      expect((await call(who, 'GET', `/v1/orgs/${owner.orgId}/members`)).status).toBe(404);
      expect((await call(who, 'PATCH', `/v1/orgs/${owner.orgId}/members/${owner.userId}`, { role: 'viewer' })).status).toBe(404);
    }
    // The last owner cannot be demoted or leave; with a second owner they can.
    const demote = await call(owner.cookie, 'PATCH', `/v1/orgs/${owner.orgId}/members/${owner.userId}`, { role: 'admin' });
    expect([demote.status, code(demote)]).toEqual([409, 'LAST_OWNER']);
    const leave = await call(owner.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/members/${owner.userId}`);
    expect([leave.status, code(leave)]).toEqual([409, 'LAST_OWNER']);
    const promoted = await call(owner.cookie, 'PATCH', `/v1/orgs/${owner.orgId}/members/${admin.userId}`, { role: 'owner' });
    expect([promoted.status, promoted.body.role]).toEqual([200, 'owner']);
    expect((await call(owner.cookie, 'PATCH', `/v1/orgs/${owner.orgId}/members/${owner.userId}`, { role: 'member' })).body.role).toBe('member');
    const last = await call(admin.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/members/${admin.userId}`);
    expect([last.status, code(last)]).toEqual([409, 'LAST_OWNER']);
    // A member leaves on their own.
    expect((await call(owner.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/members/${owner.userId}`)).status).toBe(204);
    expect((await call(owner.cookie, 'GET', `/v1/orgs/${owner.orgId}/members`)).status).toBe(404);
  });

  it('answers revoked and expired invitations with 410', async () => {
    const owner = await person('owner3@example.test', 'Otto');
    const dave = await person('dave3@example.test', 'Dave');
    const made = await invite(owner.cookie, owner.orgId, 'dave3@example.test', 'viewer');
    const id = (made.body.invitation as { id: string }).id;
    expect((await call(owner.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/invitations/${id}`)).status).toBe(204);
    const again = await call(owner.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/invitations/${id}`);
    expect([again.status, code(again)]).toEqual([410, 'INVITATION_REVOKED']);
    const revoked = await call(dave.cookie, 'POST', '/v1/invitations/accept', { token: made.body.token });
    expect([revoked.status, code(revoked)]).toEqual([410, 'INVITATION_REVOKED']);

    // An invitation made eight days ago (its expiry is seven days after).
    const invitationId = newId('inv_');
    const token = newSecret(`pgw_inv_${invitationId.slice(4)}.`);
    const then = new Date(Date.now() - 8 * 24 * 3600 * 1000);
    await handle(api.store, `org-${owner.orgId}`, organization, { kind: 'invite', orgId: owner.orgId, invitationId, email: 'dave3@example.test', role: 'admin', tokenHash: sha256Hex(token) }, { correlationId: 'test', actor: 'test', now: () => then });
    expect(await awaitCaughtUp(api.store, api.pool, invitationsProjection, 5000)).toBe(true);
    const expired = await call(dave.cookie, 'POST', '/v1/invitations/accept', { token });
    expect([expired.status, code(expired)]).toEqual([410, 'INVITATION_EXPIRED']);
    const listed = (await call(owner.cookie, 'GET', `/v1/orgs/${owner.orgId}/invitations`)).body.invitations as { id: string; status: string }[];
    expect(listed.map((i) => [i.id, i.status]).sort()).toEqual([[id, 'revoked'], [invitationId, 'expired']].sort());
    // An expired invitation does not block a new one for the same address.
    expect((await invite(owner.cookie, owner.orgId, 'dave3@example.test', 'viewer')).status).toBe(201);
  });
});

describe('the acting organization (docs/identity.md#the-acting-organization)', () => {
  it('a person acts in the organization the path or X-Pgward-Org names, never in one they are not a member of, with a session and with a token', async () => {
    const owner = await person('owner4@example.test', 'Oona');
    const bob = await person('bob4@example.test', 'Bob');
    const stranger = await person('stranger4@example.test', 'Sid');
    const joined = await invite(owner.cookie, owner.orgId, 'bob4@example.test', 'admin');
    expect((await call(bob.cookie, 'POST', '/v1/invitations/accept', { token: joined.body.token })).status).toBe(200);
    const bobToken = { bearer: await oauthToken(bob.cookie.cookie) };
    const strangerToken = { bearer: await oauthToken(stranger.cookie.cookie) };

    for (const who of [bob.cookie, bobToken]) {
      // By default, the first organization (their own); the header or the path picks another of theirs.
      expect((await call(who, 'GET', '/v1/me')).body).toMatchObject({ org_id: bob.orgId, role: 'owner', subject: bob.userId });
      expect((await call(who, 'GET', '/v1/me', undefined, { 'x-pgward-org': owner.orgId })).body).toMatchObject({ org_id: owner.orgId, role: 'admin' });
      expect((await call(who, 'GET', `/v1/orgs/${owner.orgId}`)).body).toMatchObject({ id: owner.orgId, role: 'admin' });
      const orgs = (await call(who, 'GET', '/v1/orgs')).body.organizations as { id: string; role: string }[];
      expect(orgs.map((o) => [o.id, o.role]).sort()).toEqual([[bob.orgId, 'owner'], [owner.orgId, 'admin']].sort());
    }
    // A project made with the header belongs to that organization, and is seen only there.
    const project = await call(bob.cookie, 'POST', '/v1/projects', { name: 'Shared', org_id: owner.orgId, database: { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' } }, { 'x-pgward-org': owner.orgId });
    expect(project.status).toBe(201);
    const projectId = (project.body.project as { id: string }).id;
    expect((await call(bob.cookie, 'GET', `/v1/projects/${projectId}`, undefined, { 'x-pgward-org': owner.orgId })).status).toBe(200);
    expect((await call(bob.cookie, 'GET', `/v1/projects/${projectId}`)).status).toBe(404);
    // The management MCP, with the token and the header once: its operations act in that organization.
    const mcp = new Client({ name: 'members-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${bobToken.bearer}`, 'x-pgward-org': owner.orgId } } }));
    const viaMcp = (await mcp.callTool({ name: 'call_endpoint', arguments: { operation_id: 'listMembers' } })).structuredContent as { status: number; body: { members: { user_id: string }[] } };
    expect([viaMcp.status, viaMcp.body.members.map((m) => m.user_id).sort()]).toEqual([200, [bob.userId, owner.userId].sort()]);
    const projectViaMcp = (await mcp.callTool({ name: 'call_endpoint', arguments: { operation_id: 'getProject', path_params: { project_id: projectId } } })).structuredContent as { status: number };
    expect(projectViaMcp.status).toBe(200);
    await mcp.close();
    // The query's org_id names the organization as the header does.
    for (const who of [bob.cookie, bobToken]) {
      const listed = await call(who, 'GET', `/v1/projects?org_id=${owner.orgId}`);
      expect([listed.status, (listed.body.projects as { id: string }[]).map((p) => p.id)]).toEqual([200, [projectId]]);
    }

    // Never an organization they are not a member of: path, query and header alike answer 404.
    for (const who of [stranger.cookie, strangerToken]) {
      for (const [path, headers] of [
        [`/v1/orgs/${owner.orgId}`, {}],
        [`/v1/orgs/${owner.orgId}/members`, {}],
        [`/v1/projects?org_id=${owner.orgId}`, {}],
        ['/v1/me', { 'x-pgward-org': owner.orgId }],
        [`/v1/projects/${projectId}`, { 'x-pgward-org': owner.orgId }],
        [`/v1/projects/${projectId}`, {}],
      ] as const) {
        const refused = await call(who, 'GET', path, undefined, headers);
        expect([path, refused.status, code(refused)]).toEqual([path, 404, 'NOT_FOUND']);
      }
    }

    // Demoted: the next request, by session or by a token issued before, has the new role only.
    expect((await call(owner.cookie, 'PATCH', `/v1/orgs/${owner.orgId}/members/${bob.userId}`, { role: 'viewer' })).status).toBe(200);
    for (const who of [bob.cookie, bobToken]) {
      const refused = await invite(who, owner.orgId, 'someone@example.test', 'viewer');
      expect([refused.status, code(refused)]).toEqual([403, 'FORBIDDEN']);
      expect((await call(who, 'GET', `/v1/orgs/${owner.orgId}/members`)).status).toBe(200);
    }
    // Removed: the organization is gone for both at once.
    expect((await call(owner.cookie, 'DELETE', `/v1/orgs/${owner.orgId}/members/${bob.userId}`)).status).toBe(204);
    for (const who of [bob.cookie, bobToken]) {
      expect((await call(who, 'GET', `/v1/orgs/${owner.orgId}/members`)).status).toBe(404);
      expect((await call(who, 'GET', '/v1/me', undefined, { 'x-pgward-org': owner.orgId })).status).toBe(404);
      expect((await call(who, 'GET', `/v1/projects/${projectId}`, undefined, { 'x-pgward-org': owner.orgId })).status).toBe(404);
      expect((await call(who, 'GET', '/v1/me')).body).toMatchObject({ org_id: bob.orgId });
    }
  });

  it('a token whose organization the person left is refused until it names another', async () => {
    const ann = await person('ann5@example.test', 'Ann');
    const ben = await person('ben5@example.test', 'Ben');
    // Ann becomes an owner of Ben's organization and removes Ben, whose token was issued for it.
    const made = await invite(ben.cookie, ben.orgId, 'ann5@example.test', 'owner');
    expect((await call(ann.cookie, 'POST', '/v1/invitations/accept', { token: made.body.token })).status).toBe(200);
    const benToken = { bearer: await oauthToken(ben.cookie.cookie) };
    expect((await call(benToken, 'GET', '/v1/me')).body).toMatchObject({ org_id: ben.orgId, role: 'owner' });
    expect((await call(ann.cookie, 'DELETE', `/v1/orgs/${ben.orgId}/members/${ben.userId}`)).status).toBe(204);
    const gone = await call(benToken, 'GET', '/v1/me');
    expect([gone.status, code(gone)]).toEqual([403, 'FORBIDDEN']);
    // Ben is a member of nothing now: his session is no longer a caller of the API.
    expect((await call(ben.cookie, 'GET', '/v1/me')).status).toBe(401);
    expect(ann.orgId).not.toBe(ben.orgId);
  });
});
