// Anomaly alerts: acknowledge (open → acknowledged) and resolve.
import { api, withQuery } from './api.js';
import { announce, button, clear, code, field, h, table, when } from './ui.js';

export async function anomaliesPage(context, status = '') {
  const base = `/v1/projects/${encodeURIComponent(context.projectId)}/anomalies`;
  const { anomalies } = await api.get(withQuery(base, { page_size: 100, status }));
  const filter = field('Status', 'status', { kind: 'select', options: [['', 'All'], 'open', 'acknowledged', 'resolved'], value: status });
  filter.querySelector('select').addEventListener('change', (event) => anomaliesPage(context, event.target.value));
  const act = (alert, transition) => button(transition === 'acknowledge' ? 'Acknowledge' : 'Resolve', async () => {
    await api.post(`${base}/${encodeURIComponent(alert.id)}/${transition}`);
    announce(`Alert ${alert.title} ${transition === 'acknowledge' ? 'acknowledged' : 'resolved'}`);
    await anomaliesPage(context, status);
  }, { kind: 'secondary', label: `${transition === 'acknowledge' ? 'Acknowledge' : 'Resolve'} alert ${alert.title}` });
  clear(
    context.main,
    h('h1', { text: 'Anomalies' }),
    filter,
    table('Alerts', [
      ['Alert', (a) => a.title],
      ['Kind', (a) => a.kind],
      ['Severity', (a) => a.severity],
      ['Status', (a) => a.status],
      ['Agent', (a) => (a.credential_id ? code(a.credential_id) : '—')],
      ['Raised', (a) => when(a.created_at)],
      ['Details', (a) => h('pre', { class: 'mono', text: JSON.stringify(a.details) })],
      ['', (a) => h('div', { class: 'row' }, a.status === 'open' ? act(a, 'acknowledge') : null, a.status !== 'resolved' ? act(a, 'resolve') : null)],
    ], anomalies, 'no alerts.'),
  );
}
