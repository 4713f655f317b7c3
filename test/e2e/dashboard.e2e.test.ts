import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/dashboard/routes.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { parseAllowedNetworks } from '../../src/webhooks/networks.js';
import { startWebhookDelivery, type WebhookDelivery } from '../../src/webhooks/service.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { freePort } from '../support/free-port.js';
import { captureLogs, type CapturedLogs } from '../support/logs.js';
import { psqlCommand } from '../support/psql-held.js';
import { startReceiver, verified, type WebhookReceiver } from '../support/webhook-receiver.js';
import { loginError, openSession, waitFor } from '../support/wire.js';

/** Screenshots of the main pages, kept as test artifacts (gitignored). */
const ARTIFACTS = join(process.cwd(), 'test-artifacts', 'dashboard');
const EMAIL = 'ada@example.com';
const PASSWORD = 'correct horse battery staple';
const CHROMIUM = process.env.PGWARD_CHROMIUM ?? '/usr/bin/chromium';

let gateway: TestGateway;
let ingest: RunningIngest;
let logs: CapturedLogs;
let delivery: WebhookDelivery;
let receiver: WebhookReceiver;
let browser: Browser;
let page: Page;
let base: string;
const pageErrors: string[] = [];

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** The description of `term` in a definition list inside `scope`. */
function definition(scope: Locator, term: string): Locator {
  return scope.locator(`xpath=.//dt[normalize-space()="${term}"]/following-sibling::dd[1]`);
}

async function nav(name: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor();
}

async function upstreamTotal(id: number): Promise<string> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return String((await client.query<{ total: string }>('select total from orders where id = $1', [id])).rows[0]!.total);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true });
  logs = captureLogs();
  const networks = 'public,127.0.0.0/8,::1/128';
  // The identity server's origin (cookie-authenticated mutations must come from it) is the page's.
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  gateway = await startGateway('dashboard', undefined, 60_000, { PGWARD_WEBHOOK_ALLOWED_NETWORKS: networks, PGWARD_PUBLIC_URL: base }, logs.logger);
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
  // As the api worker of `pgward serve` does: webhook delivery beside the API.
  delivery = startWebhookDelivery({ store: gateway.api.store, pool: gateway.api.pool, keyring: parseKeyring(gateway.api.masterKey), logger: logs.logger, allowed: parseAllowedNetworks(networks), timeoutMs: 2_000, horizonMs: 600_000 });
  receiver = await startReceiver();
  await gateway.api.app.listen({ host: '127.0.0.1', port });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  page = await (await browser.newContext({ viewport: { width: 1366, height: 800 } })).newPage();
  page.setDefaultTimeout(10_000);
  page.on('dialog', (dialog) => void dialog.accept());
  page.on('pageerror', (error) => pageErrors.push(error.message));
  // A CSP violation is reported on the console; failed requests (the 401 before signing in) are not errors of the page.
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) pageErrors.push(message.text());
  });
});

// A failing step leaves its page behind for whoever reads the artifacts.
afterEach(async (context) => {
  if (context.task.result?.state === 'fail') await writeFile(join(ARTIFACTS, `failed-${context.task.name.slice(0, 40)}.html`), await page.content());
});

afterAll(async () => {
  await browser?.close();
  await delivery?.stop();
  await receiver?.close();
  await ingest?.stop();
  await gateway?.stop();
});

