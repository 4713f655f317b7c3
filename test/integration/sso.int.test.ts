import { request, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApi } from '../support/api.js';
import { freePort } from '../support/free-port.js';
import { sessionCookie, startListeningApi } from '../support/identity.js';
import { startOidcIdp as startIdp } from '../support/oidc-idp.js';

/** One GET as a browser makes it: cookies of the jar for that origin, no redirect followed. */
function get(url: string, jar: Map<string, string>): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const cookie = [...jar].filter(([key]) => key.startsWith(`${target.host}|`)).map(([key, value]) => `${key.split('|')[1]}=${value}`).join('; ');
    const req = request(target, { headers: { cookie, accept: 'text/html' } }, (res) => {
      for (const line of res.headers['set-cookie'] ?? []) {
        const [pair] = line.split(';');
        const eq = pair!.indexOf('=');
        jar.set(`${target.host}|${pair!.slice(0, eq)}`, pair!.slice(eq + 1));
      }
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location ? new URL(res.headers.location, target).toString() : undefined }));
    });
    req.on('error', reject);
    req.end();
  });
}

let api: TestApi;
let base: string;
let idp: { issuer: string; server: Server };

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  idp = await startIdp([`${base}/api/auth/callback/local-idp`]);
  const providers = [{ provider_id: 'local-idp', discovery_url: `${idp.issuer}/.well-known/openid-configuration`, client_id: 'pgward', client_secret: 'idp-client-secret-0123456789' }];
  ({ api, base } = await startListeningApi('sso', { PGWARD_SSO_PROVIDERS: JSON.stringify(providers) }, port));
});
afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => idp?.server.close(resolve));
});

describe('single sign-on with an OIDC provider (PGWARD_SSO_PROVIDERS)', () => {
  it('signs a new person in through the provider, with a session and an organization of their own', async () => {
    const started = await fetch(`${base}/api/auth/sign-in/social`, { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: JSON.stringify({ provider: 'local-idp', callbackURL: '/' }) });
    expect(started.status).toBe(200);
    const { url } = (await started.json()) as { url: string };
    expect(url.startsWith(`${idp.issuer}/auth?`)).toBe(true);
    expect(new URL(url).searchParams.get('code_challenge_method')).toBe('S256');
    const jar = new Map<string, string>();
    for (const line of started.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      jar.set(`${new URL(base).host}|${pair!.slice(0, eq)}`, pair!.slice(eq + 1));
    }
    // The browser follows the provider's redirects (login and consent granted) back to pgward's callback.
    let next: string | undefined = url;
    let hops = 0;
    while (next && !next.startsWith(`${base}/`) && hops++ < 10) next = (await get(next, jar)).location;
    expect(next?.startsWith(`${base}/api/auth/callback/local-idp?`)).toBe(true);
    const landed = await get(next!, jar);
    expect(landed.status).toBe(302);
    expect(landed.location).toBe(`${base}/`);
    const session = [...jar].find(([key, value]) => key.endsWith('|pgward.session_token') && value !== '');
    expect(session).toBeDefined();
    const cookie = `pgward.session_token=${session![1]}`;
    const me = await fetch(`${base}/v1/me`, { headers: { cookie } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ kind: 'user_session', role: 'owner' });
    const profile = await fetch(`${base}/api/auth/get-session`, { headers: { cookie } });
    expect(((await profile.json()) as { user: { email: string; name: string } }).user).toMatchObject({ email: 'sam@idp.test', name: 'Sam Sso' });
    expect(sessionCookie(started)).toBeUndefined();
  });
});
