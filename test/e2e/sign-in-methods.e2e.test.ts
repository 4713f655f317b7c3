import { createHash } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApi } from '../support/api.js';
import { watchedPage } from '../support/browser.js';
import { freePort } from '../support/free-port.js';
import { PASSWORD, startListeningApi } from '../support/identity.js';
import { startOidcIdp } from '../support/oidc-idp.js';
import { startSamlIdp, type SamlIdp } from '../support/saml-idp.js';

const CHROMIUM = process.env.PGWARD_CHROMIUM ?? '/usr/bin/chromium';

let api: TestApi;
/** The public URL: `localhost`, since WebAuthn takes no IP address as its relying party. */
let base: string;
let idp: SamlIdp;
let oidc: Awaited<ReturnType<typeof startOidcIdp>>;
let browser: Browser;
const pageErrors: string[] = [];

beforeAll(async () => {
  idp = await startSamlIdp({ email: 'sam@acme.test', name: 'Sam Saml' });
  const port = await freePort();
  base = `http://localhost:${port}`;
  oidc = await startOidcIdp([`${base}/api/auth/callback/corp`]);
  const providers = [
    { kind: 'saml', provider_id: 'acme', name: 'Acme', entry_point: idp.ssoUrl, idp_entity_id: idp.entityId, idp_certificate: idp.certificate },
    { kind: 'oidc', provider_id: 'corp', name: 'Corp OpenID', discovery_url: `${oidc.issuer}/.well-known/openid-configuration`, client_id: 'pgward', client_secret: 'idp-client-secret-0123456789' },
  ];
  ({ api } = await startListeningApi('signin_methods', { PGWARD_PUBLIC_URL: base, PGWARD_SSO_PROVIDERS: JSON.stringify(providers) }, port));
  idp.spMetadataUrl = `http://127.0.0.1:${port}/api/auth/sso/saml2/sp/metadata?providerId=acme`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  await api?.stop();
  await idp?.close();
  await new Promise((resolve) => oidc?.server.close(resolve));
});

/** A fresh browser (no cookies) that records script errors and CSP violations. */
function newPage(): Promise<Page> {
  return watchedPage(browser, pageErrors);
}

/** An OAuth client registered (RFC 7591) with a loopback redirect URI, and its authorization URL (PKCE S256). */
async function authorizationUrl(): Promise<string> {
  const redirect = 'http://127.0.0.1:9/callback';
  const registered = await fetch(`http://127.0.0.1:${new URL(base).port}/api/auth/mcp/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'passkey test client', redirect_uris: [redirect], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none' }),
  });
  expect(registered.status).toBe(201);
  const { client_id } = (await registered.json()) as { client_id: string };
  const challenge = createHash('sha256').update('a verifier the client keeps, long enough for PKCE 0123456789').digest('base64url');
  const query = new URLSearchParams({ response_type: 'code', client_id, redirect_uri: redirect, scope: 'openid profile email', state: 'passkey-state', code_challenge: challenge, code_challenge_method: 'S256', resource: `${base}/v1/mcp`, prompt: 'consent' });
  return `${base}/api/auth/mcp/authorize?${query}`;
}

/** Who the page's cookie signs in as: /v1/me and the identity server's session. */
async function whoIs(page: Page): Promise<{ me: { kind: string; role: string; subject: string }; email: string }> {
  return page.evaluate(async () => {
    const me = (await (await fetch('/v1/me')).json()) as { kind: string; role: string; subject: string };
    const session = (await (await fetch('/api/auth/get-session')).json()) as { user: { email: string } };
    return { me, email: session.user.email };
  });
}

describe('the sign-in page offers passkeys and the configured single sign-on providers (docs/identity.md)', () => {
  it('lists a passkey button and one button per provider, labelled, and no provider secret', async () => {
    const options = await fetch(`http://127.0.0.1:${new URL(base).port}/v1/sign-in-options`);
    expect(options.status).toBe(200);
    expect(await options.json()).toEqual({ passkey: true, providers: [{ id: 'acme', name: 'Acme', kind: 'saml' }, { id: 'corp', name: 'Corp OpenID', kind: 'oidc' }] });
    const page = await newPage();
    await page.goto(`${base}/sign-in`);
    await page.getByRole('heading', { level: 1, name: 'Sign in to pgward' }).waitFor();
    const other = page.getByRole('region', { name: 'Other ways to sign in' });
    expect(await other.getByRole('button').allInnerTexts()).toEqual(['Sign in with a passkey', 'Sign in with Acme', 'Sign in with Corp OpenID']);
    await page.context().close();
  });

  it('registers a passkey for a signed-in person; after signing out, the passkey button signs them in again', async () => {
    const page = await newPage();
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    await page.goto(`${base}/sign-in`);
    const signUp = page.getByRole('form', { name: 'Create an account' });
    await signUp.getByLabel('Name').fill('Paula Passkey');
    await signUp.getByLabel('Email').fill('paula@example.test');
    await signUp.getByLabel('Password').fill(PASSWORD);
    await signUp.getByLabel('I accept the terms of service and the privacy policy').check();
    await signUp.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${base}/dashboard/`);
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    const signedUp = await whoIs(page);
    expect(signedUp).toMatchObject({ me: { kind: 'user_session', role: 'owner' }, email: 'paula@example.test' });

    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Your account', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Your account' }).waitFor();
    const add = page.getByRole('form', { name: 'Add a passkey' });
    await add.getByLabel('Passkey name').fill('Laptop');
    await add.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByRole('table').getByRole('cell', { name: 'Laptop', exact: true }).waitFor();
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(credentials.map((c) => c.isResidentCredential)).toEqual([true]);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in to pgward' }).waitFor();
    expect(await page.evaluate(async () => (await fetch('/v1/me')).status)).toBe(401);

    // An application's authorization request: the passkey on its /sign-in step continues to the consent page.
    await page.goto(await authorizationUrl());
    await page.getByRole('heading', { level: 1, name: 'Sign in to pgward' }).waitFor();
    expect(new URL(page.url()).searchParams.get('sig')).toBeTruthy();
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.getByRole('heading', { level: 1, name: 'Allow passkey test client to use pgward?' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/consent');
    await page.context().clearCookies();

    // By keyboard: the passkey button is a real, focusable button.
    await page.goto(`${base}/sign-in`);
    const passkey = page.getByRole('button', { name: 'Sign in with a passkey' });
    await passkey.focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(`${base}/dashboard/`);
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    expect(await whoIs(page)).toEqual(signedUp);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it.each([
    ['Acme', 'sam@acme.test', 'SAML: the IdP’s auto-posting form'],
    ['Corp OpenID', 'sam@idp.test', 'OpenID Connect: the authorization code'],
  ])('signs a person in through the button of %s (%s, %s comes back) and the dashboard opens', async (name, email) => {
    const page = await newPage();
    await page.goto(`${base}/sign-in`);
    await page.getByRole('button', { name: `Sign in with ${name}` }).click();
    await page.waitForURL(`${base}/dashboard/`);
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    expect(await whoIs(page)).toMatchObject({ me: { kind: 'user_session', role: 'owner' }, email });
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });
});

