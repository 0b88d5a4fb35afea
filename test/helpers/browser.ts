// Drives Debian's Chromium (`make test` installs /usr/bin/chromium) with playwright-core, for the
// dashboard's browser tests. Chromium resolves *.localhost to loopback itself, so hosted sites open at
// http://<subdomain>.localhost:<port>/ with no DNS set-up.
import fs from 'node:fs';
import path from 'node:path';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Screenshots are written only when asked for (BERTH_SCREENSHOTS=1), into docs/screenshots/. */
export const SCREENSHOTS = process.env.BERTH_SCREENSHOTS === '1';
const SCREENSHOT_DIR = path.resolve(import.meta.dirname, '../../docs/screenshots');

/** Starts Chromium; each name in `loopbackNames` resolves to 127.0.0.1 (custom domains in tests). */
export async function launchBrowser(loopbackNames: string[] = []): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run make test, which installs Debian's chromium package`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...(loopbackNames.length > 0
        ? [`--host-resolver-rules=${loopbackNames.map((name) => `MAP ${name} 127.0.0.1`).join(', ')}`]
        : []),
    ],
  });
}

/** A fresh browser profile: no cookies, no storage; `timezoneId` sets the page's local time zone. */
export async function newContext(
  browser: Browser,
  options: { width?: number; height?: number; timezoneId?: string } = {},
): Promise<BrowserContext> {
  const context = await browser.newContext({
    viewport: { width: options.width ?? 1280, height: options.height ?? 860 },
    acceptDownloads: true,
    ...(options.timezoneId ? { timezoneId: options.timezoneId } : {}),
  });
  context.setDefaultTimeout(15_000);
  return context;
}

/** The URLs `page` asks of any host but `origin` from now on (data: URLs aside): the dashboard asks none. */
export function requestsElsewhere(page: Page, origin: string): string[] {
  const elsewhere: string[] = [];
  page.on('request', (request) => {
    if (!request.url().startsWith(`${origin}/`) && !request.url().startsWith('data:')) elsewhere.push(request.url());
  });
  return elsewhere;
}

/** Signs in at /login on the control plane and waits for the dashboard to show the user. */
export async function signIn(page: Page, baseUrl: string, email: string, password: string): Promise<void> {
  await page.goto(`${baseUrl}/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** Saves a full-page screenshot as docs/screenshots/<name>.png when BERTH_SCREENSHOTS=1. */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/** True when the page is wider than its viewport (a horizontal scroll bar). */
export const overflowsSideways = (page: Page): Promise<boolean> =>
  // A string, evaluated in the page: the Node side has no DOM types.
  page.evaluate<boolean>('document.documentElement.scrollWidth > document.documentElement.clientWidth + 1');
