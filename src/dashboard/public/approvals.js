// The approvals queue, kept current by the API's live stream (GET …/approvals/events, server-sent
// events) while the page is open, or by polling the list every 2 s while the stream is down or cannot
// be had (signed in with an API key: EventSource sends cookies, never a header): each held statement
// with its tables and estimate, approved or rejected with a note.
import { api, orgKey, withQuery } from './api.js';
import { announce, button, clear, code, field, h, when } from './ui.js';

const POLL_MS = 2000;
const STATUSES = ['pending', 'approved', 'rejected', 'executed', 'failed', 'expired'];

function estimate(request) {
  if (request.estimated_rows === null) return 'no estimate';
  return `${request.estimated_rows} row${request.estimated_rows === 1 ? '' : 's'} (${request.estimate_method === 'trial' ? 'exact, from a rolled-back trial' : 'planner estimate'})`;
}

function card(request, base, notes, refresh) {
  const facts = [
    ['Tables', request.target_tables.join(', ') || '—'],
    ['Estimate', estimate(request)],
    ['Held by', `${request.hold_rule}: ${request.hold_reason}`],
    ['Agent', request.credential_id ?? '—'],
    ['Source', `${request.source}, session ${request.session_id}`],
    ['Requested', when(request.requested_at)],
    ['Expires', when(request.expires_at)],
  ];
  if (request.status !== 'pending') facts.push(['Decided', `${request.status} by ${request.decided_by ?? '—'} ${when(request.decided_at)} ${request.reason}`], ['Rows affected', request.rows_affected ?? '—']);
  const errors = h('div');
  const decide = (verdict) => button(verdict === 'approve' ? 'Approve' : 'Reject', async () => {
    const decided = await api.post(`${base}/${encodeURIComponent(request.id)}/${verdict}`, { reason: notes.get(request.id) ?? '' });
    notes.delete(request.id);
    announce(`Request ${request.id} ${decided.status}`);
    await refresh(true);
  }, { kind: verdict === 'approve' ? '' : 'danger', label: `${verdict === 'approve' ? 'Approve' : 'Reject'} request ${request.id}`, errorsInto: errors });
  const note = field(`Note for request ${request.id}`, 'reason', { value: notes.get(request.id) ?? '', maxlength: 500 });
  note.querySelector('input').addEventListener('input', (event) => notes.set(request.id, event.target.value));
  return h(
    'article',
    { class: 'card', 'aria-labelledby': `${request.id}-title`, 'data-approval': request.id },
    h('h3', { id: `${request.id}-title`, text: `${request.statement_kind.toUpperCase()} held (${request.status})` }),
    h('pre', {}, code(request.sql)),
    h('dl', {}, facts.map(([term, value]) => [h('dt', { text: term }), h('dd', { text: String(value) })])),
    request.status === 'pending' ? [note, h('div', { class: 'row' }, decide('approve'), decide('reject'))] : null,
    errors,
  );
}

export async function approvalsPage(context) {
  const base = `/v1/projects/${encodeURIComponent(context.projectId)}/approvals`;
  const notes = new Map();
  const status = field('Show', 'status', { kind: 'select', options: [['pending', 'Pending'], ...STATUSES.slice(1).map((s) => [s, s]), ['', 'All']], value: 'pending' });
  const wanted = () => status.querySelector('select').value;
  const list = h('div', { class: 'cards' });
  const summary = h('p', { class: 'muted' });
  const mode = h('p', { 'data-approvals-mode': 'starting', text: 'Connecting to the live queue…' });
  // The list as last read, and each request as the stream last told it (newer than any read before it).
  let listed = [];
  const streamed = new Map();
  let seen = '';
  const render = (force = false) => {
    const byId = new Map(listed.map((request) => [request.id, request]));
    for (const [id, request] of streamed) byId.set(id, request);
    const approvals = [...byId.values()].filter((request) => wanted() === '' || request.status === wanted()).sort((a, b) => (a.id < b.id ? -1 : 1));
    const signature = approvals.map((a) => `${a.id}:${a.status}`).join(',');
    summary.textContent = `${approvals.length} request${approvals.length === 1 ? '' : 's'} · updated ${when(new Date().toISOString())}`;
    if (!force && signature === seen) return;
    if (seen !== '' || approvals.length > 0) announce(`${approvals.filter((a) => a.status === 'pending').length} pending approval requests`);
    seen = signature;
    clear(list, approvals.length === 0 ? h('p', { class: 'muted', text: 'No requests.' }) : approvals.map((request) => card(request, base, notes, refresh)));
  };
  // Lists may answer out of order (the stream's `ready` and the reader's choice of status ask at
  // once; a slow API answers a poll after the next one is asked): an answer older than the one shown,
  // or for a status no longer chosen, is dropped, and so is its failure.
  let asked = 0;
  let shown = 0;
  const refresh = async (force = false) => {
    const ticket = ++asked;
    const status = wanted();
    let approvals;
    try {
      ({ approvals } = await api.get(withQuery(base, { page_size: 100, status })));
    } catch (error) {
      if (ticket > shown && status === wanted()) throw error;
      return;
    }
    if (ticket < shown || status !== wanted()) return;
    shown = ticket;
    listed = approvals;
    render(force);
  };
  const failed = (error) => (summary.textContent = `Refresh failed: ${error.message}`);
  let timer;
  const poll = (why) => {
    mode.dataset.approvalsMode = 'polling';
    mode.textContent = `Refreshed every 2 seconds (${why}).`;
    timer ??= setInterval(() => refresh().catch(failed), POLL_MS);
  };
  let source;
  const live = () => {
    source = new EventSource(`${base}/events`);
    source.addEventListener('ready', () => {
      clearInterval(timer);
      timer = undefined;
      mode.dataset.approvalsMode = 'live';
      mode.textContent = 'Live: requests appear and change here as they happen.';
      streamed.clear();
      refresh(true).catch(failed);
    });
    source.addEventListener('approval', (event) => {
      const request = JSON.parse(event.data);
      streamed.set(request.id, request);
      render();
    });
    // The browser reconnects by itself (and a `ready` ends the polling); a refused stream stays closed.
    source.addEventListener('error', () => poll(source.readyState === EventSource.CLOSED ? 'the live stream was refused' : 'the live stream is reconnecting'));
  };
  status.querySelector('select').addEventListener('change', () => refresh(true).catch(failed));
  clear(context.main, h('h1', { text: 'Approvals' }), h('p', { text: 'Statements held by their policy’s approval rules.' }), mode, status, summary, list);
  await refresh(true);
  if (orgKey.get()) poll('signed in with an API key, which the live stream cannot carry');
  else live();
  context.cleanup(() => {
    source?.close();
    clearInterval(timer);
    timer = undefined;
  });
}
