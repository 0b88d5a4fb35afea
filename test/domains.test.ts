// Custom domains through real HTTP and a real DNS server (pebble-challtestsrv, TXT records set by the
// test): the rules of a name (normalised, public, not the instance's, one ACTIVE site per name),
// verification failing with what was found and then passing, serving on the custom host in every way
// (files, functions, custom 404, a PRIVATE site's sign-in in Chromium), canonical redirects, an
// archived site, removal, and an ACTIVE domain whose record went away lapsing after its grace period.
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import got from 'got';
import { type TestBerth, createSite, deployFixture, putFile, startTestBerth } from './helpers/berth.ts';
import { type ChallengeDns, startChallengeDns } from './helpers/challenge-dns.ts';
import { launchBrowser, newContext } from './helpers/browser.ts';
import { until } from './helpers/until.ts';
import { createUser } from '../control-plane/services/users.ts';
import { freePort } from './helpers/ports.ts';

const SITE_HOST = 'sites.example.net';
const INSTANCE_HOST = 'berth.example.net';
const PASSWORD = 'a long enough password';

let t0: TestBerth;
let dns: ChallengeDns;

test.before(async () => {
  dns = await startChallengeDns();
  const port = await freePort();
  t0 = await startTestBerth({
    port,
    // With a public URL, a name that is no site's shows nothing of Berth (no control plane either).
    publicUrl: `http://${INSTANCE_HOST}:${port}`,
    siteHost: SITE_HOST,
    dnsServers: [dns.address],
    // Short enough to see a domain lapse within the test.
    domainCheckMs: 200,
    domainGraceMs: 2000,
  });
});

test.after.always(async () => {
  await t0?.dispose();
  await dns?.stop();
});

interface Domain {
  hostname: string;
  siteId: string;
  status: string;
  verification: { type: string; name: string; value: string };
  target: string;
  canonical: boolean;
  redirectSubdomain: boolean;
  verifiedAt: string | null;
  failingSince: string | null;
}

type Account = TestBerth['owner'];
const domains = (siteId: string) => `v0/sites/${siteId}/domains`;

async function addDomain(account: Account, siteId: string, hostname: string) {
  return account.api.post(domains(siteId), { json: { hostname } });
}

/** Adds a domain, creates its TXT record and verifies it. */
async function activeDomain(account: Account, siteId: string, hostname: string): Promise<Domain> {
  const added = await addDomain(account, siteId, hostname);
  if (added.statusCode !== 201)
    throw new Error(`adding ${hostname}: ${added.statusCode} ${JSON.stringify(added.body)}`);
  const { domain } = added.body as unknown as { domain: Domain };
  await dns.setTxt(domain.verification.name, domain.verification.value);
  const verified = await account.api.post(`${domains(siteId)}/${hostname}/verify`);
  if (verified.statusCode !== 200) throw new Error(`verifying ${hostname}: ${JSON.stringify(verified.body)}`);
  return (verified.body as unknown as { domain: Domain }).domain;
}

/** A client for requests whose Host is `hostname` (with the server's port). */
const at = (hostname: string) =>
  got.extend({
    prefixUrl: t0.url,
    headers: { host: `${hostname}:${t0.berth.port}` },
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
  });

async function siteWithPage(account: Account, body = '<p>home</p>', extra: Record<string, unknown> = {}) {
  const site = await createSite(account, extra);
  await putFile(account, site.bucketId, 'web/index.html', body, 'text/html');
  return site;
}

