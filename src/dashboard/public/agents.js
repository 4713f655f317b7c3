// Agent credentials: register (secrets shown once), rotate (new secrets shown once), the kill-switch
// (status disabled / active) and revocation.
import { api } from './api.js';
import { announce, button, clear, code, field, form, h, secretsPanel, table, when } from './ui.js';

function secrets(title, body) {
  return secretsPanel(title, [
    ['Connection string (psql, drivers)', body.connection_string, 'connection_string'],
    ['MCP URL', body.mcp_url, 'mcp_url'],
    ['MCP bearer token', body.mcp_token, 'mcp_token'],
  ]);
}

export async function agentsPage(context, shown) {
  const project = `/v1/projects/${encodeURIComponent(context.projectId)}`;
  const [{ agents }, { policies }] = await Promise.all([api.get(`${project}/agents?page_size=100`), api.get(`${project}/policies?page_size=100`)]);
  const policyName = new Map(policies.map((p) => [p.id, p.name]));
  const agentPath = (agent) => `${project}/agents/${encodeURIComponent(agent.id)}`;
  const reload = (panel) => agentsPage(context, panel);
  const actions = (agent) => {
    if (agent.status === 'revoked') return null;
    const kill = agent.status === 'active'
      ? button('Disable (kill-switch)', async () => {
        await api.patch(agentPath(agent), { status: 'disabled' });
        announce(`Agent ${agent.name} disabled: its sessions are being ended`);
        await reload();
      }, { kind: 'danger', label: `Disable agent ${agent.name} (kill-switch)` })
      : button('Enable', async () => {
        await api.patch(agentPath(agent), { status: 'active' });
        announce(`Agent ${agent.name} enabled`);
        await reload();
      }, { kind: 'secondary', label: `Enable agent ${agent.name}` });
    return h(
      'div',
      { class: 'row' },
      kill,
      button('Rotate secrets', async () => {
        const rotated = await api.post(`${agentPath(agent)}/rotate`, undefined, { create: true });
        await reload(secrets(`New secrets of ${agent.name}`, rotated));
      }, { kind: 'secondary', label: `Rotate the secrets of agent ${agent.name}` }),
      button('Revoke', async () => {
        if (!confirm(`Revoke ${agent.name} permanently? Its sessions end and its secrets stop working.`)) return;
        await api.del(agentPath(agent));
        announce(`Agent ${agent.name} revoked`);
        await reload();
      }, { kind: 'danger', label: `Revoke agent ${agent.name}` }),
    );
  };
  clear(
    context.main,
    h('h1', { text: 'Agents' }),
    shown,
    table('Agent credentials', [
      ['Name', (a) => a.name],
      ['Id', (a) => code(a.id)],
      ['Postgres user', (a) => code(a.pg_username)],
      ['Policy', (a) => policyName.get(a.policy_profile_id) ?? a.policy_profile_id],
      ['Status', (a) => h('span', { 'data-agent-status': a.id, text: a.expired ? `${a.status} (expired)` : a.status })],
      ['Last used', (a) => when(a.last_used_at)],
      ['Actions', actions],
    ], agents),
    h('h2', { text: 'Register an agent' }),
    policies.length === 0
      ? h('p', {}, 'Create a policy first: ', h('a', { href: `#/p/${encodeURIComponent(context.projectId)}/policies`, text: 'Policies' }))
      : form('Register an agent', [
        field('Agent name', 'name', { required: true }),
        field('Policy', 'policy_profile_id', { kind: 'select', options: policies.map((p) => [p.id, p.name]), value: policies[0].id }),
      ], 'Register agent', async ({ name, policy_profile_id }) => {
        const created = await api.post(`${project}/agents`, { name, policy_profile_id }, { create: true });
        await reload(secrets(`Secrets of ${created.credential.name}`, created));
      }, { inline: true }),
  );
}
