/**
 * A SAML 2.0 identity provider on loopback, built with samlify: it receives pgward's AuthnRequest
 * (HTTP-Redirect binding), answers the browser with the auto-posting form of the HTTP-POST binding,
 * and signs its assertions with an RSA key generated for the test. `next` says what the next
 * response is: a good one, or one a service provider must refuse.
 */
import { createServer, type Server } from 'node:http';
import * as samlify from 'samlify';
import selfsigned from 'selfsigned';
import { freePort } from './free-port.js';

export interface SamlPerson {
  email: string;
  name: string;
}

/**
 * good: signed as issued. tampered: the e-mail changed after signing. expired: its validity ended an
 * hour ago. other-audience: issued for another service provider. unsigned: no signature at all.
 * foreign-key: signed, but with a key that is not the IdP's (its certificate travels along).
 */
export type SamlVariant = 'good' | 'tampered' | 'expired' | 'other-audience' | 'unsigned' | 'foreign-key';

export interface SamlIdp {
  readonly entityId: string;
  readonly ssoUrl: string;
  /** The IdP's signing certificate (PEM), as pgward's configuration names it. */
  readonly certificate: string;
  /** Who signs in next, and what the response is like. */
  next: { person: SamlPerson; variant: SamlVariant };
  /** Where pgward's SP metadata is read from (the IdP learns the ACS URL and the entity id there). */
  spMetadataUrl: string;
  /** The AuthnRequest ids received, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

const TAMPERED_EMAIL = 'mallory@idp.test';
const EMAIL_FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';
const ANOTHER_AUDIENCE = 'https://another-service-provider.example/saml/metadata';

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function attributeStatement(person: SamlPerson): string {
  const attribute = (name: string, value: string) =>
    `<saml:Attribute Name="${name}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:basic"><saml:AttributeValue xsi:type="xs:string">${escapeXml(value)}</saml:AttributeValue></saml:Attribute>`;
  return `<saml:AttributeStatement>${attribute('email', person.email)}${attribute('displayName', person.name)}</saml:AttributeStatement>`;
}

/** The values of the response template, as samlify fills them for an SP-initiated sign-in, changed as the variant says. */
function tagValues(idp: samlify.IdentityProviderInstance, sp: samlify.ServiceProviderInstance, requestId: string, person: SamlPerson, variant: SamlVariant, ids: { response: string; assertion: string }) {
  const now = Date.now();
  const issued = variant === 'expired' ? now - 2 * 3_600_000 : now;
  const until = variant === 'expired' ? now - 3_600_000 : now + 5 * 60_000;
  const acs = sp.entityMeta.getAssertionConsumerService('post') as string;
  return {
    ID: ids.response,
    AssertionID: ids.assertion,
    Destination: acs,
    Audience: variant === 'other-audience' ? ANOTHER_AUDIENCE : sp.entityMeta.getEntityID(),
    SubjectRecipient: acs,
    Issuer: idp.entityMeta.getEntityID(),
    IssueInstant: new Date(issued).toISOString(),
    StatusCode: samlify.Constants.StatusCode.Success,
    ConditionsNotBefore: new Date(issued - 60_000).toISOString(),
    ConditionsNotOnOrAfter: new Date(until).toISOString(),
    SubjectConfirmationDataNotOnOrAfter: new Date(until).toISOString(),
    NameIDFormat: EMAIL_FORMAT,
    NameID: person.email,
    InResponseTo: requestId,
  };
}

/** The statements of the assertion (XML, so not among the escaped tag values). */
function statements(person: SamlPerson, variant: SamlVariant, assertionId: string): string {
  const at = new Date(variant === 'expired' ? Date.now() - 2 * 3_600_000 : Date.now()).toISOString();
  const authn = `<saml:AuthnStatement AuthnInstant="${at}" SessionIndex="${assertionId}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`;
  return authn + attributeStatement(person);
}

/** The base64 SAMLResponse for one AuthnRequest; `impostor` is the IdP with a key of its own. */
async function respond(idps: { idp: samlify.IdentityProviderInstance; impostor: samlify.IdentityProviderInstance }, sp: samlify.ServiceProviderInstance, requestId: string, person: SamlPerson, variant: SamlVariant): Promise<string> {
  const idp = variant === 'foreign-key' ? idps.impostor : idps.idp;
  const ids = { response: `_${crypto.randomUUID()}`, assertion: `_${crypto.randomUUID()}` };
  const fill = (template: string) =>
    samlify.SamlLib.replaceTagsByValue(template.replace('{AuthnStatement}', '').replace('{AttributeStatement}', statements(person, variant, ids.assertion)), tagValues(idp, sp, requestId, person, variant, ids));
  if (variant === 'unsigned') return Buffer.from(fill(samlify.SamlLib.defaultLoginResponseTemplate.context)).toString('base64');
  const { context } = await idp.createLoginResponse(sp, { extract: { request: { id: requestId } } }, 'post', { email: person.email }, (template: string) => ({ id: ids.response, context: fill(template) }));
  if (variant !== 'tampered') return context;
  // After signing: the subject and the e-mail attribute name someone else.
  const xml = Buffer.from(context, 'base64').toString('utf8').split(escapeXml(person.email)).join(TAMPERED_EMAIL);
  return Buffer.from(xml).toString('base64');
}

/** The HTTP-POST binding's page: a form to the ACS that posts itself, with a button for a browser without script. */
function autoPostPage(acs: string, fields: Record<string, string>): string {
  const inputs = Object.entries(fields)
    .map(([name, value]) => `<input type="hidden" name="${name}" value="${escapeXml(value)}">`)
    .join('');
  return `<!doctype html><html><head><title>Signing in</title></head><body><form id="saml" method="post" action="${escapeXml(acs)}">${inputs}<button type="submit">Continue</button></form><script>document.getElementById('saml').submit()</script></body></html>`;
}

/** The fields and action of the auto-posting form, as a browser would submit it. */
export function formOf(html: string): { action: string; fields: URLSearchParams } {
  const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
  if (!action) throw new Error('the IdP page has no form');
  const fields = new URLSearchParams();
  for (const match of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) fields.append(match[1]!, match[2]!.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'));
  return { action: action.replace(/&amp;/g, '&'), fields };
}

export async function startSamlIdp(person: SamlPerson): Promise<SamlIdp> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const keys = await selfsigned.generate([{ name: 'commonName', value: 'test SAML IdP' }], { keyType: 'rsa', keySize: 2048, algorithm: 'sha256' });
  const entityId = `${origin}/metadata`;
  const ssoUrl = `${origin}/sso`;
  const other = await selfsigned.generate([{ name: 'commonName', value: 'test SAML IdP' }], { keyType: 'rsa', keySize: 2048, algorithm: 'sha256' });
  const identityProvider = (key: { private: string; cert: string }) =>
    samlify.IdentityProvider({
      entityID: entityId,
      privateKey: key.private,
      signingCert: key.cert,
      nameIDFormat: [EMAIL_FORMAT],
      singleSignOnService: [{ Binding: samlify.Constants.namespace.binding.redirect, Location: ssoUrl }],
    });
  const idp = identityProvider(keys);
  const impostor = identityProvider(other);
  let sp: samlify.ServiceProviderInstance | undefined;
  const state: SamlIdp = {
    entityId,
    ssoUrl,
    certificate: keys.cert,
    next: { person, variant: 'good' },
    spMetadataUrl: '',
    requests: [],
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', origin);
      if (url.pathname !== '/sso') return void res.writeHead(404).end();
      sp ??= samlify.ServiceProvider({ metadata: await (await fetch(state.spMetadataUrl)).text() });
      const query = Object.fromEntries(url.searchParams);
      const parsed = await idp.parseLoginRequest(sp, 'redirect', { query, octetString: '' });
      const requestId = String(parsed.extract.request?.id);
      state.requests.push(requestId);
      const SAMLResponse = await respond({ idp, impostor }, sp, requestId, state.next.person, state.next.variant);
      const acs = sp.entityMeta.getAssertionConsumerService('post') as string;
      const page = autoPostPage(acs, { SAMLResponse, ...(query.RelayState ? { RelayState: query.RelayState } : {}) });
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
    })().catch((error: unknown) => {
      console.error(error);
      if (!res.headersSent) res.writeHead(500);
      res.end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return state;
}
