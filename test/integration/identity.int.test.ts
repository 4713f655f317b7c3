import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApi } from '../support/api.js';
import { PASSWORD, sessionCookie, signUp, startListeningApi, totp } from '../support/identity.js';

let api: TestApi;
let base: string;

beforeAll(async () => {
  ({ api, base } = await startListeningApi('identity'));
});
afterAll(async () => {
  await api?.stop();
});

/** A browser page's request with the session cookie; `origin: null` sends no Origin header. */
function json(cookie: string, method: string, path: string, body?: unknown, origin: string | null = base): Promise<Response> {
  return fetch(`${base}${path}`, {
    method,
    headers: { cookie, ...(origin ? { origin } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

describe('people and their organizations (docs/identity.md)', () => {
  it('a sign-up without accepting the terms is refused', async () => {
    const refused = await fetch(`${base}/api/auth/sign-up/email`, { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: JSON.stringify({ email: 'no@example.test', password: PASSWORD, name: 'No' }) });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { code: string }).code).toBe('TERMS_NOT_ACCEPTED');
  });

  it('a sign-up creates the person’s organization through events, and the session cookie acts as its owner on REST', async () => {
    const { cookie, userId, response } = await signUp(base, 'owner@example.test', 'Olivia Owner');
    expect(userId).toMatch(/^usr_[a-z2-7]{26}$/);
    const setCookie = response.headers.getSetCookie().find((line) => line.startsWith('pgward.session_token='))!;
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Lax/i);

    const me = await json(cookie, 'GET', '/v1/me');
    expect(me.status).toBe(200);
    const who = (await me.json()) as { kind: string; org_id: string; role: string; subject: string };
    expect(who).toMatchObject({ kind: 'user_session', role: 'owner', subject: userId });
    const events = await api.store.readStream(`org-${who.org_id}`);
    expect(events.map((e) => e.type)).toEqual(['OrganizationCreated.v1', 'OrganizationMemberAdded.v1']);
    expect(JSON.parse(Buffer.from(events[1]!.data).toString())).toEqual({ org_id: who.org_id, user_id: userId, role: 'owner' });
    const org = await json(cookie, 'GET', `/v1/orgs/${who.org_id}`);
    expect(((await org.json()) as { name: string }).name).toBe('Olivia Owner\'s organization');

    // A signed-in person creates an organization API key, shown once, that then works on its own.
    const created = await json(cookie, 'POST', `/v1/orgs/${who.org_id}/api-keys`, { name: 'ci', role: 'admin' });
    expect(created.status).toBe(201);
    const { api_key } = (await created.json()) as { api_key: string };
    expect(api_key).toMatch(/^pgw_org_/);
    const byKey = await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${api_key}` } });
    expect(await byKey.json()).toMatchObject({ kind: 'org_api_key', org_id: who.org_id, role: 'admin' });
  });

  it('refuses a cookie-authenticated mutation from another origin or none, and a missing or forged session', async () => {
    const { cookie } = await signUp(base, 'csrf@example.test');
    const orgId = ((await (await json(cookie, 'GET', '/v1/me')).json()) as { org_id: string }).org_id;
    for (const origin of ['https://evil.example', null]) {
      const forged = await json(cookie, 'POST', `/v1/orgs/${orgId}/api-keys`, { name: 'stolen', role: 'owner' }, origin);
      expect(forged.status).toBe(403);
      expect(((await forged.json()) as { code: string }).code).toBe('FORBIDDEN');
    }
    // Reads need no Origin: a top-level navigation sends none.
    expect((await json(cookie, 'GET', `/v1/orgs/${orgId}/api-keys`, undefined, null)).status).toBe(200);
    const forgedCookie = await json('pgward.session_token=forged.value', 'GET', '/v1/me');
    expect(forgedCookie.status).toBe(401);
    expect((await fetch(`${base}/v1/me`)).status).toBe(401);
  });

  it('signs in with a password and a TOTP second factor', async () => {
    const { cookie } = await signUp(base, 'totp@example.test', 'Tom Totp');
    const enabled = await json(cookie, 'POST', '/api/auth/two-factor/enable', { password: PASSWORD });
    expect(enabled.status).toBe(200);
    const { totpURI, backupCodes } = (await enabled.json()) as { totpURI: string; backupCodes: string[] };
    expect(backupCodes.length).toBe(10);
    const secret = new URL(totpURI).searchParams.get('secret')!;
    expect((await json(cookie, 'POST', '/api/auth/two-factor/verify-totp', { code: totp(secret) })).status).toBe(200);

    const signIn = await fetch(`${base}/api/auth/sign-in/email`, { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: JSON.stringify({ email: 'totp@example.test', password: PASSWORD }) });
    expect(signIn.status).toBe(200);
    expect(await signIn.json()).toMatchObject({ twoFactorRedirect: true });
    expect(sessionCookie(signIn)).toBeUndefined();
    const pending = signIn.headers.getSetCookie().map((line) => line.split(';')[0]!).join('; ');
    const wrong = await json(pending, 'POST', '/api/auth/two-factor/verify-totp', { code: totp(secret, Date.now() + 10 * 60_000) });
    expect(wrong.status).toBe(401);
    const second = await json(pending, 'POST', '/api/auth/two-factor/verify-totp', { code: totp(secret) });
    expect(second.status).toBe(200);
    const session = sessionCookie(second)!;
    expect(((await (await json(session, 'GET', '/v1/me')).json()) as { kind: string }).kind).toBe('user_session');
  });

  it('offers WebAuthn registration options for a passkey, naming this deployment as relying party', async () => {
    const { cookie, userId } = await signUp(base, 'passkey@example.test', 'Pat Passkey');
    const options = await json(cookie, 'GET', '/api/auth/passkey/generate-register-options');
    expect(options.status).toBe(200);
    const body = (await options.json()) as { challenge: string; rp: { id: string; name: string }; user: { name: string; id: string }; pubKeyCredParams: { alg: number }[] };
    expect(body.rp).toEqual({ id: '127.0.0.1', name: 'pgward' });
    expect(body.user.name).toBe('passkey@example.test');
    expect(body.challenge).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(body.pubKeyCredParams.map((p) => p.alg)).toContain(-7);
    expect(userId).toMatch(/^usr_/);
    expect((await fetch(`${base}/api/auth/passkey/generate-register-options`)).status).toBe(401);
  });

  it('records consents at sign-up and on change, and exports the account with all nine members', async () => {
    const { cookie, userId } = await signUp(base, 'export@example.test', 'Eve Export');
    const orgId = ((await (await json(cookie, 'GET', '/v1/me')).json()) as { org_id: string }).org_id;
    const project = await json(cookie, 'POST', '/v1/projects', { name: 'Shop', org_id: orgId, database: { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' } });
    expect(project.status).toBe(201);
    const { project: created } = (await project.json()) as { project: { id: string } };
    const marketing = await json(cookie, 'POST', '/v1/account/consents', { document_type: 'marketing_emails', document_version: '2026-11-01', accepted: true });
    expect(marketing.status).toBe(201);
    expect(await marketing.json()).toMatchObject({ user_id: userId, document_type: 'marketing_emails', accepted: true, ip_address: '127.0.0.1' });

    const response = await json(cookie, 'GET', '/v1/account/export');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="pgward-account-${userId}.json"`);
    const exported = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(exported).sort()).toEqual(['audit_logs', 'consents', 'databases', 'email_preferences', 'exported_at', 'organizations', 'projects', 'sessions', 'user']);
    const user = exported.user as Record<string, unknown>;
    expect(user.id).toBe(userId);
    expect(user.name).toBe('Eve Export');
    expect(user.email).toBe('export@example.test');
    expect(user.email_verified).toBe(false);
    expect(user.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(user.updated_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(exported.organizations).toEqual([{ id: orgId, name: 'Eve Export\'s organization', slug: 'eve-export-s-organization', role: 'owner', created_at: expect.stringMatching(/Z$/) }]);
    expect(exported.projects).toEqual([{ id: created.id, org_id: orgId, name: 'Shop', description: '', status: 'active', created_at: expect.stringMatching(/Z$/) }]);
    const databases = exported.databases as Record<string, unknown>[];
    expect(databases).toHaveLength(1);
    expect(databases[0]).toMatchObject({ project_id: created.id, host: '127.0.0.1', port: 5432, name: 'postgres', ssl_mode: expect.any(String), role: expect.any(String) });
    expect(databases[0]).not.toHaveProperty('password');
    const sessions = exported.sessions as Record<string, unknown>[];
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({ id: expect.any(String), expires_at: expect.stringMatching(/Z$/), created_at: expect.stringMatching(/Z$/), ip_address: '127.0.0.1', user_agent: expect.any(String) });
    expect(exported.email_preferences).toEqual({ marketing_emails: true, usage_limit_alerts: true });
    const consents = exported.consents as { document_type: string; document_version: string; ip_address?: string }[];
    // The two of the sign-up share their accepted_at: compared as a set.
    expect(consents.map((c) => [c.document_type, c.document_version, c.ip_address]).sort()).toEqual([
      ['marketing_emails', '2026-11-01', '127.0.0.1'],
      ['privacy_policy', '2026-11-01', '127.0.0.1'],
      ['terms_of_service', '2026-11-01', '127.0.0.1'],
    ]);
    const actions = (exported.audit_logs as { action: string; resource_type?: string; resource_id?: string }[]).map((a) => [a.action, a.resource_type, a.resource_id]);
    expect(actions).toEqual([
      ['OrganizationCreated', 'org', orgId],
      ['OrganizationMemberAdded', 'org', orgId],
      ['ConsentRecorded', 'user', userId],
      ['ConsentRecorded', 'user', userId],
      ['ProjectCreated', 'project', created.id],
      ['DatabaseRegistered', 'project', created.id],
      ['ConsentRecorded', 'user', userId],
    ]);
    for (const entry of exported.audit_logs as Record<string, unknown>[]) expect(entry).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), action: expect.any(String), created_at: expect.stringMatching(/Z$/), resource_type: expect.any(String), resource_id: expect.any(String) });
    expect(exported.exported_at).toMatch(/Z$/);

    const byKey = await fetch(`${base}/v1/account/export`, { headers: { authorization: `Bearer ${(await api.org()).apiKey}` } });
    expect(byKey.status).toBe(403);
  });

  it('limits password attempts per client address: 10 in 10 s, then 429 with Retry-After', async () => {
    const attempt = () => fetch(`${base}/api/auth/sign-in/email`, { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: JSON.stringify({ email: 'owner@example.test', password: 'not the password at all' }) });
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < 11 && !limited; i++) {
      const response = await attempt();
      statuses.push(response.status);
      if (response.status === 429) limited = response;
    }
    // The TOTP test's sign-in may fall in the same window: 9 or 10 refusals, then the limit.
    expect(statuses.filter((s) => s === 401).length).toBeGreaterThanOrEqual(9);
    expect(statuses.at(-1)).toBe(429);
    expect(Number(limited!.headers.get('x-retry-after') ?? limited!.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