test('a domain is added PENDING with the TXT record to create; its name is normalised', async (t) => {
  const site = await createSite(t0.owner);
  const res = await addDomain(t0.owner, site.id, 'Shop.Example.COM.');
  t.is(res.statusCode, 201);
  const { domain } = res.body as unknown as { domain: Domain };
  t.like(domain, {
    hostname: 'shop.example.com',
    siteId: site.id,
    status: 'PENDING',
    verification: { type: 'TXT', name: '_berth-challenge.shop.example.com' },
    target: `${site.subdomain}.${SITE_HOST}`,
    canonical: false,
    verifiedAt: null,
  });
  t.regex(domain.verification.value, /^berth-site-verification=[A-Za-z0-9_-]{24}$/);

  const idn = await addDomain(t0.owner, site.id, 'bücher.example.com');
  t.is(idn.statusCode, 201);
  t.is((idn.body as unknown as { domain: Domain }).domain.hostname, 'xn--bcher-kva.example.com');
  const withPort = await addDomain(t0.owner, site.id, 'www.example.org:443');
  t.is((withPort.body as unknown as { domain: Domain }).domain.hostname, 'www.example.org');

  // Read back by the name in any form that normalises to it; listed by name, a page at a time.
  const one = await t0.owner.read.get(`${domains(site.id)}/SHOP.example.com`);
  t.is(one.statusCode, 200);
  t.is((one.body as unknown as { domain: Domain }).domain.hostname, 'shop.example.com');
  const page = await t0.owner.read.get(domains(site.id), { searchParams: { limit: 2 } });
  const body = page.body as unknown as { domains: Domain[]; pagination: { hasMore: boolean; nextOffset: number } };
  t.deepEqual(
    body.domains.map((d) => d.hostname),
    ['shop.example.com', 'www.example.org'],
  );
  t.deepEqual(body.pagination, { hasMore: true, nextOffset: 2 });

  // A READ key reads but does not add.
  const denied = await t0.owner.read.post(domains(site.id), { json: { hostname: 'read.example.com' } });
  t.is(denied.statusCode, 403);
  t.is((denied.body as unknown as { error: { code: string } }).error.code, 'forbidden');
});

test('names that are not public DNS names are invalid; the instance’s own names are reserved', async (t) => {
  const site = await createSite(t0.owner);
  for (const hostname of [
    '',
    '127.0.0.1',
    '[::1]',
    'localhost',
    'intranet',
    'printer.local',
    'app.internal',
    'co.uk',
    'under_score.example.com',
    '-dash.example.com',
    'https://shop.example.com/',
    `${'a'.repeat(64)}.example.com`,
  ]) {
    const res = await addDomain(t0.owner, site.id, hostname);
    t.is(res.statusCode, 400, hostname);
    t.is((res.body as unknown as { error: { code: string } }).error.code, 'invalid_hostname', hostname);
  }
  for (const hostname of [SITE_HOST, `${site.subdomain}.${SITE_HOST}`, `a.b.${SITE_HOST}`]) {
    const res = await addDomain(t0.owner, site.id, hostname);
    t.is(res.statusCode, 400, hostname);
    t.is((res.body as unknown as { error: { code: string } }).error.code, 'domain_reserved', hostname);
  }
  const list = await t0.owner.read.get(domains(site.id));
  t.deepEqual((list.body as unknown as { domains: Domain[] }).domains, [], 'nothing was stored');
});

