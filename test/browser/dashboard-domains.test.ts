// The dashboard's Domains tab in a real browser (Debian's Chromium), against a real server answering TXT
// look-ups from a real DNS server (pebble-challtestsrv): refusals shown with the API's message, a new
// name PENDING with its DNS records (copied to the clipboard), verify failing with what DNS has instead
// and passing once the record is set, the site opened at its new name, a canonical name that redirects
// the others, an ACTIVE name whose record went missing, removal behind a confirmation, and a phone's
// width. BERTH_SCREENSHOTS=1 also writes
// docs/screenshots/domains.png and phone-domains.png.
import test from 'ava';
import got from 'got';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { type TestBerth, createSite, putFile, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, overflowsSideways, screenshot, signIn } from '../helpers/browser.ts';
import { type ChallengeDns, startChallengeDns } from '../helpers/challenge-dns.ts';
import { until } from '../helpers/until.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const ADMIN = 'ada@example.com';
const HOSTILE = '<img src=x onerror=alert(1)>';
const SHOP = 'shop.example.com';
const WWW = 'www.example.com';

interface Domain {
  hostname: string;
  status: string;
  verification: { name: string; value: string };
  target: string;
  canonical: boolean;
  redirectSubdomain: boolean;
  failingSince: string | null;
}

let t0: TestBerth;
let dns: ChallengeDns;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let site: { id: string; subdomain: string };
const dialogs: string[] = [];
/** What the page's confirmations are answered with, and the questions they asked. */
let confirmWith = false;
const confirmations: string[] = [];

