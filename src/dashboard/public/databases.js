// A project's databases and a connection test (POST …/databases/{id}/test).
import { api } from './api.js';
import { announce, button, clear, code, field, form, h, table } from './ui.js';

const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'];

export function databaseFields() {
  return [
    h('div', { class: 'row' }, field('Host', 'host', { required: true }), field('Port', 'port', { type: 'number', value: '5432', min: 1, max: 65535, required: true }), field('Database name', 'db_name', { required: true })),
    h('div', { class: 'row' }, field('User name', 'username', { required: true }), field('Password', 'password', { type: 'password', required: true, autocomplete: 'new-password' }), field('SSL mode', 'ssl_mode', { kind: 'select', options: SSL_MODES, value: 'prefer' })),
  ];
}

export function databaseBody(values) {
  return { host: values.host, port: Number(values.port), name: values.db_name, username: values.username, password: values.password, ssl_mode: values.ssl_mode };
}

export async function databasesPage(context) {
  const base = `/v1/projects/${encodeURIComponent(context.projectId)}/databases`;
  const { databases } = await api.get(`${base}?page_size=100`);
  const test = (database) => {
    const result = h('span', { role: 'status' });
    return h('div', {}, button('Test connection', async () => {
      result.textContent = 'Connecting…';
      const outcome = await api.post(`${base}/${encodeURIComponent(database.id)}/test`);
      result.className = outcome.ok ? 'ok' : 'error';
      result.textContent = outcome.ok ? ` Connected: PostgreSQL ${outcome.server_version} in ${outcome.latency_ms} ms` : ` Failed: ${outcome.error}`;
    }, { kind: 'secondary', label: `Test connection to ${database.name} on ${database.host}` }), result);
  };
  clear(
    context.main,
    h('h1', { text: 'Databases' }),
    table('Databases of this project', [
      ['Database', (d) => code(`${d.username}@${d.host}:${d.port}/${d.name}`)],
      ['Role', (d) => d.role],
      ['SSL', (d) => d.ssl_mode],
      ['Id', (d) => code(d.id)],
      ['Connection', test],
    ], databases),
    h('h2', { text: 'Add a database' }),
    form('Add a database', databaseFields(), 'Add database', async (values) => {
      await api.post(base, databaseBody(values), { create: true });
      announce('Database added');
      await databasesPage(context);
    }),
  );
}
