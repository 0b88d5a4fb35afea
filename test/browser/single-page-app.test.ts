// A single-page app in a real browser (Debian's Chromium): its client router moves to a deep link with
// the History API, a reload of that link asks the server for it, and the site's `/* /index.html 200`
// rule answers with the app, which shows the same page again; its assets stay files.
import test from 'ava';
import type { Browser } from 'playwright-core';
import { type TestBerth, createSite, putFile, startTestBerth } from '../helpers/berth.ts';
import { deployFiles } from '../helpers/deployments.ts';
import { launchBrowser, newContext } from '../helpers/browser.ts';

const APP = `<!doctype html>
<html><head><title>app</title><script src="/app.js" defer></script></head>
<body><nav><a id="settings" href="/dashboard/settings">Settings</a></nav><main id="view"></main></body></html>
`;
// The app draws the page its URL names, and follows its own links without loading a page.
const SCRIPT = `
const draw = () => { document.getElementById('view').textContent = 'page: ' + location.pathname; };
document.getElementById('settings').addEventListener('click', (event) => {
  event.preventDefault();
  history.pushState(null, '', event.target.getAttribute('href'));
  draw();
});
draw();
`;

let t0: TestBerth;
let browser: Browser;

test.before(async () => {
  t0 = await startTestBerth();
  browser = await launchBrowser();
});
test.after.always(async () => {
  await browser?.close();
  await t0?.dispose();
});

test('a deep link of a single-page app survives a reload', async (t) => {
  const site = await createSite(t0.owner, { name: 'App', subdomain: 'spa' });
  await deployFiles(t0.owner, site.id, { 'web/index.html': APP, 'web/_redirects': '/*  /index.html  200\n' });
  await putFile(t0.owner, site.bucketId, 'web/app.js', SCRIPT, 'text/javascript');
  const page = await (await newContext(browser)).newPage();
  const origin = `http://spa.localhost:${t0.berth.port}`;
  await page.goto(`${origin}/`);
  t.is(await page.textContent('#view'), 'page: /');
  await page.click('#settings');
  t.is(await page.textContent('#view'), 'page: /dashboard/settings');
  const reloaded = await page.reload();
  t.is(reloaded?.status(), 200);
  t.is(page.url(), `${origin}/dashboard/settings`);
  t.is(await page.textContent('#view'), 'page: /dashboard/settings');
  const script = await page.evaluate(() => fetch('/app.js').then((res) => res.text()));
  t.is(script, SCRIPT, 'the app’s script is its file, not the app');
});
