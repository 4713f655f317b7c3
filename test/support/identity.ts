import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { createHmac } from 'node:crypto';
import { request } from 'node:http';
import type { Logger } from '../../src/logger.js';
import { startApi, type TestApi } from './api.js';
import { freePort } from './free-port.js';

export const PASSWORD = 'correct horse battery staple';

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 6238 TOTP (SHA-1, 6 digits, 30 s), as an authenticator app computes it from the otpauth:// URI's secret. */
export function totp(secretBase32: string, at = Date.now()): string {
  let bits = '';
  for (const char of secretBase32.replace(/=+$/, '').toUpperCase()) bits += BASE32.indexOf(char).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g)!.map((byte) => parseInt(byte, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 1000 / 30)));
  const mac = createHmac('sha1', key).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0xf;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

/** The control plane listening on a port of its own, with PGWARD_PUBLIC_URL naming it (the identity server's issuer derives from it). */
export async function startListeningApi(label: string, env: NodeJS.ProcessEnv = {}, chosenPort?: number, logger?: Logger): Promise<{ api: TestApi; base: string }> {
  const port = chosenPort ?? (await freePort());
  const base = `http://127.0.0.1:${port}`;
  const api = await startApi(label, { PGWARD_PUBLIC_URL: base, ...env }, logger ? { logger } : {});
  await api.app.listen({ port, host: '127.0.0.1' });
  return { api, base };
}

/** The session cookie (`name=value`) of a Set-Cookie list, or undefined. */
export function sessionCookie(response: Response): string | undefined {
  return response.headers
    .getSetCookie()
    .map((line) => line.split(';')[0]!)
    .find((pair) => pair.startsWith('pgward.session_token=') && pair.length > 'pgward.session_token='.length);
}

/** Signs a person up with e-mail and password over HTTP as a browser page of `base` would; their session cookie and user id. */
export async function signUp(base: string, email: string, name = 'Ada Lovelace'): Promise<{ cookie: string; userId: string; response: Response }> {
  const response = await fetch(`${base}/api/auth/sign-up/email`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: base },
    body: JSON.stringify({ email, password: PASSWORD, name, accept_terms: true }),
  });
  if (response.status !== 200) throw new Error(`sign-up: ${response.status} ${await response.text()}`);
  const body = (await response.clone().json()) as { user: { id: string } };
  return { cookie: sessionCookie(response)!, userId: body.user.id, response };
}

/** An OAuth client as an MCP client keeps it: in memory, with the authorization URL it was sent to. */
export class MemoryOAuthClient implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;

  /** `open` is the person's browser: redirectToAuthorization hands it the authorization URL. */
  constructor(readonly redirect: string, private readonly open?: (url: URL) => Promise<void>) {}

  get redirectUrl(): string {
    return this.redirect;
  }

  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'pgward test MCP client', redirect_uris: [this.redirect], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none', scope: 'openid profile email offline_access' };
  }

  clientInformation() {
    return this.info;
  }

  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }

  tokens() {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }

  async redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    await this.open?.(url);
  }

  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }

  codeVerifier() {
    return this.verifier;
  }
}

/**
 * What the person's browser does at the authorization URL: it arrives signed in (the session
 * cookie), the identity server sends it to the consent page, the page accepts; the code the
 * identity server then hands the client's redirect URI.
 */
export async function authorizeInBrowser(base: string, authorizationUrl: URL, cookie: string): Promise<{ code: string; consentPage: URL }> {
  const first = await navigate(authorizationUrl, cookie);
  const location = first.location;
  if (!location) throw new Error(`authorize: ${first.status} ${first.body}`);
  const consentPage = new URL(location, base);
  const consent = await fetch(`${base}/api/auth/oauth2/consent`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie, origin: base },
    body: JSON.stringify({ accept: true, oauth_query: consentPage.search.slice(1) }),
  });
  if (consent.status !== 200) throw new Error(`consent: ${consent.status} ${await consent.text()}`);
  const answer = (await consent.json()) as { redirect_uri?: string; url?: string };
  const redirect = new URL(answer.url ?? answer.redirect_uri ?? '');
  const code = redirect.searchParams.get('code');
  if (!code) throw new Error(`no code in ${redirect.toString()}`);
  return { code, consentPage };
}

/** A browser's top-level navigation (fetch() would say `Sec-Fetch-Mode: cors`): its status, Location and body. */
export function navigate(url: URL, cookie: string): Promise<{ status: number; location: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { cookie, accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate', 'sec-fetch-site': 'none' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