test.before(async () => {
  dns = await startChallengeDns();
  // Sites live under a public-looking host, so a name under it is refused as the instance's own.
  // ACTIVE names are looked at again often, and a missing record stays within its grace period.
  t0 = await startTestBerth({
    dnsServers: [dns.address],
    siteHost: 'sites.example.net',
    domainCheckMs: 200,
    domainGraceMs: 3_600_000,
  });
  await createUser(t0.berth.deps, { email: ADMIN, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
  const created = await createSite(t0.owner, { name: 'Shop', subdomain: 'shop' });
  site = { id: created.id, subdomain: created.subdomain };
  await putFile(
    t0.owner,
    created.bucketId,
    'web/index.html',
    '<!doctype html><h1>Welcome to the shop</h1>',
    'text/html',
  );
  browser = await launchBrowser([SHOP, WWW]);
  context = await newContext(browser);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t0.url });
  page = await context.newPage();
  page.on('dialog', (dialog) => {
    if (dialog.type() === 'confirm') {
      confirmations.push(dialog.message());
      void (confirmWith ? dialog.accept() : dialog.dismiss());
      return;
    }
    // Any other dialog would be a tenant string run as HTML.
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await signIn(page, t0.url, ADMIN, PASSWORD);
});

test.after.always(async () => {
  await browser?.close();
  await t0?.dispose();
  await dns?.stop();
});

test.afterEach(() => {
  if (dialogs.length > 0) throw new Error(`a dialog opened: ${dialogs.join(', ')}`);
});

const domainsTable = () => page.getByRole('table', { name: 'Custom domains' });
const rowOf = (hostname: string) => domainsTable().getByRole('row').filter({ hasText: hostname });
const records = (hostname: string) => page.getByRole('table', { name: `DNS records for ${hostname}` });
const apiDomain = async (hostname: string): Promise<Domain> =>
  (await t0.owner.read.get(`v0/sites/${site.id}/domains/${hostname}`).json<{ domain: Domain }>()).domain;
/** A request for / with `hostname` as its Host. */
const at = (hostname: string) =>
  got(`${t0.url}/`, {
    headers: { host: `${hostname}:${t0.berth.port}` },
    followRedirect: false,
    throwHttpErrors: false,
    retry: { limit: 0 },
  });
const servesTheSite = async (hostname: string) => /Welcome to the shop/.test((await at(hostname)).body);

test.serial('the Domains tab refuses a name with the API’s message, as text', async (t) => {
  await page.goto(`${t0.url}/#/sites/${site.id}`);
  await page.getByRole('navigation', { name: 'Site' }).getByRole('link', { name: 'Domains' }).click();
  await page.getByRole('heading', { name: 'Domains', exact: true }).waitFor();
  t.is(
    await page
      .getByRole('navigation', { name: 'Site' })
      .getByRole('link', { name: 'Domains' })
      .getAttribute('aria-current'),
    'page',
  );
  await page.getByText('No custom domains yet').waitFor();

  const add = async (name: string) => {
    await page.getByLabel('Domain name').fill(name);
    await page.getByRole('button', { name: 'Add domain' }).click();
  };
  await add('printer.local');
  await page.getByRole('alert').filter({ hasText: '.local is not a public top-level domain' }).waitFor();
  await add(`shop.${t0.config.siteHost}`);
  await page.getByRole('alert').filter({ hasText: "is under the instance's site host" }).waitFor();
  await add(HOSTILE);
  await page.getByRole('alert').filter({ hasText: HOSTILE }).waitFor();
  t.is(await page.locator('main img').count(), 0, 'the echoed name is text, never HTML');
  t.is(await domainsTable().count(), 0, 'nothing was added');
});

test.serial('an added name is PENDING with its DNS records, each copyable; adding it again is refused', async (t) => {
  await page.getByLabel('Domain name').fill('Shop.Example.COM');
  await page.getByRole('button', { name: 'Add domain' }).click();
  await page.getByText(`Added ${SHOP}: create its DNS records below`).waitFor();
  t.is(await page.getByLabel('Domain name').inputValue(), '', 'the form is ready for the next name');
  t.deepEqual(await domainsTable().getByRole('columnheader').allTextContents(), [
    'Domain',
    'Status',
    'Canonical',
    'Actions',
  ]);
  t.regex((await rowOf(SHOP).getByRole('cell').nth(1).textContent())!, /^PENDING\s*Waiting for its DNS records$/);

  const domain = await apiDomain(SHOP);
  t.is(domain.status, 'PENDING');
  const shown = records(SHOP);
  t.deepEqual(await shown.getByRole('row').nth(1).getByRole('cell').allTextContents(), [
    'TXT',
    `${domain.verification.name}Copy`,
    `${domain.verification.value}Copy`,
  ]);
  t.deepEqual(await shown.getByRole('row').nth(2).getByRole('cell').allTextContents(), [
    'CNAME',
    `${SHOP}Copy`,
    `${domain.target}Copy`,
  ]);
  t.is(domain.target, `${site.subdomain}.${t0.config.siteHost}`);
  await page.getByText('For an apex name (example.com), which cannot have a CNAME').waitFor();

  await page.getByRole('button', { name: `Copy the TXT value for ${SHOP}` }).click();
  await shown.getByText('Copied.').waitFor();
  t.is(await page.evaluate<string>('navigator.clipboard.readText()'), domain.verification.value);

  await page.getByLabel('Domain name').fill(SHOP);
  await page.getByRole('button', { name: 'Add domain' }).click();
  await page
    .getByRole('alert')
    .filter({ hasText: `${SHOP} is a domain of this site already` })
    .waitFor();
  t.is(await rowOf(SHOP).count(), 1);
});

test.serial('verify fails with what DNS has instead, then passes once the TXT record is there', async (t) => {
  const domain = await apiDomain(SHOP);
  const verify = page.getByRole('button', { name: `Verify ${SHOP}` });
  await verify.click();
  await page
    .getByRole('alert')
    .filter({ hasText: `there is no TXT record at ${domain.verification.name}` })
    .waitFor();

  await dns.setTxt(domain.verification.name, 'berth-site-verification=someone-else');
  await verify.click();
  await page
    .getByRole('alert')
    .filter({ hasText: 'are "berth-site-verification=someone-else", not the value asked for' })
    .waitFor();
  t.is((await apiDomain(SHOP)).status, 'PENDING');
  t.false(await servesTheSite(SHOP), 'not served while PENDING');

  await dns.clearTxt(domain.verification.name);
  await dns.setTxt(domain.verification.name, domain.verification.value);
  await verify.click();
  await page.getByText(`${SHOP} is ACTIVE: the site answers at it.`).waitFor();
  t.regex((await rowOf(SHOP).getByRole('cell').nth(1).textContent())!, /^ACTIVE\s*Verified /);
  t.is(await records(SHOP).count(), 0, 'the records are no longer asked for');
  t.is((await apiDomain(SHOP)).status, 'ACTIVE');

  // The name links to the site at it; Chromium resolves it to this machine.
  const link = rowOf(SHOP).getByRole('link', { name: SHOP });
  t.is(await link.getAttribute('href'), `http://${SHOP}:${t0.berth.port}/`);
  const [tab] = await Promise.all([context.waitForEvent('page'), link.click()]);
  await tab.getByRole('heading', { name: 'Welcome to the shop' }).waitFor();
  await tab.close();
});

test.serial('a canonical name: the others and, when asked, the subdomain redirect to it', async (t) => {
  const added = await t0.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname: WWW } });
  t.is(added.statusCode, 201);
  const { domain } = added.body as unknown as { domain: Domain };
  await dns.setTxt(domain.verification.name, domain.verification.value);
  t.is((await t0.owner.api.post(`v0/sites/${site.id}/domains/${WWW}/verify`)).statusCode, 200);

  await page.reload();
  await rowOf(WWW).waitFor();
  await page.getByText('No canonical name: each of the site’s names serves it as it is.').waitFor();
  await page.getByLabel('Canonical domain').selectOption(WWW);
  await page.getByLabel(`Redirect ${domain.target} too`).check();
  await page.getByRole('button', { name: 'Make canonical' }).click();
  await page.getByText(`${WWW} is the canonical name now.`).waitFor();
  t.regex(
    (await rowOf(WWW).getByRole('cell').nth(2).textContent())!,
    new RegExp(`^Yes\\s*${domain.target} redirects here too$`),
  );
  t.is(await rowOf(SHOP).getByRole('cell').nth(2).textContent(), 'No');
  t.like(await apiDomain(WWW), { canonical: true, redirectSubdomain: true });

  const other = await at(SHOP);
  t.is(other.statusCode, 308);
  t.is(other.headers.location, `http://${WWW}:${t0.berth.port}/`);
  t.is((await t0.site(site.subdomain).get('')).statusCode, 308, 'the subdomain redirects too');

  await page.getByRole('button', { name: 'Stop redirecting' }).click();
  await page.getByText('No name redirects now.').waitFor();
  t.like(await apiDomain(WWW), { canonical: false, redirectSubdomain: false });
  t.true(await servesTheSite(SHOP), 'served as it is again');
});

