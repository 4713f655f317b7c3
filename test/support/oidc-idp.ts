import { createServer, type Server } from 'node:http';
import Provider from 'oidc-provider';
import { freePort } from './free-port.js';

/** A local OpenID provider (panva's oidc-provider) that signs in one person without a form: login and consent are granted at once. */
export async function startOidcIdp(redirectUris: string[]): Promise<{ issuer: string; server: Server }> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [{ client_id: 'pgward', client_secret: 'idp-client-secret-0123456789', redirect_uris: redirectUris, application_type: 'native', grant_types: ['authorization_code'], response_types: ['code'] }],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id, email: 'sam@idp.test', email_verified: true, name: 'Sam Sso' }) }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: ['a test key of the local provider'] },
  });
  const callback = provider.callback();
  const server = createServer((req, res) => {
    if (!req.url?.startsWith('/interaction/')) return callback(req, res);
    void (async () => {
      const details = await provider.interactionDetails(req, res);
      const grant = new provider.Grant({ accountId: 'sam', clientId: String(details.params.client_id) });
      grant.addOIDCScope(String(details.params.scope));
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { login: { accountId: 'sam' }, consent: { grantId } }, { mergeWithLastSubmission: false });
    })().catch((error: unknown) => res.writeHead(500).end(String(error)));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { issuer, server };
}
