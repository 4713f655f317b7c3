import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApi } from '../support/api.js';
import { freePort } from '../support/free-port.js';
import { sessionCookie, startListeningApi } from '../support/identity.js';
import { formOf, startSamlIdp, type SamlIdp, type SamlPerson, type SamlVariant } from '../support/saml-idp.js';

const PROVIDER = 'acme-saml';

let api: TestApi;
let base: string;
let idp: SamlIdp;

beforeAll(async () => {
  idp = await startSamlIdp({ email: 'sam@acme.test', name: 'Sam Saml' });
  const port = await freePort();
  const providers = [{ kind: 'saml', provider_id: PROVIDER, name: 'Acme', entry_point: idp.ssoUrl, idp_entity_id: idp.entityId, idp_certificate: idp.certificate }];
  ({ api, base } = await startListeningApi('saml', { PGWARD_SSO_PROVIDERS: JSON.stringify(providers) }, port));
  idp.spMetadataUrl = `${base}/api/auth/sso/saml2/sp/metadata?providerId=${PROVIDER}`;
});
afterAll(async () => {
  await api?.stop();
  await idp?.close();
});

interface Landing {
  status: number;
  location: string | null;
  cookie: string | undefined;
  /** What the IdP's page posted to pgward's ACS. */
  acs: string;
  posted: URLSearchParams;
}

/** SP-initiated sign-in as a browser does it: pgward's AuthnRequest to the IdP, the IdP's auto-posting form back to the ACS (a cross-site POST, no pgward cookie). */
async function signIn(person: SamlPerson, variant: SamlVariant): Promise<Landing> {
  idp.next = { person, variant };
  const started = await fetch(`${base}/api/auth/sign-in/sso`, { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: JSON.stringify({ providerId: PROVIDER, callbackURL: '/dashboard/' }) });
  expect(started.status).toBe(200);
  const { url } = (await started.json()) as { url: string };
  expect(url.startsWith(`${idp.ssoUrl}?SAMLRequest=`)).toBe(true);
  const page = await fetch(url);
  expect(page.status).toBe(200);
  const { action, fields } = formOf(await page.text());
  return post(action, fields);
}

async function post(acs: string, fields: URLSearchParams): Promise<Landing> {
  const landed = await fetch(acs, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(idp.ssoUrl).origin }, body: fields });
  return { status: landed.status, location: landed.headers.get('location'), cookie: sessionCookie(landed), acs, posted: fields };
}

async function counts(): Promise<{ users: number; sessions: number; accounts: number }> {
  const { rows } = await api.pool.query<{ users: number; sessions: number; accounts: number }>(
    `select (select count(*) from identity."user")::int as users, (select count(*) from identity.session)::int as sessions, (select count(*) from identity.account)::int as accounts`,
  );
  return rows[0]!;
}

async function usersNamed(...emails: string[]): Promise<number> {
  const { rows } = await api.pool.query<{ n: number }>(`select count(*)::int as n from identity."user" where email = any($1)`, [emails]);
  return rows[0]!.n;
}

