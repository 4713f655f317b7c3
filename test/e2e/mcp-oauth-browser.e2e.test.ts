import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/dashboard/routes.js';
import type { TestApi } from '../support/api.js';
import { watchedPage } from '../support/browser.js';
import { captureLogs, type CapturedLogs } from '../support/logs.js';
import { MemoryOAuthClient, PASSWORD, signUp, startListeningApi, totp } from '../support/identity.js';

const CHROMIUM = process.env.PGWARD_CHROMIUM ?? '/usr/bin/chromium';

let api: TestApi;
let base: string;
let browser: Browser;
let callback: Server;
let redirect: string;
/** What reached the client's loopback callback, in order: its query parameters. */
const arrivals: URLSearchParams[] = [];
const pageErrors: string[] = [];
let logs: CapturedLogs;
/** The password, authorization code, tokens and TOTP secret the flows handled: none may reach pgward's log. */
const secrets: string[] = [PASSWORD];

beforeAll(async () => {
  logs = captureLogs();
  ({ api, base } = await startListeningApi('mcp_oauth_browser', {}, undefined, logs.logger));
  // The MCP client's redirect URI (RFC 8252 loopback): a real HTTP server, as a desktop client starts.
  callback = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    // The browser also asks for /favicon.ico.
    if (url.pathname !== '/callback') return void response.writeHead(404).end();
    arrivals.push(url.searchParams);
    response.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window.');
  });
  await new Promise<void>((resolve) => callback.listen(0, '127.0.0.1', resolve));
  redirect = `http://127.0.0.1:${(callback.address() as AddressInfo).port}/callback`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => callback?.close(resolve));
  await api?.stop();
});

/** A fresh browser (no cookies) that records script errors and CSP violations. */
function newPage(): Promise<Page> {
  return watchedPage(browser, pageErrors);
}

/** The query of the next request to reach the callback. */
async function nextArrival(count: number): Promise<URLSearchParams> {
  await expect.poll(() => arrivals.length, { timeout: 10_000 }).toBe(count);
  return arrivals[count - 1]!;
}

/** The official SDK client against /v1/mcp: its first connect registers and sends `page` to authorize. */
async function startAuthorization(page: Page): Promise<{ provider: MemoryOAuthClient; transport: StreamableHTTPClientTransport }> {
  const provider = new MemoryOAuthClient(redirect, async (url) => {
    await page.goto(url.href);
  });
  const first = new Client({ name: 'oauth-browser-test', version: '1.0.0' });
  await expect(first.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  return { provider, transport: new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { authProvider: provider }) };
}

async function signIn(page: Page, email: string): Promise<void> {
  await page.getByRole('heading', { level: 1, name: 'Sign in to pgward' }).waitFor();
  expect(new URL(page.url()).pathname).toBe('/sign-in');
  const form = page.getByRole('form', { name: 'Sign in with email' });
  await form.getByLabel('Email', { exact: true }).fill(email);
  await form.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await form.getByRole('button', { name: 'Sign in' }).click();
}