describe('the dashboard in Chromium', () => {
  it('is served with a strict CSP and redirects to sign-in', async () => {
    const response = await fetch(`${base}/dashboard/`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).not.toContain('unsafe');
    const script = await fetch(`${base}/dashboard/app.js`);
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(script.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
    expect(script.headers.get('x-content-type-options')).toBe('nosniff');
    for (const path of ['/dashboard/../src/dashboard/routes.ts', '/dashboard/%2e%2e%2froutes.ts', '/dashboard/routes.ts']) {
      const refused = await fetch(`${base}${path}`);
      expect(refused.status, path).toBe(404);
    }
    await page.goto(`${base}/dashboard`);
    await page.getByRole('heading', { name: 'Sign in to pgward' }).waitFor();
    expect(new URL(page.url()).hash).toBe('#/signin');
    await shot('01-sign-in');
  });

  it('signs a new person up (their organization made for them) and creates an org API key, shown once', async () => {
    await page.getByRole('region', { name: 'Create an account' }).waitFor();
    const signUp = page.getByRole('form', { name: 'Create an account' });
    await signUp.getByLabel('Name', { exact: true }).fill('Ada Lovelace');
    await signUp.getByLabel('Email', { exact: true }).fill(EMAIL);
    await signUp.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await signUp.getByRole('button', { name: 'Create account' }).click();
    // The terms must be accepted: the browser refuses the form before anything is sent.
    expect(await signUp.getByLabel('I accept the terms of service and the privacy policy', { exact: true }).evaluate((box) => (box as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing)).toBe(true);
    await signUp.getByLabel('I accept the terms of service and the privacy policy', { exact: true }).check();
    await signUp.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { level: 1, name: 'Organization Ada Lovelace’s organization' }).or(page.getByRole('heading', { level: 1, name: "Organization Ada Lovelace's organization" })).waitFor();
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === 'pgward.session_token')).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
    expect(await page.evaluate("sessionStorage.getItem('pgward.orgKey')")).toBe(null);
    await shot('02-organization');

    await nav('API keys');
    const create = page.getByRole('form', { name: 'Create an API key' });
    await create.getByLabel('Key name', { exact: true }).fill('automation');
    await create.getByLabel('Role', { exact: true }).selectOption('admin');
    await create.getByRole('button', { name: 'Create key' }).click();
    const panel = page.getByRole('region', { name: 'API key automation' });
    orgKey = await panel.getByLabel('API key', { exact: true }).inputValue();
    expect(orgKey).toMatch(/^pgw_org_[A-Za-z0-9_-]{43}$/);
    const me = (await gateway.api.call(orgKey, { method: 'GET', url: '/v1/me' })).json() as { role: string; org_id: string };
    expect(me.role).toBe('admin');
    await panel.getByRole('button', { name: 'I have saved them' }).click();
    expect(await page.getByText(orgKey).count()).toBe(0);
    await page.getByRole('cell', { name: 'automation', exact: true }).waitFor();
    await page.goto(`${base}/dashboard/#/`);
    await page.getByRole('heading', { level: 1, name: /^Organization Ada Lovelace/ }).waitFor();
  });

  it('creates a project whose database passes the connection test', async () => {
    const target = new URL(gateway.upstream.url);
    const create = page.getByRole('form', { name: 'Create a project' });
    await create.getByLabel('Project name', { exact: true }).fill('shop');
    await create.getByLabel('Host', { exact: true }).fill(target.hostname);
    await create.getByLabel('Port', { exact: true }).fill(target.port || '5432');
    await create.getByLabel('Database name', { exact: true }).fill(target.pathname.slice(1));
    await create.getByLabel('User name', { exact: true }).fill(decodeURIComponent(target.username));
    await create.getByLabel('Password', { exact: true }).fill(decodeURIComponent(target.password) || 'trust');
    await create.getByLabel('SSL mode', { exact: true }).selectOption('disable');
    await create.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('heading', { level: 1, name: 'Databases' }).waitFor();
    await page.getByRole('button', { name: /^Test connection to / }).click();
    await expect.poll(async () => page.getByRole('status').filter({ hasText: 'Connected' }).first().textContent(), { timeout: 10_000 }).toMatch(/^ Connected: PostgreSQL \d+/);
    const listed = (await gateway.api.call(orgKey, { method: 'GET', url: '/v1/projects?page_size=100' })).json() as { projects: { id: string; name: string }[] };
    expect(listed.projects.map((p) => p.name)).toEqual(['shop']);
    expect(new URL(page.url()).hash).toBe(`#/p/${listed.projects.find((p) => p.name === 'shop')!.id}/databases`);
    await shot('03-databases');
  });

  it('validates a policy, previews a statement through the what-if endpoint, and saves it', async () => {
    await nav('Policies');
    await page.getByRole('button', { name: 'New policy' }).click();
    const editor = page.getByLabel('Policy document (JSON)', { exact: true });
    await editor.fill(JSON.stringify({ name: 'held updates', read_only: false, allowed_tables: ['public.*'], approval: { held_kinds: ['upsert'] } }));
    await page.getByRole('button', { name: 'Validate and preview' }).click();
    await expect.poll(async () => page.getByRole('alert').first().textContent(), { timeout: 10_000 }).toContain('policy.approval.held_kinds');
    await editor.fill(JSON.stringify({ name: 'held updates', read_only: false, allowed_tables: ['public.*'], approval: { held_kinds: ['update'] } }, null, 2));
    await page.getByLabel('Statement to preview', { exact: true }).fill('update orders set total = 0 where id = 1');
    await page.getByRole('button', { name: 'Validate and preview' }).click();
    await page.getByText('The policy is valid.').waitFor();
    const preview = page.getByRole('region', { name: 'Preview' });
    expect(await definition(preview, 'Tables written').textContent()).toBe('public.orders');
    expect(await definition(preview, 'Statement kind').textContent()).toBe('update');
    // The approval rules hold it: the preview says so rather than allow.
    expect(await definition(preview, 'Verdict').textContent()).toBe('hold');
    expect(await definition(preview, 'Audit event').textContent()).toBe('approval_requested');
    expect(await definition(preview, 'Approval').textContent()).toBe("held for a human’s approval: it runs a statement of kind update, which this credential's policy holds for approval (rule approval.held_kind)");
    await page.getByLabel('Statement to preview', { exact: true }).fill('select total from orders');
    await page.getByRole('button', { name: 'Validate and preview' }).click();
    await expect.poll(async () => definition(page.getByRole('region', { name: 'Preview' }), 'Verdict').textContent(), { timeout: 10_000 }).toBe('allow');
    expect(await definition(page.getByRole('region', { name: 'Preview' }), 'Approval').textContent()).toBe('not held');
    await page.getByLabel('Statement to preview', { exact: true }).fill('update orders set total = 0 where id = 1');
    await page.getByRole('button', { name: 'Validate and preview' }).click();
    await expect.poll(async () => definition(page.getByRole('region', { name: 'Preview' }), 'Verdict').textContent(), { timeout: 10_000 }).toBe('hold');
    await shot('04-policy-editor');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByRole('cell', { name: 'held updates', exact: true }).waitFor();
    await shot('05-policies');
  });

  let connectionString = '';
  let orgKey = '';
  let project = '';
  it('registers an agent and shows its secrets once', async () => {
    await nav('Agents');
    const register = page.getByRole('form', { name: 'Register an agent' });
    await register.getByLabel('Agent name', { exact: true }).fill('reporter');
    await register.getByLabel('Policy', { exact: true }).selectOption({ label: 'held updates' });
    await register.getByRole('button', { name: 'Register agent' }).click();
    const secrets = page.getByRole('region', { name: 'Secrets of reporter' });
    connectionString = await secrets.getByLabel('Connection string (psql, drivers)', { exact: true }).inputValue();
    expect(connectionString).toMatch(/^postgresql:\/\/agt_[^:]+:[^@]+@127\.0\.0\.1:\d+\//);
    expect(await secrets.getByLabel('MCP bearer token', { exact: true }).inputValue()).toMatch(/^pgw_agt_/);
    await secrets.getByRole('button', { name: 'I have saved them' }).click();
    await expect.poll(async () => page.getByRole('region', { name: 'Secrets of reporter' }).count(), { timeout: 10_000 }).toBe(0);
    expect(await page.getByText(connectionString).count()).toBe(0);
    await page.getByRole('cell', { name: 'reporter', exact: true }).waitFor();
    await shot('06-agents');
  });

  it('approves from the live approvals page a held UPDATE that psql waits on', async () => {
    await nav('Approvals');
    await page.getByText('No requests.').waitFor();
    // Signed in with the session cookie, the page follows the live stream (GET …/approvals/events), not a poll.
    await page.locator('[data-approvals-mode="live"]').waitFor();
    const sql = 'update orders set total = 0 where id = 1';
    const run = psqlCommand(connectionString, sql);
    await run.saw;
    // The page was not reloaded: the stream brings the request in, sooner than a 2 s poll could.
    const request = page.locator('article[data-approval]').filter({ hasText: sql });
    await request.waitFor({ timeout: 1_500 });
    expect(await definition(request, 'Tables').textContent()).toBe('public.orders');
    expect(await definition(request, 'Estimate').textContent()).toBe('1 row (exact, from a rolled-back trial)');
    expect(await upstreamTotal(1)).toBe('1.5');
    const id = (await request.getAttribute('data-approval'))!;
    await shot('07-approvals');
    // By keyboard: the note, then Tab to Approve and Enter.
    await page.getByLabel(`Note for request ${id}`, { exact: true }).fill('ticket 7');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.getAttribute("aria-label")')).toBe(`Approve request ${id}`);
    await page.keyboard.press('Enter');
    const result = await run.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe('UPDATE 1');
    expect(await upstreamTotal(1)).toBe('0');
    const stored = (await gateway.api.call(orgKey, { method: 'GET', url: `/v1/projects/${await projectId()}/approvals/${id}` })).json() as Record<string, unknown>;
    expect(stored).toMatchObject({ reason: 'ticket 7', decided_by: expect.stringMatching(/^user:/) });
  });

  it('flips the kill-switch and the psql session waiting on a held statement ends, its request failed on the live page', async () => {
    const sql = 'update orders set total = 7 where id = 2';
    const run = psqlCommand(connectionString, sql);
    await run.saw;
    const request = page.locator('article[data-approval]').filter({ hasText: sql });
    await request.waitFor({ timeout: 1_500 });
    const id = (await request.getAttribute('data-approval'))!;
    await nav('Agents');
    await page.getByRole('button', { name: 'Disable agent reporter (kill-switch)' }).click();
    const result = await run.done;
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain('the credential was disabled');
    await page.getByRole('button', { name: 'Enable agent reporter' }).waitFor();
    expect(await page.locator('[data-agent-status]').textContent()).toBe('disabled');
    await shot('08-agent-disabled');
    await nav('Approvals');
    await page.getByLabel('Show', { exact: true }).selectOption('failed');
    const failed = page.locator(`article[data-approval="${id}"]`);
    expect(await failed.getByRole('heading').textContent()).toBe('UPDATE held (failed)');
    expect(await definition(failed, 'Decided').textContent()).toContain('the session ended while the statement waited');
    expect(await upstreamTotal(2)).toBe('3.0');
    await shot('08b-approval-failed');
    await nav('Agents');
  });

  it('lists the status chosen last on the approvals page, when an earlier status’s list answers after it', async () => {
    // The pending lists answer late: the one the live stream's `ready` asks for lands after the
    // failed list asked for by the choice made meanwhile, and must not replace it.
    let lateAnswers = 0;
    await page.route(/\/approvals\?.*status=pending/, async (route) => {
      const response = await route.fetch();
      await new Promise((resolve) => setTimeout(resolve, 700));
      await route.fulfill({ response });
      lateAnswers += 1;
    });
    try {
      await nav('Approvals');
      await page.locator('[data-approvals-mode="live"]').waitFor();
      const answered = lateAnswers;
      await page.getByLabel('Show', { exact: true }).selectOption('failed');
      await page.locator('article[data-approval]').first().waitFor({ timeout: 1_500 });
      await expect.poll(() => lateAnswers, { timeout: 3_000 }).toBe(answered + 1);
      await page.waitForTimeout(100);
      const headings = await page.locator('article[data-approval] h3').allTextContents();
      expect(headings).toEqual(['UPDATE held (failed)']);
    } finally {
      await page.unroute(/\/approvals\?.*status=pending/);
    }
    await nav('Agents');
  });

  it('rotates an agent’s secrets (shown once: the old password is refused, the new one logs in) and revokes it', async () => {
    await page.getByRole('button', { name: 'Enable agent reporter' }).click();
    await page.getByRole('button', { name: 'Disable agent reporter (kill-switch)' }).waitFor();
    await page.getByRole('button', { name: 'Rotate the secrets of agent reporter' }).click();
    const secrets = page.getByRole('region', { name: 'New secrets of reporter' });
    const rotated = await secrets.getByLabel('Connection string (psql, drivers)', { exact: true }).inputValue();
    expect(rotated).not.toBe(connectionString);
    expect(await loginError(connectionString)).toBe('28P01');
    const { client } = await openSession(rotated);
    expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
    await client.end();
    await secrets.getByRole('button', { name: 'I have saved them' }).click();
    await shot('09-agent-rotated');
    await page.getByRole('button', { name: 'Revoke agent reporter' }).click();
    await expect.poll(async () => page.locator('[data-agent-status]').textContent(), { timeout: 10_000 }).toBe('revoked');
    expect(await loginError(rotated)).toBe('28P01');
    connectionString = rotated;
  });

  it('reads the trail, verifies the chain and summarizes a session', async () => {
    await nav('Audit trail');
    project = await projectId();
    let entries: { seq: number; event: string; sql: string }[] = [];
    await waitFor(async () => (entries = ((await gateway.api.call(orgKey, { method: 'GET', url: `/v1/projects/${project}/audit?page_size=100` })).json() as { entries: typeof entries }).entries).length >= 4, 10_000, 'the trail');
    expect(entries.sort((a, b) => a.seq - b.seq).map((e) => [e.event, e.sql])).toEqual([
      ['approval_requested', 'update orders set total = 0 where id = 1'],
      ['approved', 'update orders set total = 0 where id = 1'],
      ['query', 'update orders set total = 0 where id = 1'],
      ['approval_requested', 'update orders set total = 7 where id = 2'],
      ...entries.slice(4).map((e) => [e.event, e.sql]),
    ]);
    await page.getByRole('form', { name: 'Filter the audit trail' }).getByLabel('Event', { exact: true }).fill('approved');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await expect.poll(async () => page.locator('tbody tr').allTextContents(), { timeout: 10_000 }).toEqual([expect.stringContaining('approvedwire')]);
    expect(await page.getByRole('cell', { name: 'approval.approved', exact: true }).count()).toBe(1);
    await page.getByRole('button', { name: 'Verify the chain' }).click();
    const verified = page.locator('[data-verified="true"]');
    await verified.waitFor();
    const rest = (await gateway.api.call(orgKey, { method: 'GET', url: `/v1/projects/${project}/audit/verify` })).json() as { verified_count: number; ok: boolean };
    expect(rest.ok).toBe(true);
    expect(await verified.getByRole('heading').textContent()).toBe(`Chain verified: ${rest.verified_count} entries`);
    await page.getByRole('button', { name: /^Summary of session / }).first().click();
    const summary = page.getByRole('region', { name: /^Session / });
    expect(await definition(summary, 'Tables written').textContent()).toBe('public.orders');
    await shot('10-audit');
  });

  it('shows usage charts, anomalies, webhooks and API keys (a new key shown once)', async () => {
    await nav('Usage');
    expect(await page.locator('svg.chart').count()).toBe(8);
    expect(await page.locator('svg.chart rect.bar').count()).toBeGreaterThan(0);
    await shot('11-usage');
    await nav('API keys');
    const create = page.getByRole('form', { name: 'Create an API key' });
    await create.getByLabel('Key name', { exact: true }).fill('ci');
    await create.getByLabel('Role', { exact: true }).selectOption('viewer');
    await create.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByRole('region', { name: 'API key ci' }).getByLabel('API key', { exact: true }).inputValue();
    expect(key).toMatch(/^pgw_org_/);
    expect((await gateway.api.call(key, { method: 'GET', url: '/v1/me' })).json()).toMatchObject({ role: 'viewer' });
    await shot('12-api-keys');
  });

  it('adds a webhook (its secret shown once), sends a test event and lists its delivery', async () => {
    await page.goto(`${base}/dashboard/#/p/${project}/webhooks`);
    await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
    const add = page.getByRole('form', { name: 'Add a webhook' });
    await add.getByLabel('Endpoint URL', { exact: true }).fill(receiver.url);
    await add.getByLabel('anomaly_alert', { exact: true }).check();
    await add.getByRole('button', { name: 'Add webhook' }).click();
    const secret = await page.getByRole('region', { name: `Signing secret of ${receiver.url}` }).getByLabel('Signing secret', { exact: true }).inputValue();
    expect(secret).toMatch(/^whsec_/);
    expect(await page.getByRole('cell', { name: 'query_blocked, anomaly_alert', exact: true }).count()).toBe(1);
    await page.getByRole('button', { name: `Send a test event to ${receiver.url}` }).click();
    await waitFor(() => receiver.received.length === 1, 10_000, 'the test delivery');
    expect(verified(receiver.received[0]!, secret).type).toBe('webhook.test');
    await expect.poll(async () => {
      await page.getByRole('button', { name: `Show deliveries to ${receiver.url}` }).click();
      return page.getByRole('table', { name: 'Delivery attempts, newest first' }).locator('tbody tr').allTextContents();
    }, { timeout: 10_000 }).toEqual([expect.stringMatching(/^.*webhook\.test1delivered200\d+ ms$/)]);
    await shot('13-webhooks');
  });

  it('acknowledges and resolves an anomaly alert (a honeytoken tripped by another agent)', async () => {
    const call = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: object) => gateway.api.call(orgKey, { method, url: `/v1/projects/${project}${url}`, ...(payload ? { payload } : {}) });
    const honeytoken = (await call('POST', '/honeytokens', { kind: 'table', target: 'public.customers', disable_credential: false })).json() as { id: string };
    const policy = (await call('POST', '/policies', { name: 'canaried', read_only: true, allowed_tables: ['public.*'], honeytokens: [honeytoken.id] })).json() as { id: string };
    const tripper = (await call('POST', '/agents', { name: 'tripper', policy_profile_id: policy.id })).json() as { connection_string: string };
    const { client } = await openSession(tripper.connection_string);
    await client.query('select email from customers').catch(() => undefined);
    await client.end();
    await waitFor(async () => ((await call('GET', '/anomalies?status=open')).json() as { anomalies: unknown[] }).anomalies.length === 1, 10_000, 'the alert');
    await nav('Anomalies');
    const row = page.getByRole('row').filter({ hasText: 'canary_tripped' });
    expect(await row.getByRole('cell').nth(3).textContent()).toBe('open');
    await shot('14-anomalies');
    await row.getByRole('button', { name: /^Acknowledge alert / }).click();
    await expect.poll(async () => page.getByRole('row').filter({ hasText: 'canary_tripped' }).getByRole('cell').nth(3).textContent(), { timeout: 10_000 }).toBe('acknowledged');
    await page.getByRole('row').filter({ hasText: 'canary_tripped' }).getByRole('button', { name: /^Resolve alert / }).click();
    await expect.poll(async () => page.getByRole('row').filter({ hasText: 'canary_tripped' }).getByRole('cell').nth(3).textContent(), { timeout: 10_000 }).toBe('resolved');
    const [alert] = ((await call('GET', '/anomalies')).json() as { anomalies: Record<string, unknown>[] }).anomalies;
    expect(alert).toMatchObject({ kind: 'canary_tripped', status: 'resolved', acknowledged_by: expect.stringMatching(/^user:/), resolved_by: expect.stringMatching(/^user:/) });
  });

  it('signs out, and back in with email and password, then with the org API key kept only in sessionStorage', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to pgward' }).waitFor();
    expect((await page.context().cookies()).find((c) => c.name === 'pgward.session_token')).toBeUndefined();
    const withEmail = page.getByRole('form', { name: 'Sign in with email' });
    await withEmail.getByLabel('Email', { exact: true }).fill(EMAIL);
    await withEmail.getByLabel('Password', { exact: true }).fill('not the password');
    await withEmail.getByRole('button', { name: 'Sign in' }).click();
    await withEmail.getByRole('alert').waitFor();
    await withEmail.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await withEmail.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: /^Organization Ada Lovelace/ }).waitFor();
    expect(await page.locator('#who').textContent()).toContain('owner · signed in');
    await page.getByRole('button', { name: 'Sign out' }).click();

    await page.getByRole('form', { name: 'Sign in with an API key' }).getByLabel('API key', { exact: true }).fill(orgKey);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.getByRole('heading', { level: 1, name: /^Organization Ada Lovelace/ }).waitFor();
    expect(await page.locator('#who').textContent()).toContain('admin · API key');
    expect(await page.evaluate("sessionStorage.getItem('pgward.orgKey')")).toBe(orgKey);
    expect(await page.evaluate('localStorage.length')).toBe(0);
    expect(page.url()).not.toContain('pgw_');
    // EventSource carries cookies, never an Authorization header: with a key, the approvals queue polls.
    await page.goto(`${base}/dashboard/#/p/${project}/approvals`);
    expect(await page.locator('[data-approvals-mode="polling"]').textContent()).toBe('Refreshed every 2 seconds (signed in with an API key, which the live stream cannot carry).');
    // A new tab of the same browser does not have it.
    const other = await page.context().newPage();
    await other.goto(`${base}/dashboard/`);
    await other.getByRole('heading', { name: 'Sign in to pgward' }).waitFor();
    await other.close();
  });

  it('polls the approvals on when each list answers only after the next poll was asked (a slow API)', async () => {
    const slow = /\/approvals\?/;
    await page.route(slow, async (route) => {
      const response = await route.fetch();
      await new Promise((resolve) => setTimeout(resolve, 2_600));
      await route.fulfill({ response });
    });
    try {
      await page.getByLabel('Show', { exact: true }).selectOption('failed');
      await page.locator('article[data-approval] h3').first().waitFor({ timeout: 8_000 });
      expect(await page.locator('article[data-approval] h3').allTextContents()).toEqual(['UPDATE held (failed)']);
    } finally {
      await page.unroute(slow);
    }
  });

  it('kept every secret out of URLs and logs, and the page raised no error (CSP included)', () => {
    expect(pageErrors).toEqual([]);
    const text = logs.lines.join('\n');
    expect(logs.lines.length).toBeGreaterThan(0);
    expect(text).not.toContain(orgKey);
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain(new URL(connectionString).password);
  });
});

async function projectId(): Promise<string> {
  return /#\/p\/([^/]+)\//.exec(page.url())![1]!;
}