describe('single sign-on with a SAML 2.0 identity provider (PGWARD_SSO_PROVIDERS kind saml)', () => {
  it('publishes the service provider metadata the IdP is configured from: entity id, the ACS, signed assertions wanted', async () => {
    const metadata = await (await fetch(idp.spMetadataUrl)).text();
    expect(metadata).toContain(`entityID="${base}/api/auth/sso/saml2/sp/metadata?providerId=${PROVIDER}"`);
    expect(metadata).toContain(`Location="${base}/api/auth/sso/saml2/sp/acs/${PROVIDER}"`);
    expect(metadata).toContain('WantAssertionsSigned="true"');
  });

  it.each([
    // samlify's signature and validity checks answer "Invalid SAML response"; the plugin's audience check names the audience.
    ['tampered', 'the e-mail changed after signing', 'tina@acme.test', 'saml_error'],
    ['expired', 'its validity ended an hour ago', 'eric@acme.test', 'saml_error'],
    ['other-audience', 'issued for another service provider', 'otto@acme.test', 'invalid_saml_response'],
    ['unsigned', 'no signature', 'uma@acme.test', 'saml_error'],
    ['foreign-key', 'signed with a key that is not the IdP’s', 'fiona@acme.test', 'saml_error'],
  ] as const)('refuses a %s assertion (%s): no session, no user, no account', async (variant, _why, email, error) => {
    const before = await counts();
    const landing = await signIn({ email, name: 'Refused Person' }, variant);
    expect(landing.acs).toBe(`${base}/api/auth/sso/saml2/sp/acs/${PROVIDER}`);
    expect(landing.status).toBe(302);
    const refusal = new URL(landing.location!, base);
    expect(`${refusal.origin}${refusal.pathname}`).toBe(`${base}/api/auth/error`);
    expect(refusal.searchParams.get('error')).toBe(error);
    expect(landing.cookie).toBeUndefined();
    expect(await counts()).toEqual(before);
    expect(await usersNamed(email, 'mallory@idp.test')).toBe(0);
  });

  it('signs a new person in (SP-initiated), with a session and an organization of their own; the same response again is refused', async () => {
    const before = await counts();
    const landing = await signIn({ email: 'sam@acme.test', name: 'Sam Saml' }, 'good');
    expect(landing.status).toBe(302);
    expect(landing.location).toBe('/dashboard/');
    expect(landing.cookie).toBeDefined();

    const me = await fetch(`${base}/v1/me`, { headers: { cookie: landing.cookie! } });
    expect(me.status).toBe(200);
    const who = (await me.json()) as { kind: string; role: string; org_id: string; subject: string };
    expect(who).toMatchObject({ kind: 'user_session', role: 'owner' });
    const events = await api.store.readStream(`org-${who.org_id}`);
    expect(events.map((e) => e.type)).toEqual(['OrganizationCreated.v1', 'OrganizationMemberAdded.v1']);
    const session = (await (await fetch(`${base}/api/auth/get-session`, { headers: { cookie: landing.cookie! } })).json()) as { user: { id: string; email: string; name: string } };
    expect(session.user).toMatchObject({ id: who.subject, email: 'sam@acme.test', name: 'Sam Saml' });
    const { rows } = await api.pool.query<{ provider_id: string; account_id: string }>(`select "providerId" as provider_id, "accountId" as account_id from identity.account where "userId" = $1`, [who.subject]);
    expect(rows).toEqual([{ provider_id: PROVIDER, account_id: 'sam@acme.test' }]);
    expect(await counts()).toEqual({ users: before.users + 1, sessions: before.sessions + 1, accounts: before.accounts + 1 });

    // The same response posted again is refused: its AuthnRequest was answered already.
    const replay = await post(landing.acs, landing.posted);
    expect(replay.status).toBe(302);
    expect(new URL(replay.location!, base).searchParams.get('error')).toBe('invalid_saml_response');
    expect(replay.cookie).toBeUndefined();
    expect((await counts()).sessions).toBe(before.sessions + 1);
  });

  it('signs the same person in again into the same account and organization', async () => {
    const first = await fetch(`${base}/v1/me`, { headers: { cookie: (await signIn({ email: 'sam@acme.test', name: 'Sam Saml' }, 'good')).cookie! } });
    const { rows } = await api.pool.query<{ n: number }>(`select count(*)::int as n from identity."user" where email = 'sam@acme.test'`);
    expect(rows[0]!.n).toBe(1);
    expect(((await first.json()) as { role: string }).role).toBe('owner');
  });

  it('does not offer the SSO plugin’s provider management: providers come from the configuration only', async () => {
    for (const path of ['sso/register', 'sso/providers', 'sso/get-provider', 'sso/update-provider', 'sso/delete-provider']) {
      const answer = await fetch(`${base}/api/auth/${path}`, { method: path === 'sso/providers' || path === 'sso/get-provider' ? 'GET' : 'POST', headers: { 'content-type': 'application/json', origin: base }, body: path === 'sso/providers' || path === 'sso/get-provider' ? null : '{}' });
      expect(answer.status, path).toBe(404);
    }
  });
});
