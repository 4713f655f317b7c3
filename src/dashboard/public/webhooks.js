// Webhook endpoints (signing secret shown once), a test delivery, and each endpoint's delivery attempts.
import { api } from './api.js';
import { announce, button, clear, code, field, form, h, secretsPanel, table, when } from './ui.js';

/** The event types the API accepts, from its own OpenAPI document. */
async function eventTypes() {
  const document = await api.get('/v1/openapi.json');
  return document.components.schemas.Webhook.properties.event_types.items.enum.filter((type) => type !== 'webhook.test');
}

function deliveries(attempts) {
  return table('Delivery attempts, newest first', [
    ['When', (d) => when(d.attempted_at)],
    ['Event', (d) => d.type],
    ['Attempt', (d) => String(d.attempt)],
    ['Outcome', (d) => d.outcome],
    ['HTTP status', (d) => (d.status_code === null ? '—' : String(d.status_code))],
    ['Latency', (d) => `${d.latency_ms} ms`],
    ['Error', (d) => d.error ?? ''],
  ], attempts, 'none yet.');
}

export async function webhooksPage(context, shown) {
  const base = `/v1/projects/${encodeURIComponent(context.projectId)}/webhooks`;
  const [{ webhooks }, types] = await Promise.all([api.get(`${base}?page_size=100`), eventTypes()]);
  const detail = h('div', { 'aria-live': 'polite' });
  const path = (hook) => `${base}/${encodeURIComponent(hook.id)}`;
  clear(
    context.main,
    h('h1', { text: 'Webhooks' }),
    shown,
    table('Webhook endpoints', [
      ['URL', (w) => code(w.url)],
      ['Events', (w) => w.event_types.join(', ')],
      ['Enabled', (w) => (w.enabled ? 'yes' : 'no')],
      ['Deliveries', (w) => w.delivery_status],
      ['', (w) => h(
        'div',
        { class: 'row' },
        button('Show deliveries', async () => clear(detail, h('h2', { text: `Deliveries to ${w.url}` }), deliveries((await api.get(`${path(w)}/deliveries?page_size=50`)).deliveries)), { kind: 'secondary', label: `Show deliveries to ${w.url}` }),
        button('Send test', async () => {
          await api.post(`${path(w)}/test`);
          announce(`Test event queued for ${w.url}`);
        }, { kind: 'secondary', label: `Send a test event to ${w.url}` }),
        button('Delete', async () => {
          if (!confirm(`Delete the webhook to ${w.url}?`)) return;
          await api.del(path(w));
          await webhooksPage(context);
        }, { kind: 'danger', label: `Delete the webhook to ${w.url}` }),
      )],
    ], webhooks),
    detail,
    h('h2', { text: 'Add a webhook' }),
    form('Add a webhook', [
      field('Endpoint URL', 'url', { type: 'url', required: true, placeholder: 'https://example.com/pgward' }),
      field('Description', 'description'),
      h('fieldset', {}, h('legend', { text: 'Events' }), h('div', { class: 'row' }, types.map((type) => field(type, 'event_types', { type: 'checkbox', value: type === 'query_blocked', 'data-group': 'events' })))),
    ], 'Add webhook', async (values, node) => {
      const chosen = [...node.querySelectorAll('input[data-group]')].filter((box) => box.checked).map((box) => box.closest('.field').querySelector('label').textContent);
      const created = await api.post(base, { url: values.url, description: values.description, event_types: chosen }, { create: true });
      await webhooksPage(context, secretsPanel(`Signing secret of ${created.url ?? values.url}`, [['Signing secret', created.secret, 'secret']]));
    }),
  );
}
