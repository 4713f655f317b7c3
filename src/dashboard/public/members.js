// The organization's people: members and their roles, invitations (the token shown once), and
// accepting an invitation addressed to the signed-in person (docs/identity.md#members-and-invitations).
import { actingOrg, api } from './api.js';
import { announce, button, clear, code, errorBox, field, form, h, secretsPanel, table, when } from './ui.js';

const ROLES = ['viewer', 'member', 'admin', 'owner'];
const rank = (role) => ROLES.indexOf(role);

export async function membersPage(context) {
  const orgPath = `/v1/orgs/${encodeURIComponent(context.me.org_id)}`;
  const admin = rank(context.me.role) >= rank('admin');
  const self = context.me.subject;
  const [{ members }, invitations] = await Promise.all([
    api.get(`${orgPath}/members?page_size=100`),
    admin ? api.get(`${orgPath}/invitations?page_size=100`).then((page) => page.invitations) : Promise.resolve(null),
  ]);
  const reload = () => membersPage(context);
  const roleControl = (m) => {
    if (!admin) return m.role;
    const select = field(`Role of ${m.name ?? m.user_id}`, 'role', { kind: 'select', options: ROLES, value: m.role });
    select.querySelector('select').addEventListener('change', async (event) => {
      let failure = null;
      try {
        await api.patch(`${orgPath}/members/${encodeURIComponent(m.user_id)}`, { role: event.target.value });
        announce(`${m.name ?? m.user_id} is now ${event.target.value}`);
      } catch (error) {
        failure = error;
      }
      // Demoting oneself changes what this page may show: read who is acting again.
      if (m.user_id === self && !failure) return context.orgChanged('#/members');
      await reload();
      if (failure) context.main.insertBefore(errorBox(failure), context.main.children[1]);
    });
    return select;
  };
  const removeControl = (m) => {
    if (m.user_id === self) {
      return button('Leave', async () => {
        if (!confirm('Leave this organization? You lose access to it at once.')) return;
        await api.del(`${orgPath}/members/${encodeURIComponent(m.user_id)}`);
        actingOrg.clear();
        announce('You left the organization');
        await context.orgChanged();
      }, { kind: 'danger', label: 'Leave the organization' });
    }
    return admin && button('Remove', async () => {
      if (!confirm(`Remove ${m.name ?? m.user_id} from the organization? Their access ends at once.`)) return;
      await api.del(`${orgPath}/members/${encodeURIComponent(m.user_id)}`);
      announce(`${m.name ?? m.user_id} removed`);
      await reload();
    }, { kind: 'danger', label: `Remove ${m.name ?? m.user_id}` });
  };
  clear(
    context.main,
    h('h1', { text: 'Members' }),
    table('Members', [
      ['Name', (m) => (m.user_id === self ? `${m.name ?? ''} (you)` : m.name ?? '')],
      ['E-mail', (m) => m.email ?? ''],
      ['Role', roleControl],
      ['Joined', (m) => when(m.joined_at)],
      ['', removeControl],
    ], members),
    admin && [
      table('Invitations', [
        ['E-mail', (i) => i.email],
        ['Role', (i) => i.role],
        ['Status', (i) => i.status],
        ['Expires', (i) => when(i.expires_at)],
        ['Id', (i) => code(i.id)],
        ['', (i) => i.status === 'pending' && button('Revoke', async () => {
          await api.del(`${orgPath}/invitations/${encodeURIComponent(i.id)}`);
          announce(`Invitation for ${i.email} revoked`);
          await reload();
        }, { kind: 'danger', label: `Revoke the invitation for ${i.email}` })],
      ], invitations),
      h('h2', { text: 'Invite a person' }),
      form('Invite a person', [field('E-mail address', 'email', { type: 'email', required: true }), field('Role', 'role', { kind: 'select', options: ROLES.filter((r) => r !== 'owner' || context.me.role === 'owner'), value: 'member' })], 'Invite', async ({ email, role }) => {
        const created = await api.post(`${orgPath}/invitations`, { email, role }, { create: true });
        await reload();
        context.main.insertBefore(secretsPanel(`Invitation for ${created.invitation.email}`, [['Invitation link', created.accept_url, 'accept_url'], ['Invitation token', created.token, 'token']]), context.main.children[1]);
      }, { inline: true }),
    ],
  );
}

/** `#/invitations/accept`: the token comes from the link's fragment (taken out of the address bar by the shell) or is pasted. */
export async function acceptInvitationPage(context, token) {
  clear(
    context.main,
    h('h1', { text: 'Accept an invitation' }),
    h('p', { text: `Signed in as ${context.me.subject}. The invitation must be addressed to the e-mail address you signed up with.` }),
    form('Accept an invitation', [field('Invitation token', 'token', { required: true, value: token ?? '', type: 'password' })], 'Accept invitation', async (values) => {
      const accepted = await api.post('/v1/invitations/accept', { token: values.token });
      actingOrg.set(accepted.org_id);
      announce(`You joined the organization as ${accepted.member.role}`);
      await context.orgChanged('#/members');
    }),
  );
}