test('verification fails saying what it found, then passes; an ACTIVE name is nobody else’s', async (t) => {
  const site = await siteWithPage(t0.owner);
  const other = await t0.newAccount('builder');
  const rival = await createSite(other);
  const added = (await addDomain(t0.owner, site.id, 'verify.example.com')).body as unknown as { domain: Domain };
  const verify = () => t0.owner.api.post(`${domains(site.id)}/verify.example.com/verify`);

  const missing = await verify();
  t.is(missing.statusCode, 409);
  t.is((missing.body as unknown as { error: { code: string } }).error.code, 'domain_not_verified');
  t.regex(
    (missing.body as unknown as { error: { message: string } }).error.message,
    /there is no TXT record at _berth-challenge\.verify\.example\.com/,
  );

  await dns.setTxt('_berth-challenge.verify.example.com', 'some-other-value');
  const wrong = await verify();
  t.is(wrong.statusCode, 409);
  t.regex(
    (wrong.body as unknown as { error: { message: string } }).error.message,
    /"some-other-value", not the value asked for/,
  );
  t.is((await at('verify.example.com').get('index.html')).statusCode, 404, 'a PENDING domain is not served');

  // Another account may claim the name while it is PENDING: the claim proves nothing yet.
  const rivalClaim = await addDomain(other, rival.id, 'verify.example.com');
  t.is(rivalClaim.statusCode, 201);
  t.not((rivalClaim.body as unknown as { domain: Domain }).domain.verification.value, added.domain.verification.value);

  await dns.setTxt('_berth-challenge.verify.example.com', added.domain.verification.value);
  const passed = await verify();
  t.is(passed.statusCode, 200);
  const { domain } = passed.body as unknown as { domain: Domain };
  t.is(domain.status, 'ACTIVE');
  t.truthy(domain.verifiedAt);

  // The rival's pending claim ended with the verification; a new one is refused without a word of who holds it.
  const rivalList = await other.read.get(domains(rival.id));
  t.deepEqual((rivalList.body as unknown as { domains: Domain[] }).domains, []);
  const taken = await addDomain(other, rival.id, 'Verify.Example.com');
  t.is(taken.statusCode, 409);
  const error = (taken.body as unknown as { error: { code: string; message: string } }).error;
  t.is(error.code, 'domain_taken');
  for (const secret of [site.id, site.subdomain, t0.owner.id]) t.false(error.message.includes(secret));
  const again = await addDomain(t0.owner, site.id, 'verify.example.com');
  t.is(again.statusCode, 409);
  t.is((again.body as unknown as { error: { code: string } }).error.code, 'domain_taken');
});

test('an ACTIVE domain is its site in every way: files, functions, the custom 404, and no other site', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>the shop</p>');
  await putFile(t0.owner, site.bucketId, 'web/404.html', '<p>lost in the shop</p>', 'text/html');
  await deployFixture(t0.owner, site.bucketId, 'echo');
  await deployFixture(t0.owner, site.bucketId, 'logger');
  await activeDomain(t0.owner, site.id, 'serve.example.com');

  const home = await at('serve.example.com').get('');
  t.is(home.statusCode, 200);
  t.is(home.body, '<p>the shop</p>');
  const fn = await at('serve.example.com').post('api/echo?x=1', { body: 'ping' });
  t.is(fn.statusCode, 200);
  t.is(fn.body, 'ping');
  t.is(fn.headers['x-echo-query'], '?x=1');
  const missing = await at('serve.example.com').get('nothing-here');
  t.is(missing.statusCode, 404);
  t.is(missing.body, '<p>lost in the shop</p>');
  // A function's lines are in the site's logs, as from its subdomain.
  t.is((await at('serve.example.com').get('api/logger')).body, 'logged');
  const logged = await until(async () => {
    const res = await t0.owner.read.get(`v0/sites/${site.id}/logs`);
    return (res.body as unknown as { logs: Array<{ message: string }> }).logs.find((l) =>
      l.message.includes('plain log'),
    );
  }, 'the function’s log line in the site’s logs');
  t.regex(logged.message, /path: "\/api\/logger"/);

  // A host that is no site's name reaches no site, and not the control plane either.
  for (const path of ['', 'index.html', 'v0/accounts/current', 'login']) {
    const unknown = await at('unknown.example.com').get(path);
    t.is(unknown.statusCode, 404, path);
    t.regex(unknown.body, /There is no site at this address/, path);
  }
  t.is((await at(INSTANCE_HOST).get('login')).statusCode, 200, 'the control plane at its own host');
});

