import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApi } from '../support/api.js';
import { signUp, startListeningApi } from '../support/identity.js';
import { captureLogs, type CapturedLogs } from '../support/logs.js';

const ARTIFACTS = join(process.cwd(), 'test-artifacts', 'dashboard');
const CHROMIUM = process.env.PGWARD_CHROMIUM ?? '/usr/bin/chromium';

let api: TestApi;
let base: string;
let logs: CapturedLogs;
let browser: Browser;
const pageErrors: string[] = [];

/** A browser tab signed in with the session cookie of a person signed up over HTTP. */
async function signedInPage(email: string, name: string): Promise<{ page: Page; userId: string }> {
  const { cookie, userId } = await signUp(base, email, name);
  const context = await browser.newContext({ viewport: { width: 1366, height: 800 } });
  const equals = cookie.indexOf('=');
  await context.addCookies([{ name: cookie.slice(0, equals), value: cookie.slice(equals + 1), url: base, httpOnly: true, sameSite: 'Lax' }]);
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.on('dialog', (dialog) => void dialog.accept());
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) pageErrors.push(message.text());
  });
  return { page, userId };
}

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true });
  logs = captureLogs();
  ({ api, base } = await startListeningApi('dashboard_members', {}, undefined, logs.logger));
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  await api?.stop();
});

describe('the Members page and the organization switcher in Chromium', () => {
  it('invites a person (the link shown once), who accepts from the link, switches organizations, and is demoted and removed', async () => {
    const owner = await signedInPage('olga@example.com', 'Olga');
    const bob = await signedInPage('bob@example.com', 'Bob');

    await owner.page.goto(`${base}/dashboard/#/members`);
    await owner.page.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
    const invite = owner.page.getByRole('form', { name: 'Invite a person' });
    await invite.getByLabel('E-mail address').fill('Bob@Example.com');
    await invite.getByLabel('Role').selectOption('admin');
    await invite.getByRole('button', { name: 'Invite' }).click();
    const link = await owner.page.getByLabel('Invitation link').inputValue();
    const token = await owner.page.getByLabel('Invitation token').inputValue();
    expect(link).toBe(`${base}/dashboard/#/invitations/accept?token=${token}`);
    await owner.page.screenshot({ path: join(ARTIFACTS, 'members-invite.png'), fullPage: true });
    await owner.page.getByRole('button', { name: 'I have saved them' }).click();
    await expect.poll(() => owner.page.getByLabel('Invitation token').count()).toBe(0);
    const invitations = owner.page.getByRole('table', { name: 'Invitations' });
    await expect.poll(() => invitations.getByRole('cell', { name: 'bob@example.com', exact: true }).count()).toBe(1);

    // The invitee opens the link: the token leaves the address bar, and accepting acts in the new organization.
    await bob.page.goto(link);
    await bob.page.getByRole('heading', { level: 1, name: 'Accept an invitation' }).waitFor();
    expect(new URL(bob.page.url()).hash).toBe('#/invitations/accept');
    await bob.page.getByRole('button', { name: 'Accept invitation' }).click();
    await bob.page.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
    const switcher = bob.page.getByLabel('Organization', { exact: true });
    await expect.poll(() => switcher.locator('option').allTextContents()).toEqual(expect.arrayContaining(["Olga's organization (admin)", "Bob's organization (owner)"]));
    expect(await switcher.locator('option:checked').textContent()).toBe("Olga's organization (admin)");
    await expect.poll(() => bob.page.getByRole('table', { name: 'Members' }).getByRole('cell', { name: 'Bob (you)', exact: true }).count()).toBe(1);
    await bob.page.screenshot({ path: join(ARTIFACTS, 'members-joined.png'), fullPage: true });
    await switcher.selectOption({ label: "Bob's organization (owner)" });
    await bob.page.getByRole('heading', { level: 1, name: "Organization Bob's organization" }).waitFor();

    // The owner demotes Bob, then removes him.
    await owner.page.reload();
    const members = owner.page.getByRole('table', { name: 'Members' });
    await members.getByLabel('Role of Bob').selectOption('viewer');
    await expect.poll(async () => (await api.pool.query<{ role: string }>(`select role from rm.memberships where user_id = $1 and org_id <> (select org_id from rm.memberships where user_id = $1 order by created_at limit 1)`, [bob.userId])).rows[0]?.role).toBe('viewer');
    await owner.page.getByRole('button', { name: 'Remove Bob' }).click();
    await expect.poll(() => owner.page.getByRole('table', { name: 'Members' }).getByRole('cell', { name: 'bob@example.com', exact: true }).count()).toBe(0);

    // Bob, back in the organization he left, is sent to his own.
    await bob.page.evaluate("sessionStorage.setItem('pgward.actingOrg', 'org_aaaaaaaaaaaaaaaaaaaaaaaaaa')");
    await bob.page.goto(`${base}/dashboard/#/`);
    await bob.page.getByRole('heading', { level: 1, name: "Organization Bob's organization" }).waitFor();

    expect(pageErrors).toEqual([]);
    expect(logs.lines.filter((line) => line.includes(token.split('.')[1]!))).toEqual([]);
  });
});
