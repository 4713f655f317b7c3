// The ways to sign in besides email and password (docs/identity.md): a passkey, through the
// browser's WebAuthn (navigator.credentials) and the identity server's passkey endpoints, and one
// button per configured single sign-on provider (OpenID Connect or SAML), which sends the browser
// to the provider and back.
import { ApiError, getJson, identity } from './api.js';
import { button, h } from './ui.js';

function webAuthn() {
  if (typeof PublicKeyCredential === 'undefined' || !PublicKeyCredential.parseRequestOptionsFromJSON) throw new ApiError(400, { detail: 'This browser cannot use passkeys.' });
}

/** Signs in with a passkey the person picks; `extra` joins the verification (an authorization request's `oauth_query`). The identity server's answer. */
async function signInWithPasskey(extra) {
  webAuthn();
  const options = await getJson('/api/auth/passkey/generate-authenticate-options');
  const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
  return identity('passkey/verify-authentication', { response: credential.toJSON(), ...extra });
}

/** Registers a new passkey for the signed-in person. */
export async function addPasskey(name) {
  webAuthn();
  const options = await getJson('/api/auth/passkey/generate-register-options');
  if (!options) throw new ApiError(401, { detail: 'Sign in again to add a passkey.' });
  const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
  return identity('passkey/verify-registration', { response: credential.toJSON(), name });
}

/** Starts single sign-on: the identity server answers the provider's URL (http or https only), and the browser goes there. */
async function startSso(provider, callbackURL) {
  const answer = provider.kind === 'saml' ? await identity('sign-in/sso', { providerId: provider.id, callbackURL }) : await identity('sign-in/social', { provider: provider.id, callbackURL });
  const url = typeof answer?.url === 'string' ? new URL(answer.url, location.href) : null;
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) throw new ApiError(502, { detail: 'the identity server did not say where to continue' });
  location.assign(url.href);
}

/**
 * The section of other ways to sign in: `onPasskey(answer)` runs once a passkey signed the person
 * in (`extra` joins its verification); providers come back to `callbackURL`. `sso: false` leaves
 * the providers out.
 */
export async function otherMethods({ onPasskey, callbackURL, sso = true, extra = {} }) {
  const offered = await getJson('/v1/sign-in-options');
  const errors = h('div');
  const buttons = [button('Sign in with a passkey', async () => onPasskey(await signInWithPasskey(extra)), { errorsInto: errors })];
  if (sso) for (const provider of offered?.providers ?? []) buttons.push(button(`Sign in with ${provider.name}`, () => startSso(provider, callbackURL), { kind: 'secondary', errorsInto: errors }));
  return h('section', { class: 'card', 'aria-labelledby': 'signin-other' }, h('h2', { id: 'signin-other', text: 'Other ways to sign in' }), h('div', { class: 'actions' }, buttons), errors);
}
