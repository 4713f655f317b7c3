// Sign in with email and password or create an account (Better Auth, /api/auth/*), with a passkey or
// a configured single sign-on provider (methods.js), or with an organization API key kept only in
// this tab's sessionStorage (self-hosters without an identity server).
import { api, identity, orgKey } from './api.js';
import { otherMethods } from './methods.js';
import { clear, field, form, h } from './ui.js';

export async function signInPage(context) {
  const other = await otherMethods({
    onPasskey: async () => {
      orgKey.clear();
      await context.signedIn();
    },
    callbackURL: '/dashboard/',
  });
  clear(
    context.main,
    h('h1', { text: 'Sign in to pgward' }),
    h(
      'div',
      { class: 'cards' },
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'signin-email' },
        h('h2', { id: 'signin-email', text: 'With email and password' }),
        form('Sign in with email', [field('Email', 'email', { type: 'email', required: true, autocomplete: 'username' }), field('Password', 'password', { type: 'password', required: true, autocomplete: 'current-password' })], 'Sign in', async ({ email, password }) => {
          orgKey.clear();
          await identity('sign-in/email', { email, password });
          await context.signedIn();
        }),
      ),
      other,
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'signup' },
        h('h2', { id: 'signup', text: 'Create an account' }),
        form(
          'Create an account',
          [field('Name', 'name', { required: true, autocomplete: 'name' }), field('Email', 'email', { type: 'email', required: true, autocomplete: 'email' }), field('Password', 'password', { type: 'password', required: true, minlength: 8, autocomplete: 'new-password' }),
            field('I accept the terms of service and the privacy policy', 'accept_terms', { type: 'checkbox', required: true })],
          'Create account',
          async ({ name, email, password, accept_terms }) => {
            orgKey.clear();
            await identity('sign-up/email', { name, email, password, accept_terms });
            await context.signedIn();
          },
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'signin-key' },
        h('h2', { id: 'signin-key', text: 'With an organization API key' }),
        h('p', { class: 'muted', text: 'Kept only in this browser tab (sessionStorage) and sent as a bearer header; closing the tab forgets it.' }),
        form('Sign in with an API key', [field('API key', 'api_key', { type: 'password', required: true, placeholder: 'pgw_org_…', autocomplete: 'off' })], 'Use this key', async ({ api_key: key }) => {
          orgKey.set(key.trim());
          try {
            await api.get('/v1/me');
          } catch (error) {
            orgKey.clear();
            throw error;
          }
          await context.signedIn();
        }),
      ),
    ),
  );
}
