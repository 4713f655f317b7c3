// The two pages the identity server's OAuth provider sends a browser to while an application (an MCP
// client) asks for access (docs/identity.md): /sign-in (email and password, then the TOTP code of a
// person who has one, or a passkey) and /consent (the application, the scopes and the resource; Allow
// or Deny). /sign-in without an authorization request is the dashboard's sign-in page.
// The authorization request arrives signed in this page's query; it goes back to the identity server
// only as `oauth_query` in a POST body, and the page then follows the URL the server answers with
// (the consent page, or the application's redirect URI with a code or an error).
import { ApiError, getJson, identity } from './api.js';
import { otherMethods } from './methods.js';
import { signInPage as regularSignInPage } from './signin.js';
import { button, clear, code, errorBox, field, form, h } from './ui.js';

/** The signed part of this page's query (Better Auth signs the parameters `ba_param` names, `sig` is the signature). */
function signedQuery() {
  const params = new URLSearchParams(location.search);
  const names = new Set(params.getAll('ba_param'));
  const signed = new URLSearchParams();
  for (const [name, value] of params) if (name === 'sig' || name === 'ba_param' || names.has(name)) signed.append(name, value);
  return signed.has('sig') ? signed.toString() : null;
}

/** Where the identity server sends the browser next (a page of its own, relative, or the application's redirect URI): http(s) only. */
function follow(answer) {
  const target = answer?.url ?? answer?.redirect_uri;
  const url = typeof target === 'string' ? new URL(target, location.href) : null;
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) throw new ApiError(502, { detail: 'the identity server did not say where to continue' });
  location.assign(url.href);
}

function show(title, ...children) {
  const main = document.getElementById('main');
  document.title = `pgward: ${title}`;
  clear(main, h('h1', { text: title }), ...children);
  main.focus();
}

function nothingToAuthorize() {
  show('Nothing to authorize', h('p', { text: 'This page continues an application’s authorization request, and none came with it. Start again from the application.' }), h('p', {}, h('a', { href: '/dashboard/', text: 'Open the dashboard' })));
}

async function signInPage(query) {
  // Single sign-on is not offered here: a provider's round trip would not carry the authorization request back.
  const other = await otherMethods({ onPasskey: follow, sso: false, extra: { oauth_query: query } });
  show(
    'Sign in to pgward',
    h('p', { text: 'An application asked for access to pgward on your behalf. Sign in to review its request.' }),
    form('Sign in with email', [field('Email', 'email', { type: 'email', required: true, autocomplete: 'username' }), field('Password', 'password', { type: 'password', required: true, autocomplete: 'current-password' })], 'Sign in', async ({ email, password }) => {
      const answer = await identity('sign-in/email', { email, password, oauth_query: query });
      if (answer?.twoFactorRedirect) return secondFactorPage(query);
      follow(answer);
    }),
    other,
  );
}

/** /sign-in without an authorization request: the dashboard's sign-in, which then opens the dashboard. */
async function plainSignInPage() {
  document.title = 'pgward: Sign in';
  const main = document.getElementById('main');
  await regularSignInPage({ main, signedIn: async () => location.assign('/dashboard/') });
  main.focus();
}

function secondFactorPage(query) {
  show(
    'Enter your authentication code',
    h('p', { text: 'Your account has a second factor: enter the 6-digit code of your authenticator app.' }),
    form('Verify with an authentication code', [field('Authentication code', 'code', { required: true, inputmode: 'numeric', pattern: '[0-9]{6}', maxlength: 6, autocomplete: 'one-time-code' })], 'Verify', async ({ code: totp }) => {
      follow(await identity('two-factor/verify-totp', { code: totp.trim(), oauth_query: query }));
    }),
  );
}

const SCOPES = {
  openid: 'Confirm who you are',
  profile: 'Read your name',
  email: 'Read your email address',
  offline_access: 'Stay connected when you are away (a refresh token)',
};

async function consentPage(query) {
  const params = new URLSearchParams(query);
  const clientId = params.get('client_id') ?? '';
  const [session, client] = await Promise.all([getJson('/api/auth/get-session'), getJson(`/api/auth/oauth2/public-client?client_id=${encodeURIComponent(clientId)}`)]);
  if (!session?.user) {
    show('Sign in first', h('p', { text: 'Your session ended. Start again from the application.' }));
    return;
  }
  const name = client?.client_name || clientId;
  const scopes = (params.get('scope') ?? '').split(' ').filter(Boolean);
  const resources = params.getAll('resource');
  const redirect = params.get('redirect_uri') ?? '';
  const errors = h('div');
  const decide = (accept) => async () => follow(await identity('oauth2/consent', { accept, oauth_query: query }));
  show(
    `Allow ${name} to use pgward?`,
    h('p', {}, 'Signed in as ', h('strong', { text: session.user.email }), '.'),
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'consent-request' },
      h('h2', { id: 'consent-request', text: 'What it asks for' }),
      h(
        'dl',
        {},
        h('dt', { text: 'Application' }),
        h('dd', { text: name }),
        h('dt', { text: 'Client id' }),
        h('dd', {}, code(clientId)),
        h('dt', { text: 'Returns to' }),
        h('dd', {}, code(redirect)),
        h('dt', { text: 'Resource' }),
        h('dd', {}, resources.length > 0 ? resources.map((resource) => code(resource)) : 'none named'),
        h('dt', { text: 'Scopes' }),
        h('dd', {}, h('ul', { 'aria-label': 'Requested scopes' }, scopes.map((scope) => h('li', {}, code(scope), ` ${SCOPES[scope] ?? ''}`)))),
      ),
      h('p', { class: 'muted', text: 'If you allow it, the application acts as you, with your role in your organization, until you revoke it or its tokens expire.' }),
      h('div', { class: 'actions' }, button('Allow', decide(true), { errorsInto: errors }), button('Deny', decide(false), { kind: 'secondary', errorsInto: errors })),
      errors,
    ),
  );
}

/** The paths the identity server sends a browser to (loginPage and consentPage, src/identity/server.ts). */
export const AUTHORIZATION_PAGES = ['/sign-in', '/consent'];

export async function authorizationPage() {
  try {
    const query = signedQuery();
    if (location.pathname === '/consent') await (query ? consentPage(query) : nothingToAuthorize());
    else await (query ? signInPage(query) : plainSignInPage());
  } catch (error) {
    show('Something went wrong', errorBox(error));
  }
}
