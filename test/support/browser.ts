import type { Browser, Page } from 'playwright-core';

/** A fresh browser context (no cookies) on a laptop screen whose script errors and CSP violations go to `errors`. */
export async function watchedPage(browser: Browser, errors: string[]): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  page.setDefaultTimeout(10_000);
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) errors.push(message.text());
  });
  return page;
}