test('a canonical domain takes the others’ visitors with a 308, path and query kept; the subdomain when asked', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>canonical</p>');
  await activeDomain(t0.owner, site.id, 'canon.example.com');
  await activeDomain(t0.owner, site.id, 'www.canon.example.com');
  const update = (hostname: string, json: Record<string, unknown>) =>
    t0.owner.api.post(`${domains(site.id)}/${hostname}`, { json });

  const made = await update('www.canon.example.com', { canonical: true });
  t.is(made.statusCode, 200);
  t.true((made.body as unknown as { domain: Domain }).domain.canonical);
  const apex = await at('canon.example.com').get('docs/a.html?x=1&y=2');
  t.is(apex.statusCode, 308);
  t.is(apex.headers.location, `http://www.canon.example.com:${t0.berth.port}/docs/a.html?x=1&y=2`);
  t.is((await at('www.canon.example.com').get('')).body, '<p>canonical</p>');
  t.is((await t0.site(site.subdomain).get('')).statusCode, 200, 'the subdomain serves until asked to redirect');

  const bad = await update('canon.example.com', { canonical: false, redirectSubdomain: true });
  t.is(bad.statusCode, 400);
  t.is((bad.body as unknown as { error: { code: string } }).error.code, 'invalid_request');

  await update('www.canon.example.com', { canonical: true, redirectSubdomain: true });
  const sub = await t0.site(site.subdomain).get('x?y=1');
  t.is(sub.statusCode, 308);
  t.is(sub.headers.location, `http://www.canon.example.com:${t0.berth.port}/x?y=1`);

  // Another domain made canonical takes over: one canonical name per site.
  await update('canon.example.com', { canonical: true });
  const list = (await t0.owner.read.get(domains(site.id))).body as unknown as { domains: Domain[] };
  t.deepEqual(
    list.domains.map((d) => [d.hostname, d.canonical]),
    [
      ['canon.example.com', true],
      ['www.canon.example.com', false],
    ],
  );
  t.is((await at('www.canon.example.com').get('')).headers.location, `http://canon.example.com:${t0.berth.port}/`);
  t.is((await t0.site(site.subdomain).get('')).statusCode, 200);
});

test('an archived site keeps its domains and serves nothing; a removed domain is served no more', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>archive me</p>');
  await activeDomain(t0.owner, site.id, 'archived.example.com');
  t.is((await at('archived.example.com').get('')).statusCode, 200);

  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  const archived = await at('archived.example.com').get('');
  t.is(archived.statusCode, 404);
  t.false(archived.body.includes('archive me'));
  const kept = (await t0.owner.read.get(domains(site.id))).body as unknown as { domains: Domain[] };
  t.deepEqual(
    kept.domains.map((d) => [d.hostname, d.status]),
    [['archived.example.com', 'ACTIVE']],
  );
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ACTIVE' } });
  t.is((await at('archived.example.com').get('')).statusCode, 200);

  const removed = await t0.owner.api.delete(`${domains(site.id)}/archived.example.com`);
  t.is(removed.statusCode, 200);
  t.deepEqual(removed.body, { deleted: true });
  t.is((await at('archived.example.com').get('')).statusCode, 404);
  const gone = await t0.owner.api.delete(`${domains(site.id)}/archived.example.com`);
  t.is(gone.statusCode, 404);
  t.is((gone.body as unknown as { error: { code: string } }).error.code, 'not_found');
});

test('an ACTIVE domain whose TXT record is gone is seen failing, then lapses to PENDING and is not served', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>lapsing</p>');
  const domain = await activeDomain(t0.owner, site.id, 'lapse.example.com');
  t.is((await at('lapse.example.com').get('')).statusCode, 200);
  await dns.clearTxt(domain.verification.name);

  const failing = await until(async () => {
    const res = await t0.owner.read.get(`${domains(site.id)}/lapse.example.com`);
    const seen = (res.body as unknown as { domain: Domain }).domain;
    return seen.failingSince ? seen : undefined;
  }, 'the missing record seen');
  t.is(failing.status, 'ACTIVE', 'within the grace period it is still served');

  const lapsed = await until(async () => {
    const res = await t0.owner.read.get(`${domains(site.id)}/lapse.example.com`);
    const seen = (res.body as unknown as { domain: Domain }).domain;
    return seen.status === 'PENDING' ? seen : undefined;
  }, 'the domain lapsed');
  t.is(lapsed.hostname, 'lapse.example.com');
  // Every node hears of it through the change feed, a moment after the metadata says so.
  await until(async () => (await at('lapse.example.com').get('')).statusCode === 404, 'the lapsed domain unserved');

  // Its record back, it verifies again.
  await dns.setTxt(domain.verification.name, domain.verification.value);
  const again = await t0.owner.api.post(`${domains(site.id)}/lapse.example.com/verify`);
  t.is((again.body as unknown as { domain: Domain }).domain.status, 'ACTIVE');
  t.is((await at('lapse.example.com').get('')).statusCode, 200);
});