test.serial(
  'an ACTIVE name whose record went missing shows since when, and its records again until verified',
  async (t) => {
    const { verification } = await apiDomain(WWW);
    await dns.clearTxt(verification.name);
    await until(async () => (await apiDomain(WWW)).failingSince, 'the re-check to miss the record');
    await page.reload();
    const state = rowOf(WWW).getByRole('cell').nth(1);
    await state.getByText('Record missing since').waitFor();
    t.regex(
      (await state.textContent())!,
      /^ACTIVE\s*Record missing since .+: still served until the grace period ends$/,
    );
    await records(WWW).waitFor();
    await page.getByText('The TXT record was not found at the last check: put it back, then verify again.').waitFor();

    await dns.setTxt(verification.name, verification.value);
    await page.getByRole('button', { name: `Verify ${WWW}` }).click();
    await page.getByText(`${WWW} is ACTIVE: the site answers at it.`).waitFor();
    t.is(await records(WWW).count(), 0);
    t.regex((await state.textContent())!, /^ACTIVE\s*Verified /);
    t.is((await apiDomain(WWW)).failingSince, null);
  },
);

test.serial('Remove asks first; confirmed, the name is gone and no longer served', async (t) => {
  const remove = page.getByRole('button', { name: `Remove ${SHOP}` });
  confirmWith = false;
  await remove.click();
  await until(() => confirmations.length === 1, 'the removal asked first');
  t.is(confirmations[0], `Remove ${SHOP}? The site stops answering at it at once.`);
  t.is(await rowOf(SHOP).count(), 1, 'a cancelled removal removes nothing');

  confirmWith = true;
  await remove.click();
  await page.getByText(`Removed ${SHOP}.`).waitFor();
  t.is(await rowOf(SHOP).count(), 0);
  t.is((await t0.owner.read.get(`v0/sites/${site.id}/domains/${SHOP}`)).statusCode, 404);
  t.false(await servesTheSite(SHOP), 'no longer served');
});

test.serial('the Domains tab fits a phone’s width, records included', async (t) => {
  // One name of each kind for the pictures: ACTIVE and canonical, and PENDING with its records.
  t.is((await t0.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname: SHOP } })).statusCode, 201);
  const canonical = await t0.owner.api.post(`v0/sites/${site.id}/domains/${WWW}`, {
    json: { canonical: true, redirectSubdomain: true },
  });
  t.is(canonical.statusCode, 200);
  // The page is on the tab already: a reload shows the names added behind its back.
  await page.reload();
  await records(SHOP).waitFor();
  await screenshot(page, 'domains');

  const phone = await newContext(browser, { width: 375, height: 740 });
  const small = await phone.newPage();
  await signIn(small, t0.url, ADMIN, PASSWORD);
  await small.goto(`${t0.url}/#/sites/${site.id}/domains`);
  await small.getByRole('table', { name: `DNS records for ${SHOP}` }).waitFor();
  await small.waitForLoadState('networkidle');
  t.false(await overflowsSideways(small), 'the Domains tab fits 375 px');
  await screenshot(small, 'phone-domains');
  await phone.close();
});
