// Usage: the organization's daily figures (GET /v1/orgs/{org}/usage/daily) and this project's per-agent
// usage (GET …/usage/agents), as bar charts.
import { api } from './api.js';
import { barChart } from './charts.js';
import { clear, h } from './ui.js';

export async function usagePage(context) {
  const project = `/v1/projects/${encodeURIComponent(context.projectId)}`;
  const [daily, perAgent, { agents }] = await Promise.all([
    api.get(`/v1/orgs/${encodeURIComponent(context.me.org_id)}/usage/daily?days=30`),
    api.get(`${project}/usage/agents`),
    api.get(`${project}/agents?page_size=100`),
  ]);
  const name = new Map(agents.map((a) => [a.id, a.name]));
  const agentPoints = (metric) => perAgent.agents.map((line) => [name.get(line.credential_id) ?? line.credential_id ?? 'unattributed', line[metric]]);
  const dayPoints = (metric) => daily.days.map((day) => [day.date.slice(5), day[metric]]);
  clear(
    context.main,
    h('h1', { text: 'Usage' }),
    h('h2', { text: 'This project, per agent (last 30 days)' }),
    h('div', { class: 'two' }, barChart('Audit entries per agent', 'entries', agentPoints('entries')), barChart('Refused statements per agent', 'statements', agentPoints('blocked')), barChart('Bytes returned per agent', 'bytes', agentPoints('bytes_out')), barChart('Rows returned per agent', 'rows', agentPoints('rows_returned'))),
    h('h2', { text: 'The organization, per day (last 30 days)' }),
    h('div', { class: 'two' }, barChart('Bytes transferred per day', 'bytes', dayPoints('bytes_transferred')), barChart('Connection time per day', 'seconds', dayPoints('connection_seconds')), barChart('Cache hits per day', 'hits', dayPoints('cache_hits')), barChart('Cache misses per day', 'misses', dayPoints('cache_misses'))),
  );
}