test('a PRIVATE site on its custom domain: sign-in in Chromium comes back to that domain, with its own cookie', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>members only</p>', { access: 'PRIVATE' });
  await activeDomain(t0.owner, site.id, 'private.example.com');
  await createUser(t0.berth.deps, {
    email: 'member-domains@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });
  const port = t0.berth.port;
  const browser = await launchBrowser(['private.example.com', INSTANCE_HOST]);
  t.teardown(() => browser.close());
  const page = await (await newContext(browser)).newPage();

  await page.goto(`http://private.example.com:${port}/index.html`);
  await page.getByRole('link', { name: 'Sign in' }).click();
  await page.getByLabel('Email').fill('member-domains@example.com');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`http://private.example.com:${port}/index.html`);
  t.is(await page.textContent('body'), 'members only');
  const cookies = await page.context().cookies(`http://private.example.com:${port}/`);
  const session = cookies.find((c) => c.name === '_berth_session');
  t.is(session?.domain, 'private.example.com', 'a cookie of the custom host only');
  t.true(session?.httpOnly);
});

test('sign-in goes back only to a domain of the site it was for', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>private</p>', { access: 'PRIVATE' });
  const elsewhere = await siteWithPage(t0.owner, '<p>other</p>');
  await activeDomain(t0.owner, elsewhere.id, 'elsewhere.example.com');
  await createUser(t0.berth.deps, {
    email: 'member-redirect@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });
  const control = got.extend({ prefixUrl: t0.url, throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });
  for (const origin of [`http://elsewhere.example.com:${t0.berth.port}`, 'http://evil.example.com']) {
    const res = await control.post('login', {
      form: { email: 'member-redirect@example.com', password: PASSWORD, site: site.id, next: '/', origin },
    });
    t.is(res.statusCode, 303);
    const location = new URL(res.headers.location!);
    t.is(location.hostname, `${site.subdomain}.${SITE_HOST}`, origin);
    t.is(location.pathname, '/_berth/session');
  }
});

test('sign-in started on plain http for a site served over https returns over https, at the served port', async (t) => {
  // Two instances whose sites are served over https: by their public URL, and by what a trusted proxy says.
  for (const overrides of [{ publicUrl: `https://${INSTANCE_HOST}` }, { trustProxy: true }]) {
    const served = await startTestBerth({ ...overrides, siteHost: SITE_HOST, dnsServers: [dns.address] });
    t.teardown(() => served.dispose());
    const proxied = overrides.trustProxy ? { 'x-forwarded-proto': 'https', 'x-forwarded-host': INSTANCE_HOST } : {};
    const site = await siteWithPage(served.owner, '<p>private</p>', { access: 'PRIVATE' });
    const hostname = `secure-${overrides.trustProxy ? 'proxied' : 'public'}.example.com`;
    await activeDomain(served.owner, site.id, hostname);
    await createUser(served.berth.deps, {
      email: 'member-https@example.com',
      accountId: served.owner.id,
      role: 'MEMBER',
      password: PASSWORD,
    });
    const plain = `http://${hostname}:${served.berth.port}`;
    const client = got.extend({
      prefixUrl: served.url,
      throwHttpErrors: false,
      followRedirect: false,
      retry: { limit: 0 },
    });

    const gate = await client.get('index.html', {
      headers: {
        host: `${hostname}:${served.berth.port}`,
        ...(overrides.trustProxy ? { 'x-forwarded-proto': 'https' } : {}),
      },
    });
    t.is(gate.statusCode, 401);
    t.true(
      gate.body.includes(`origin=${encodeURIComponent(`https://${hostname}`)}`),
      'the gate names the served origin',
    );

    const res = await client.post('login', {
      headers: proxied,
      form: { email: 'member-https@example.com', password: PASSWORD, site: site.id, next: '/', origin: plain },
    });
    t.is(res.statusCode, 303);
    const location = new URL(res.headers.location!);
    t.is(location.origin, `https://${hostname}`, 'the one-use token never travels over plain http');
    t.is(location.pathname, '/_berth/session');
  }
});

test('MCP tools and berth domains drive the same domains, the CLI printing the records to create', async (t) => {
  const site = await siteWithPage(t0.owner, '<p>front doors</p>');
  const client = new Client({ name: 'berth-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${t0.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${t0.owner.writeKey}` } },
    }),
  );
  t.teardown(() => client.close());
  const tool = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent?: any };

  const added = await tool('add_domain', { siteId: site.id, hostname: 'mcp.example.com' });
  t.is(added.structuredContent.domain.status, 'PENDING');
  const failed = await tool('verify_domain', { siteId: site.id, hostname: 'mcp.example.com' });
  t.true(failed.isError);
  t.is(failed.structuredContent.error.code, 'domain_not_verified');
  const { name, value } = added.structuredContent.domain.verification;
  await dns.setTxt(name, value);
  t.is(
    (await tool('verify_domain', { siteId: site.id, hostname: 'mcp.example.com' })).structuredContent.domain.status,
    'ACTIVE',
  );
  const listed = await tool('list_domains', { siteId: site.id });
  t.deepEqual(
    listed.structuredContent.domains.map((d: Domain) => d.hostname),
    ['mcp.example.com'],
  );
  t.deepEqual((await tool('remove_domain', { siteId: site.id, hostname: 'mcp.example.com' })).structuredContent, {
    deleted: true,
  });

  const berth = async (...args: string[]) => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [path.resolve(import.meta.dirname, '../control-plane/cli/berth.js'), ...args, '--site', site.subdomain],
      {
        env: {
          ...process.env,
          BERTH_URL: t0.url,
          BERTH_API_KEY: t0.owner.writeKey,
          BERTH_CONFIG_DIR: path.join(os.tmpdir(), 'berth-no-login'),
        },
      },
    );
    return stdout;
  };
  const printed = await berth('domains', 'add', 'cli.example.com');
  const record = /_berth-challenge\.cli\.example\.com {2}TXT {2}"([^"]+)"/.exec(printed);
  t.truthy(record, printed);
  t.regex(printed, new RegExp(`cli\\.example\\.com {2}CNAME {2}${site.subdomain}\\.sites\\.example\\.net`));
  await dns.setTxt('_berth-challenge.cli.example.com', record![1]!);
  t.regex(await berth('domains', 'verify', 'cli.example.com'), /^cli\.example\.com {2}ACTIVE$/m);
  t.regex(await berth('domains', 'canonical', 'cli.example.com'), /ACTIVE {2}\(canonical\)/);
  t.regex(await berth('domains', 'ls'), /cli\.example\.com {2}ACTIVE/);
  await berth('domains', 'rm', 'cli.example.com');
  t.regex(await berth('domains', 'ls'), /no domains/);
});

test('a site holds at most 100 domains; the next is refused and nothing is stored', async (t) => {
  const site = await createSite(t0.owner);
  for (let i = 0; i < 100; i++) {
    const res = await addDomain(t0.owner, site.id, `n${i}.limit.example.com`);
    if (res.statusCode !== 201) throw new Error(`domain ${i}: ${res.statusCode}`);
  }
  const refused = await addDomain(t0.owner, site.id, 'one-more.limit.example.com');
  t.is(refused.statusCode, 422);
  t.is((refused.body as unknown as { error: { code: string } }).error.code, 'domain_limit_reached');
  const page = (await t0.owner.read.get(domains(site.id), { searchParams: { limit: 200 } })).body as unknown as {
    domains: Domain[];
  };
  t.is(page.domains.length, 100);
  // Removing one makes room.
  await t0.owner.api.delete(`${domains(site.id)}/n0.limit.example.com`);
  t.is((await addDomain(t0.owner, site.id, 'one-more.limit.example.com')).statusCode, 201);
});