describe('an MCP client authorized by a person in Chromium (docs/identity.md)', () => {
  it('serves the sign-in and consent pages with the dashboard’s CSP', async () => {
    for (const path of ['/sign-in', '/consent']) {
      const response = await fetch(`${base}${path}?client_id=x`);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      expect(await response.text()).not.toMatch(/<script(?![^>]*\bsrc=)/);
    }
    const page = await newPage();
    await page.goto(`${base}/consent`);
    await page.getByRole('heading', { level: 1, name: 'Nothing to authorize' }).waitFor();
    // Without an authorization request, /sign-in is the dashboard's sign-in page.
    await page.goto(`${base}/sign-in`);
    await page.getByRole('form', { name: 'Create an account' }).waitFor();
    await page.context().close();
  });

  it('signs in, allows on the consent page, and the client exchanges the code with PKCE and lists the tools', async () => {
    const person = await signUp(base, 'ada@example.test');
    const page = await newPage();
    const { provider, transport } = await startAuthorization(page);
    expect(provider.info?.client_id).toBeTruthy();
    await signIn(page, 'ada@example.test');

    await page.getByRole('heading', { level: 1, name: 'Allow pgward test MCP client to use pgward?' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/consent');
    const request = page.getByRole('region', { name: 'What it asks for' });
    await expect.poll(() => request.locator('xpath=.//dt[.="Resource"]/following-sibling::dd[1]').innerText()).toBe(`${base}/v1/mcp`);
    expect(await request.locator('xpath=.//dt[.="Returns to"]/following-sibling::dd[1]').innerText()).toBe(redirect);
    expect(await request.getByRole('list', { name: 'Requested scopes' }).locator('code').allInnerTexts()).toEqual(['openid', 'profile', 'email', 'offline_access']);
    await page.getByRole('button', { name: 'Allow' }).click();

    const arrived = await nextArrival(1);
    expect(arrived.get('error')).toBe(null);
    expect(arrived.get('iss')).toBe(`${base}/api/auth`);
    expect(arrived.get('state')).toBe(provider.authorizationUrl!.searchParams.get('state'));
    await transport.finishAuth(arrived.get('code')!);
    expect(provider.saved?.access_token).toBeTruthy();
    secrets.push(arrived.get('code')!, provider.saved!.access_token, provider.saved!.refresh_token!);
    const client = new Client({ name: 'oauth-browser-test', version: '1.0.0' });
    await client.connect(transport);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['call_endpoint', 'describe_endpoint', 'search_endpoints']);
    await client.close();
    const me = await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${provider.saved!.access_token}` } });
    expect(await me.json()).toMatchObject({ kind: 'user_jwt', role: 'owner', subject: person.userId });
    await page.context().close();
  });

  it('asks a person with a second factor for their TOTP code before the consent page; Deny gives the client access_denied', async () => {
    const { cookie } = await signUp(base, 'tom@example.test', 'Tom Totp');
    const call = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { cookie, origin: base, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const { totpURI } = (await (await call('/api/auth/two-factor/enable', { password: PASSWORD })).json()) as { totpURI: string };
    const secret = new URL(totpURI).searchParams.get('secret')!;
    expect((await call('/api/auth/two-factor/verify-totp', { code: totp(secret) })).status).toBe(200);

    const page = await newPage();
    const { provider } = await startAuthorization(page);
    await signIn(page, 'tom@example.test');
    const second = page.getByRole('form', { name: 'Verify with an authentication code' });
    await page.getByRole('heading', { level: 1, name: 'Enter your authentication code' }).waitFor();
    await second.getByLabel('Authentication code', { exact: true }).fill(totp(secret, Date.now() - 10 * 60_000));
    await second.getByRole('button', { name: 'Verify' }).click();
    await second.getByRole('alert').waitFor();
    // (Its 6-digit codes could match digits of any log line by chance; the secret they derive from cannot.)
    secrets.push(secret);
    await second.getByLabel('Authentication code', { exact: true }).fill(totp(secret));
    await second.getByRole('button', { name: 'Verify' }).click();

    await page.getByRole('heading', { level: 1, name: 'Allow pgward test MCP client to use pgward?' }).waitFor();
    await page.getByRole('button', { name: 'Deny' }).click();
    const arrived = await nextArrival(2);
    expect(arrived.get('error')).toBe('access_denied');
    expect(arrived.get('code')).toBe(null);
    expect(arrived.get('state')).toBe(provider.authorizationUrl!.searchParams.get('state'));
    // The client never got a code: it holds no token, and /v1/mcp still refuses it. Its registration is asked
    // without the browser: sending the page to authorize again could race the callback's page still loading.
    expect(provider.saved).toBeUndefined();
    const unauthorized = new MemoryOAuthClient(redirect);
    unauthorized.info = provider.info;
    await expect(new Client({ name: 'oauth-browser-test', version: '1.0.0' }).connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { authProvider: unauthorized }))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(unauthorized.authorizationUrl?.searchParams.get('client_id')).toBe(provider.info!.client_id);
    await page.context().close();
  });

  it('left no script error or CSP violation on the pages, and no password, code or token in the log', () => {
    expect(pageErrors).toEqual([]);
    // The request log saw the flows (the pages and the authorization endpoint)...
    expect(logs.lines.some((line) => line.includes('/consent?'))).toBe(true);
    for (const secret of secrets) expect(logs.lines.filter((line) => line.includes(secret)), secret.slice(0, 4)).toEqual([]);
  });
});
