// The audit trail: filters, older pages, chain verification (GET …/audit/verify) and session summaries.
import { api, withQuery } from './api.js';
import { button, clear, code, field, form, h, table, when } from './ui.js';

const FILTERS = [
  ['Event', 'event', {}],
  ['Source', 'source', { kind: 'select', options: [['', 'Any'], 'wire', 'mcp', 'rest', 'control'] }],
  ['Decision', 'decision', { kind: 'select', options: [['', 'Any'], 'allow', 'block', 'mask', 'truncate'] }],
  ['Agent credential id', 'credential_id', {}],
  ['Session id', 'session_id', {}],
  ['From (ISO time)', 'start', { placeholder: '2026-11-01T00:00:00Z' }],
  ['Until (ISO time)', 'end', {}],
];

function definitions(pairs) {
  return h('dl', {}, pairs.map(([term, value]) => [h('dt', { text: term }), h('dd', { text: String(value) })]));
}

function verification(result) {
  const ok = result.ok;
  return h(
    'section',
    { class: 'panel', 'aria-label': 'Chain verification', 'data-verified': String(ok) },
    h('h2', { class: ok ? 'ok' : 'error', text: ok ? `Chain verified: ${result.verified_count} entries` : `Chain broken at seq ${result.first_broken_seq}` }),
    definitions([
      ['Entries verified', result.verified_count],
      ['Keyed (HMAC) entries', result.keyed_count],
      ['Unchained entries', result.unchained_count],
      ['Chain', result.chain_start_seq === null ? 'empty' : `seq ${result.chain_start_seq} to ${result.chain_end_seq}`],
      ['Failure', result.failure_reason ?? 'none'],
      ['Verified at', when(result.verified_at)],
    ]),
  );
}

function sessionSummary(summary) {
  return h(
    'section',
    { class: 'panel', 'aria-label': `Session ${summary.session_id}` },
    h('h2', { text: `Session ${summary.session_id}` }),
    definitions([
      ['Agents', summary.credential_ids.join(', ')],
      ['Sources', summary.sources.join(', ')],
      ['From', `${when(summary.started_at)} for ${Math.round(summary.duration_ms)} ms`],
      ['Statements', `${summary.statements} (allowed ${summary.allowed}, blocked ${summary.blocked}, masked ${summary.masked}, truncated ${summary.truncated})`],
      ['Rows returned', summary.rows_returned],
      ['Bytes out', summary.bytes_out],
      ['Tables read', summary.tables_read.join(', ') || '—'],
      ['Tables written', summary.tables_written.join(', ') || '—'],
      ['Tables blocked', summary.tables_blocked.join(', ') || '—'],
    ]),
  );
}

export async function auditPage(context) {
  const project = `/v1/projects/${encodeURIComponent(context.projectId)}`;
  const results = h('div');
  const side = h('div', { 'aria-live': 'polite' });
  let query = {};
  const showSession = async (sessionId) => {
    clear(side, sessionSummary(await api.get(`${project}/audit/sessions/${encodeURIComponent(sessionId)}`)));
    side.querySelector('h2').setAttribute('tabindex', '-1');
    side.querySelector('h2').focus();
  };
  const load = async (token) => {
    const page = await api.get(withQuery(`${project}/audit`, { ...query, page_size: 50, page_token: token }));
    const rows = table(token ? 'Audit entries (older page)' : 'Audit entries, newest first', [
      ['Seq', (e) => String(e.seq)],
      ['Time', (e) => when(e.ts)],
      ['Event', (e) => e.event],
      ['Source', (e) => e.source],
      ['Agent', (e) => (e.credential_id ? code(e.credential_id) : '—')],
      ['Session', (e) => (e.session_id ? button(e.session_id.slice(0, 18), () => showSession(e.session_id), { kind: 'secondary', label: `Summary of session ${e.session_id}` }) : '—')],
      ['Statement', (e) => h('pre', {}, code(e.sql))],
      ['Rule', (e) => e.decision_rule],
      ['Rows', (e) => String(e.rows_returned)],
    ], page.entries, 'no entries match.');
    clear(results, rows, page.next_page_token ? button('Older entries', () => load(page.next_page_token), { kind: 'secondary' }) : null);
  };
  clear(
    context.main,
    h('h1', { text: 'Audit trail' }),
    h('div', { class: 'row' }, button('Verify the chain', async () => clear(side, verification(await api.get(`${project}/audit/verify`))))),
    side,
    form('Filter the audit trail', FILTERS.map(([label, name, options]) => field(label, name, options)), 'Apply filters', async (values) => {
      query = values;
      await load();
    }, { inline: true }),
    results,
  );
  await load();
}
