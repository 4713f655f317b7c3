// The dashboard's shell: hash routes (page names and resource ids only, never a secret), the
// navigation, and who is signed in (GET /v1/me, by session cookie or organization API key).
import { accountPage } from './account.js';
import { actingOrg, api, identity, orgKey } from './api.js';
import { agentsPage } from './agents.js';
import { anomaliesPage } from './anomalies.js';
import { approvalsPage } from './approvals.js';
import { AUTHORIZATION_PAGES, authorizationPage } from './authorize.js';
import { auditPage } from './audit.js';
import { databasesPage } from './databases.js';
import { acceptInvitationPage, membersPage } from './members.js';
import { apiKeysPage, organizationPage } from './organization.js';
import { policiesPage } from './policies.js';
import { signInPage } from './signin.js';
import { announce, clear, errorBox, h } from './ui.js';
import { usagePage } from './usage.js';
import { webhooksPage } from './webhooks.js';

const PROJECT_PAGES = [
  ['databases', 'Databases', databasesPage],
  ['policies', 'Policies', policiesPage],
  ['agents', 'Agents', agentsPage],
  ['approvals', 'Approvals', approvalsPage],
  ['anomalies', 'Anomalies', anomaliesPage],
  ['audit', 'Audit trail', auditPage],
  ['usage', 'Usage', usagePage],
  ['webhooks', 'Webhooks', webhooksPage],
];
const ORG_PAGES = [
  ['', 'Projects', organizationPage],
  ['keys', 'API keys', apiKeysPage],
  ['members', 'Members', membersPage],
  ['account', 'Your account', accountPage],
];
const ACCEPT_PAGE = '#/invitations/accept';

let me = null;
let projects = null;
let organizations = null;
const cleanups = [];
/** An invitation token from a link's fragment, held in this page's memory only: the address bar no longer shows it. */
let invitationToken = null;

function takeInvitationToken() {
  if (!location.hash.startsWith(`${ACCEPT_PAGE}?`)) return;
  invitationToken = new URLSearchParams(location.hash.slice(ACCEPT_PAGE.length + 1)).get('token');
  history.replaceState(null, '', `${location.pathname}${ACCEPT_PAGE}`);
}

async function whoAmI() {
  try {
    return await api.get('/v1/me');
  } catch (error) {
    // The organization chosen earlier may be one the person has since left: back to their default.
    if (error.status === 404 && actingOrg.get()) {
      actingOrg.clear();
      return whoAmI();
    }
    if (error.status === 401 || error.status === 403) return null;
    throw error;
  }
}

/** The organizations a signed-in person is a member of (an API key has only its own). */
async function organizationList() {
  organizations ??= me.kind === 'org_api_key' ? [] : (await api.get('/v1/orgs?page_size=100')).organizations;
  return organizations;
}

/** After switching, joining or leaving: everything is read again for the organization now acting. */
async function orgChanged(hash = '#/') {
  me = null;
  projects = null;
  organizations = null;
  if (location.hash === hash) await route();
  else location.hash = hash;
}

async function projectList() {
  projects ??= (await api.get('/v1/projects?page_size=100')).projects;
  return projects;
}

/** `#/p/<project>/<page>`, `#/<page>` or `#/signin`. */
function parse(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/');
  if (parts[0] === 'p' && parts[1]) return { projectId: decodeURIComponent(parts[1]), page: parts[2] || 'agents' };
  return { projectId: null, page: parts[0] ?? '' };
}

async function signOut() {
  orgKey.clear();
  actingOrg.clear();
  organizations = null;
  await identity('sign-out').catch(() => undefined);
  me = null;
  projects = null;
  location.hash = '#/signin';
}

function renderHeader(current) {
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  if (!me) {
    clear(nav);
    clear(who);
    return;
  }
  const link = (href, text, active) => h('li', {}, h('a', { href, 'aria-current': active ? 'page' : undefined, text }));
  const items = ORG_PAGES.map(([page, text]) => link(`#/${page}`, text, !current.projectId && current.page === page));
  if (current.projectId) {
    const id = encodeURIComponent(current.projectId);
    items.push(...PROJECT_PAGES.map(([page, text]) => link(`#/p/${id}/${page}`, text, current.page === page)));
  }
  clear(nav, h('ul', {}, items));
  const select = h('select', { id: 'project-switch', 'aria-label': 'Project' }, h('option', { value: '', text: 'Choose a project…' }));
  for (const project of projects ?? []) select.append(h('option', { value: project.id, selected: project.id === current.projectId, text: project.name }));
  select.addEventListener('change', () => {
    if (select.value) location.hash = `#/p/${encodeURIComponent(select.value)}/${current.projectId ? current.page : 'agents'}`;
  });
  const orgs = organizations ?? [];
  const orgSelect = orgs.length > 1 ? h('select', { id: 'org-switch', 'aria-label': 'Organization' }, orgs.map((o) => h('option', { value: o.id, selected: o.id === me.org_id, text: `${o.name} (${o.role})` }))) : null;
  orgSelect?.addEventListener('change', () => {
    actingOrg.set(orgSelect.value);
    announce(`Acting in ${orgSelect.selectedOptions[0].text}`);
    void orgChanged('#/');
  });
  clear(who, orgSelect, select, h('span', { class: 'muted', text: `${me.role} · ${me.kind === 'org_api_key' ? 'API key' : 'signed in'}` }), h('button', { type: 'button', class: 'secondary', text: 'Sign out', onclick: signOut }));
}

async function route() {
  for (const stop of cleanups.splice(0)) stop();
  announce('');
  const main = document.getElementById('main');
  const current = parse(location.hash);
  const context = {
    main,
    get me() {
      return me;
    },
    projectId: current.projectId,
    cleanup: (stop) => cleanups.push(stop),
    go: (hash) => {
      location.hash = hash;
    },
    projectsChanged: () => {
      projects = null;
    },
    orgChanged,
    signedIn: async () => {
      me = await whoAmI();
      if (!me) throw new Error('signed in, but the API did not accept the session');
      location.hash = invitationToken ? ACCEPT_PAGE : '#/';
    },
  };
  try {
    if (current.page !== 'signin' && !me) me = await whoAmI();
    if (!me) {
      renderHeader(current);
      if (current.page !== 'signin') location.hash = '#/signin';
      else await signInPage(context);
      return;
    }
    await Promise.all([projectList(), organizationList()]);
    renderHeader(current);
    if (`#/${current.page}` === '#/invitations') {
      const token = invitationToken;
      invitationToken = null;
      return await acceptInvitationPage(context, token);
    }
    const render = current.projectId ? PROJECT_PAGES.find(([page]) => page === current.page)?.[2] : ORG_PAGES.find(([page]) => page === current.page)?.[2];
    clear(main, h('p', { text: 'Loading…' }));
    if (!render) clear(main, h('h1', { text: 'Not found' }), h('p', {}, h('a', { href: '#/', text: 'Back to the projects' })));
    else await render(context);
  } catch (error) {
    if (error.status === 401) return signOut();
    clear(main, h('h1', { text: 'Something went wrong' }), errorBox(error));
  } finally {
    main.focus();
  }
}

// The same shell serves the pages of an OAuth authorization (an application asking for access).
if (AUTHORIZATION_PAGES.includes(location.pathname)) {
  void authorizationPage();
} else {
  takeInvitationToken();
  window.addEventListener('hashchange', () => {
    takeInvitationToken();
    void route();
  });
  void route();
}
