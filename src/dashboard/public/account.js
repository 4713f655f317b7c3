// The signed-in person's own account: their passkeys, and adding one (WebAuthn, methods.js).
import { getJson } from './api.js';
import { addPasskey } from './methods.js';
import { announce, clear, field, form, h, table, when } from './ui.js';

export async function accountPage(context) {
  if (context.me.kind !== 'user_session') {
    clear(context.main, h('h1', { text: 'Your account' }), h('p', { text: 'Passkeys belong to a person: sign in with your email and password to manage them.' }));
    return;
  }
  const passkeys = (await getJson('/api/auth/passkey/list-user-passkeys')) ?? [];
  clear(
    context.main,
    h('h1', { text: 'Your account' }),
    table('Passkeys', [
      ['Name', (p) => p.name || 'unnamed'],
      ['Kind', (p) => (p.deviceType === 'multiDevice' ? 'synced' : 'this device')],
      ['Added', (p) => when(p.createdAt)],
    ], passkeys, 'none yet.'),
    h('h2', { text: 'Add a passkey' }),
    h('p', { class: 'muted', text: 'Your browser or security key keeps the private key; pgward keeps only the public key. Then use “Sign in with a passkey”.' }),
    form('Add a passkey', [field('Passkey name', 'name', { required: true, maxlength: 64, value: 'My passkey' })], 'Add a passkey', async ({ name }) => {
      await addPasskey(name.trim());
      announce('Passkey added.');
      await accountPage(context);
    }),
  );
}
