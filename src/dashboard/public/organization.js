// The organization: its projects (create one with its primary database) and its API keys.
import { api } from './api.js';
import { databaseFields, databaseBody } from './databases.js';
import { announce, button, clear, code, field, form, h, secretsPanel, table, when } from './ui.js';

export async function organizationPage(context) {
  const [org, { organizations }, { projects }] = await Promise.all([
    api.get(`/v1/orgs/${encodeURIComponent(context.me.org_id)}`),
    api.get('/v1/orgs?page_size=100'),
    api.get('/v1/projects?page_size=100'),
  ]);
  clear(
    context.main,
    h('h1', { text: `Organization ${org.name}` }),
    h('p', {}, 'Plan ', h('strong', { text: org.plan }), ` · features: ${org.features.join(', ') || 'none'} · id `, code(org.id), ` · your role: ${context.me.role}`),
    table('Organizations you act in', [
      ['Name', (o) => (o.id === org.id ? h('strong', { text: `${o.name} (current)` }) : o.name)],
      ['Plan', (o) => o.plan],
      ['Id', (o) => code(o.id)],
    ], organizations),
    table('Projects', [
      ['Name', (p) => h('a', { href: `#/p/${encodeURIComponent(p.id)}/agents`, text: p.name })],
      ['Id', (p) => code(p.id)],
      ['Description', (p) => p.description],
      ['Created', (p) => when(p.created_at)],
    ], projects),
    h('h2', { text: 'Create a project' }),
    form('Create a project', [field('Project name', 'name', { required: true }), field('Description', 'description'), h('fieldset', {}, h('legend', { text: 'Primary database' }), databaseFields())], 'Create project', async (values) => {
      const created = await api.post('/v1/projects', { name: values.name, description: values.description, database: databaseBody(values) }, { create: true });
      context.projectsChanged();
      announce(`Project ${created.project.name} created`);
      context.go(`#/p/${encodeURIComponent(created.project.id)}/databases`);
    }),
  );
}

export async function apiKeysPage(context) {
  const orgPath = `/v1/orgs/${encodeURIComponent(context.me.org_id)}/api-keys`;
  const { api_keys: keys } = await api.get(`${orgPath}?page_size=100`);
  clear(
    context.main,
    h('h1', { text: 'API keys' }),
    table('Organization API keys', [
      ['Name', (k) => k.name],
      ['Role', (k) => k.role],
      ['Prefix', (k) => code(k.prefix)],
      ['Status', (k) => k.status],
      ['Created', (k) => when(k.created_at)],
      ['', (k) => k.status === 'active' && button('Revoke', async () => {
        if (!confirm(`Revoke the API key ${k.name}? Everything using it stops working.`)) return;
        await api.del(`${orgPath}/${encodeURIComponent(k.id)}`);
        announce(`API key ${k.name} revoked`);
        await apiKeysPage(context);
      }, { kind: 'danger', label: `Revoke API key ${k.name}` })],
    ], keys),
    h('h2', { text: 'Create an API key' }),
    form('Create an API key', [field('Key name', 'name', { required: true }), field('Role', 'role', { kind: 'select', options: ['viewer', 'member', 'admin', 'owner'], value: 'member' })], 'Create key', async ({ name, role }) => {
      const created = await api.post(orgPath, { name, role }, { create: true });
      await apiKeysPage(context);
      context.main.insertBefore(secretsPanel(`API key ${created.key.name}`, [['API key', created.api_key, 'api_key']]), context.main.children[1]);
    }, { inline: true }),
  );
}
