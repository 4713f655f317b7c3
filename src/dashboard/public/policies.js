// Policy profiles: a JSON editor that validates and previews a statement through the what-if endpoint
// (POST …/policies/evaluate, never saved) before saving (POST, or PATCH with If-Match).
import { api, ApiError, request } from './api.js';
import { announce, button, clear, code, errorBox, field, h, table } from './ui.js';

const READ_ONLY_FIELDS = ['id', 'project_id', 'version', 'created_at', 'updated_at'];
const TEMPLATE = { name: 'new policy', read_only: true, allowed_tables: ['public.*'], max_rows: 1000, approval: { held_kinds: [] } };

function documentOf(policy) {
  return Object.fromEntries(Object.entries(policy).filter(([name]) => !READ_ONLY_FIELDS.includes(name)));
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ApiError(400, { detail: `the policy is not valid JSON: ${error.message}` });
  }
}

function approvalText(approval) {
  if (approval.required) return `held for a human’s approval: ${approval.reason}`;
  if (approval.held_above_rows !== null) return `held only when estimated at more than ${approval.held_above_rows} rows (${approval.rule}); at or under that it runs at once`;
  return 'not held';
}

function verdictView(result) {
  const rows = [
    ['Verdict', result.verdict],
    ['Approval', approvalText(result.approval)],
    ['Audit event', result.event],
    ['Rule', result.decision_rule || '(none)'],
    ['SQLSTATE', result.sqlstate ?? ''],
    ['Reason', result.reason],
    ['Statement kind', result.statement_kind],
    ['Tables read', result.tables.read.join(', ')],
    ['Tables written', result.tables.written.join(', ')],
    ['Tables blocked', result.tables.blocked.join(', ')],
    ['Masked columns', result.masked_columns.join(', ')],
    ['Not evaluated', result.not_evaluated.join(', ')],
  ];
  return h('section', { class: 'panel', 'aria-label': 'Preview' }, h('h3', { text: 'Preview' }), h('dl', {}, rows.map(([term, value]) => [h('dt', { text: term }), h('dd', { text: value || '—' })])));
}

function editor(context, base, policy, etag) {
  const documentField = field('Policy document (JSON)', 'policy', { kind: 'textarea', value: JSON.stringify(policy ? documentOf(policy) : TEMPLATE, null, 2), hint: 'Fields as in docs/policy.md; unknown fields are refused.' });
  const sqlField = field('Statement to preview', 'sql', { value: 'select 1', class: 'mono' });
  const out = h('div', { 'aria-live': 'polite' });
  const textOf = () => documentField.querySelector('textarea').value;
  return h(
    'section',
    { class: 'panel', 'aria-label': policy ? `Edit policy ${policy.name}` : 'New policy' },
    h('h2', { text: policy ? `Edit ${policy.name} (version ${policy.version})` : 'New policy' }),
    documentField,
    sqlField,
    h(
      'div',
      { class: 'row' },
      button('Validate and preview', async () => {
        clear(out);
        try {
          const result = await api.post(`${base}/evaluate`, { policy: parsed(textOf()), sql: sqlField.querySelector('input').value });
          out.append(h('p', { class: 'ok', text: 'The policy is valid.' }), verdictView(result));
        } catch (error) {
          out.append(errorBox(error));
        }
      }, { kind: 'secondary' }),
      button('Save policy', async () => {
        clear(out);
        try {
          const body = parsed(textOf());
          if (policy) await request('PATCH', `${base}/${encodeURIComponent(policy.id)}`, body, { ifMatch: etag });
          else await api.post(base, body, { create: true });
          announce(`Policy ${body.name ?? policy?.name} saved`);
          await policiesPage(context);
        } catch (error) {
          out.append(errorBox(error));
        }
      }),
    ),
    out,
  );
}

export async function policiesPage(context) {
  const base = `/v1/projects/${encodeURIComponent(context.projectId)}/policies`;
  const { policies } = await api.get(`${base}?page_size=100`);
  const slot = h('div');
  const open = async (policy) => {
    const loaded = policy ? await request('GET', `${base}/${encodeURIComponent(policy.id)}`) : null;
    clear(slot, editor(context, base, loaded?.data, loaded?.etag));
    slot.querySelector('textarea').focus();
  };
  clear(
    context.main,
    h('h1', { text: 'Policies' }),
    table('Policy profiles', [
      ['Name', (p) => p.name],
      ['Id', (p) => code(p.id)],
      ['Version', (p) => String(p.version)],
      ['Read-only', (p) => (p.read_only ? 'yes' : 'no')],
      ['Held for approval', (p) => p.approval.held_kinds.join(', ')],
      ['', (p) => button('Edit', () => open(p), { kind: 'secondary', label: `Edit policy ${p.name}` })],
    ], policies),
    button('New policy', () => open(null)),
    slot,
  );
}
