import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApi } from '../support/api.js';
import { authorizeInBrowser, MemoryOAuthClient, signUp, startListeningApi } from '../support/identity.js';

let api: TestApi;
let base: string;

beforeAll(async () => {
  ({ api, base } = await startListeningApi('mcp_oauth'));
});
afterAll(async () => {
  await api?.stop();
});

describe('OAuth 2.1 for the management MCP (spec §5.2)', () => {
  it('publishes the discovery documents naming this identity server', async () => {
    const issuer = `${base}/api/auth`;
    const server = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(server).toMatchObject({
      issuer,
      authorization_endpoint: `${issuer}/mcp/authorize`,
      token_endpoint: `${issuer}/mcp/token`,
      registration_endpoint: `${issuer}/mcp/register`,
      jwks_uri: `${issuer}/jwks`,
      scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
    });
    const openid = (await (await fetch(`${base}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    expect(openid).toMatchObject({ issuer, authorization_endpoint: `${issuer}/mcp/authorize`, token_endpoint: `${issuer}/mcp/token`, jwks_uri: `${issuer}/jwks` });
    expect(await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json()).toEqual({
      resource: `${base}/v1/mcp`,
      authorization_servers: [issuer],
      bearer_methods_supported: ['header'],
      scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
    });
    const jwks = (await (await fetch(`${issuer}/jwks`)).json()) as { keys: { kty: string; crv?: string }[] };
    expect(jwks.keys.length).toBeGreaterThanOrEqual(1);
    expect(jwks.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
  });

  it('an MCP client registers itself, completes authorization code + PKCE and lists the tools with its token', async () => {
    const person = await signUp(base, 'ada@example.test');
    const redirect = 'http://127.0.0.1:53682/callback';
    const provider = new MemoryOAuthClient(redirect);
    const url = new URL(`${base}/v1/mcp`);

    const first = new Client({ name: 'oauth-test', version: '1.0.0' });
    await expect(first.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
    // Registered dynamically (RFC 7591) as a public client, and sent to authorize with S256 PKCE and the resource.
    expect(provider.info?.client_id).toMatch(/^[A-Za-z0-9_-]{16,}$/);
    const authorization = provider.authorizationUrl!;
    expect(`${authorization.origin}${authorization.pathname}`).toBe(`${base}/api/auth/mcp/authorize`);
    expect(authorization.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorization.searchParams.get('resource')).toBe(`${base}/v1/mcp`);

    const { code, consentPage } = await authorizeInBrowser(base, authorization, person.cookie);
    expect(consentPage.pathname).toBe('/consent');
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth(code);
    const tokens = provider.saved!;
    expect(tokens.refresh_token).toBeTruthy();
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ iss: `${base}/api/auth`, sub: person.userId, role: 'owner' });
    // Bound to the API (RFC 8707), and to the identity server's userinfo for the openid scope.
    expect(claims.aud).toEqual([`${base}/v1/mcp`, `${base}/api/auth/oauth2/userinfo`]);
    expect(claims.org_id).toMatch(/^org_/);

    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(transport);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['call_endpoint', 'describe_endpoint', 'search_endpoints']);
    await client.close();

    // The same token on the REST API names the person in their own organization.
    const me = await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(await me.json()).toEqual({ kind: 'user_jwt', org_id: claims.org_id, role: 'owner', key_id: null, subject: person.userId });
  });

  it('refuses a code exchanged without its PKCE verifier, and rotates refresh tokens', async () => {
    const person = await signUp(base, 'grace@example.test', 'Grace Hopper');
    const provider = new MemoryOAuthClient('http://127.0.0.1:53682/callback');
    const first = new Client({ name: 'oauth-test', version: '1.0.0' });
    await expect(first.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
    const { code } = await authorizeInBrowser(base, provider.authorizationUrl!, person.cookie);
    const clientId = provider.info!.client_id;
    const exchange = (extra: Record<string, string>) =>
      fetch(`${base}/api/auth/mcp/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ client_id: clientId, redirect_uri: provider.redirect, ...extra }) });
    const withoutVerifier = await exchange({ grant_type: 'authorization_code', code });
    expect(withoutVerifier.status).toBe(400);
    expect(((await withoutVerifier.json()) as { error: string }).error).toBe('invalid_request');

    const { code: second } = await authorizeInBrowser(base, provider.authorizationUrl!, person.cookie);
    const granted = await exchange({ grant_type: 'authorization_code', code: second, code_verifier: provider.verifier, resource: `${base}/v1/mcp` });
    expect(granted.status).toBe(200);
    const tokens = (await granted.json()) as { access_token: string; refresh_token: string };
    const refreshed = await exchange({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, resource: `${base}/v1/mcp` });
    expect(refreshed.status).toBe(200);
    const next = (await refreshed.json()) as { access_token: string; refresh_token: string };
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    expect(decodeJwt(next.access_token)).toMatchObject({ sub: person.userId, role: 'owner' });
    const me = await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${next.access_token}` } });
    expect(me.status).toBe(200);
  });
});
