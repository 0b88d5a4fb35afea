// HTTPS by Berth itself (BERTH_TLS=acme) against Let's Encrypt's test CA, pebble, with real HTTP-01
// validations on Berth's port-80 listener and names resolved by the test's DNS server: a new site's
// subdomain and a verified custom domain answer over HTTPS within seconds; an unknown name costs no
// order; a failing name backs off; port 80 answers challenges and redirects the rest; answers over
// HTTPS carry HSTS and Secure cookies; a short-lived certificate renews, and a renewal that fails keeps
// the old one serving and shows in /readyz and the metrics; two nodes on one PostgreSQL serve one
// certificate and either answers the other's challenge.
import path from 'node:path';
import test from 'ava';
import got from 'got';
import { type Config, DEFAULTS, type TlsConfig } from '../control-plane/config.ts';
import { type Berth, startBerth } from '../control-plane/server.ts';
import { createUser } from '../control-plane/services/users.ts';
import { putChallenge } from '../control-plane/tls/challenges.ts';
import { createSite, makeDataDir, putFile, type TestBerth, startTestBerth } from './helpers/berth.ts';
import { type ChallengeDns, startChallengeDns } from './helpers/challenge-dns.ts';
import { type Pebble, startPebble } from './helpers/pebble.ts';
import { freePort } from './helpers/ports.ts';
import { databaseFor, onPostgres } from './helpers/postgres.ts';
import { httpsClient, peerCertificate } from './helpers/tls-client.ts';
import { until } from './helpers/until.ts';
import { launchBrowser, newContext, signIn } from './helpers/browser.ts';

const SITE_HOST = 'sites.example.com';
const METRICS_TOKEN = 'tls-test-metrics-token';

interface Setup {
  dns: ChallengeDns;
  pebble: Pebble;
  berth: TestBerth;
  tls: TlsConfig;
}

/** Ports for Berth's HTTPS and port-80 listeners, with pebble validating on the latter. */
async function tlsConfigFor(pebble: Pebble | null, httpPort: number): Promise<TlsConfig> {
  return {
    bind: '127.0.0.1',
    httpsPort: await freePort(),
    httpPort,
    directory: pebble?.directory ?? '',
    email: 'ops@example.com',
    caFile: pebble?.caFile ?? '',
    renewCheckMs: 500,
  };
}

async function setUp(pebbleOptions: { validitySeconds?: number } = {}): Promise<Setup> {
  const dns = await startChallengeDns();
  const httpPort = await freePort();
  // Nonces refused now and then, as pebble does by default: acme-client retries badNonce.
  const pebble = await startPebble({ httpPort, dnsServer: dns.address, rejectNonces: true, ...pebbleOptions });
  const tls = await tlsConfigFor(pebble, httpPort);
  const berth = await startTestBerth({
    siteHost: SITE_HOST,
    dnsServers: [dns.address],
    metricsToken: METRICS_TOKEN,
    tls,
    previewCertificatesPerWeek: 1,
  });
  return { dns, pebble, berth, tls };
}

async function tearDown(setup: Setup | undefined): Promise<void> {
  await setup?.berth.dispose();
  await setup?.pebble.stop();
  await setup?.dns.stop();
}

async function metric(berth: TestBerth, line: RegExp): Promise<number> {
  const text = (
    await got(`${berth.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, responseType: 'text' })
  ).body;
  const found = text.split('\n').find((l) => line.test(l));
  return found ? Number(found.split(' ').at(-1)) : 0;
}

async function siteWithPage(berth: TestBerth, body: string) {
  const site = await createSite(berth.owner);
  await putFile(berth.owner, site.bucketId, 'web/index.html', body, 'text/html');
  return site;
}

let main: Setup;

test.before(async () => {
  main = await setUp();
});

test.after.always(async () => {
  await tearDown(main);
});

test.serial('a new site’s subdomain answers over HTTPS within 10 s, with a certificate for its name', async (t) => {
  const { berth, pebble, tls } = main;
  const site = await siteWithPage(berth, '<p>over https</p>');
  const name = `${site.subdomain}.${SITE_HOST}`;
  const client = httpsClient(pebble.root);
  const created = Date.now();
  const res = await until(
    async () => {
      try {
        return await client.get(`https://${name}:${tls.httpsPort}/`);
      } catch {
        return false;
      }
    },
    'the site over HTTPS',
    { ms: 10_000, every: 100 },
  );
  t.log(`first HTTPS answer ${Date.now() - created} ms after the site was created`);
  t.is(res.statusCode, 200);
  t.is(res.body, '<p>over https</p>');
  t.is(res.headers['strict-transport-security'], 'max-age=31536000');
  const peer = await peerCertificate(tls.httpsPort, name, pebble.root);
  t.is(peer.subjectaltname, `DNS:${name}`);
  t.is(site.url, `https://${name}:${tls.httpsPort}/`, 'sites are linked at their HTTPS address');
  t.is(await metric(berth, /^berth_tls_orders_total\{outcome="issued"\}/), 1);
});

test.serial('a verified custom domain answers over HTTPS within 10 s of its verification', async (t) => {
  const { berth, pebble, dns, tls } = main;
  const site = await siteWithPage(berth, '<p>shop</p>');
  const hostname = 'shop.example.org';
  const { domain } = (await berth.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname } }))
    .body as unknown as { domain: { status: string; verification: { name: string; value: string } } };
  t.is(domain.status, 'PENDING');
  await dns.setTxt(domain.verification.name, domain.verification.value);
  const client = httpsClient(pebble.root);
  // Before it is verified, the name is nobody's: no certificate.
  await t.throwsAsync(peerCertificate(tls.httpsPort, hostname, pebble.root));
  const verified = (await berth.owner.api.post(`v0/sites/${site.id}/domains/${hostname}/verify`)).body as unknown as {
    domain: { status: string };
  };
  t.is(verified.domain.status, 'ACTIVE');
  const certificateOf = async () =>
    (
      (await berth.owner.read.get(`v0/sites/${site.id}/domains/${hostname}`)).body as unknown as {
        domain: { certificate: { status: string; notAfter: string | null; error: string | null } };
      }
    ).domain.certificate;
  t.like(await certificateOf(), { status: 'NOT_YET', notAfter: null }, 'ordered at the first HTTPS visit');
  const at = Date.now();
  const res = await until(
    async () => {
      try {
        return await client.get(`https://${hostname}:${tls.httpsPort}/`);
      } catch {
        return false;
      }
    },
    'the custom domain over HTTPS',
    { ms: 10_000, every: 100 },
  );
  t.log(`first HTTPS answer ${Date.now() - at} ms after "verify"`);
  t.is(res.statusCode, 200);
  t.is(res.body, '<p>shop</p>');
  const peer = await peerCertificate(tls.httpsPort, hostname, pebble.root);
  t.is(peer.subjectaltname, `DNS:${hostname}`);
  const issued = await certificateOf();
  t.is(issued.status, 'ISSUED');
  t.is(Date.parse(issued.notAfter!), Date.parse(peer.validTo));
});

test.serial('the dashboard’s Domains tab shows each domain’s certificate in words', async (t) => {
  const { berth, pebble, tls } = main;
  // The custom domain of the test before holds its certificate by now; a verified domain not yet visited has none.
  const site = await siteWithPage(berth, '<p>dashboard</p>');
  for (const hostname of ['issued.example.org', 'unvisited.example.org']) {
    const { domain } = (await berth.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname } }))
      .body as unknown as { domain: { verification: { name: string; value: string } } };
    await main.dns.setTxt(domain.verification.name, domain.verification.value);
    await berth.owner.api.post(`v0/sites/${site.id}/domains/${hostname}/verify`);
  }
  await peerCertificate(tls.httpsPort, 'issued.example.org', pebble.root);
  await createUser(berth.berth.deps, {
    email: 'certs@example.com',
    accountId: berth.owner.id,
    role: 'ADMIN',
    password: 'a long enough password',
  });
  const browser = await launchBrowser();
  t.teardown(() => browser.close());
  const page = await (await newContext(browser)).newPage();
  await signIn(page, berth.url, 'certs@example.com', 'a long enough password');
  await page.goto(`${berth.url}/#/sites/${site.id}/domains`);
  const table = page.getByRole('table', { name: 'Custom domains' });
  await table.getByRole('row').filter({ hasText: 'issued.example.org' }).waitFor();
  t.deepEqual(await table.getByRole('columnheader').allTextContents(), [
    'Domain',
    'Status',
    'Canonical',
    'Certificate',
    'Actions',
  ]);
  const certificateOf = async (hostname: string) =>
    (await table.getByRole('row').filter({ hasText: hostname }).getByRole('cell').nth(3).textContent())!;
  t.regex(await certificateOf('issued.example.org'), /^Issued\s*Renews /);
  t.is(await certificateOf('unvisited.example.org'), 'Ordered at the first HTTPS visit');
});

test.serial('an unknown name gets no certificate, and no order, no key and no row are made for it', async (t) => {
  const { berth, pebble, tls } = main;
  const orders = pebble.orders();
  const refused = await metric(berth, /^berth_tls_handshakes_refused_total\{reason="unknown"\}/);
  for (const name of ['nobody.example.net', `nosuchsite.${SITE_HOST}`, `a.b.${SITE_HOST}`])
    await t.throwsAsync(peerCertificate(tls.httpsPort, name, pebble.root), undefined, name);
  t.is(pebble.orders(), orders, 'no order reached the CA');
  const rows = await berth.berth.deps.db('tls_orders').whereIn('hostname', ['nobody.example.net']);
  t.deepEqual(rows, []);
  t.is(await metric(berth, /^berth_tls_handshakes_refused_total\{reason="unknown"\}/), refused + 3);
  // The proxy path's question has the same answer.
  t.is(
    (await berth.anonymous.get('_berth/tls/allowed', { searchParams: { domain: 'nobody.example.net' } })).statusCode,
    404,
  );
});

test.serial('a name whose validation fails is not ordered again at once: it backs off', async (t) => {
  const { berth, pebble, dns, tls } = main;
  const site = await siteWithPage(berth, 'x');
  const name = `${site.subdomain}.${SITE_HOST}`;
  // The CA's validator finds nothing listening where the name now points.
  await dns.addA(name, '127.0.0.2');
  const orders = pebble.orders();
  await t.throwsAsync(peerCertificate(tls.httpsPort, name, pebble.root));
  t.is(pebble.orders(), orders + 1);
  const row = (await berth.berth.deps.db('tls_orders').where({ hostname: name }).first()) as {
    failures: number;
    retry_at: string;
    last_error: string;
  };
  t.is(Number(row.failures), 1);
  t.true(Date.parse(row.retry_at) > Date.now() + 60_000, 'backs off for minutes');
  t.regex(row.last_error, /connection|refused|127\.0\.0\.2/i);
  for (let i = 0; i < 3; i++) await t.throwsAsync(peerCertificate(tls.httpsPort, name, pebble.root));
  t.is(pebble.orders(), orders + 1, 'no second order while it backs off');
  t.is(await metric(berth, /^berth_tls_orders_total\{outcome="failed"\}/), 1);

  // A custom domain's failing certificate shows in the domains API, with the CA's answer.
  const hostname = 'broken.example.org';
  const { domain } = (await berth.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname } }))
    .body as unknown as { domain: { verification: { name: string; value: string } } };
  await dns.setTxt(domain.verification.name, domain.verification.value);
  await berth.owner.api.post(`v0/sites/${site.id}/domains/${hostname}/verify`);
  await dns.addA(hostname, '127.0.0.2');
  await t.throwsAsync(peerCertificate(tls.httpsPort, hostname, pebble.root));
  const listed = (await berth.owner.read.get(`v0/sites/${site.id}/domains`)).body as unknown as {
    domains: Array<{ hostname: string; certificate: { status: string; error: string; retryAt: string } }>;
  };
  const broken = listed.domains.find((d) => d.hostname === hostname)!;
  t.is(broken.certificate.status, 'FAILING');
  t.regex(broken.certificate.error, /connection|refused|127\.0\.0\.2/i);
  t.true(Date.parse(broken.certificate.retryAt) > Date.now());
});

test.serial('port 80 answers ACME challenges and sends everything else to HTTPS with a 308', async (t) => {
  const { berth, tls } = main;
  await putChallenge(berth.berth.deps, 'any.example.com', 'token_123-abc', 'token_123-abc.thumbprint');
  const port80 = got.extend({ throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });
  const challenge = await port80(`http://127.0.0.1:${tls.httpPort}/.well-known/acme-challenge/token_123-abc`, {
    headers: { host: 'any.example.com' },
  });
  t.is(challenge.statusCode, 200);
  t.is(challenge.body, 'token_123-abc.thumbprint');
  const unknown = await port80(`http://127.0.0.1:${tls.httpPort}/.well-known/acme-challenge/nope`);
  t.is(unknown.statusCode, 404);
  const other = await port80(`http://127.0.0.1:${tls.httpPort}/a/page?x=1&y=2`, {
    headers: { host: `blog.${SITE_HOST}` },
  });
  t.is(other.statusCode, 308);
  t.is(other.headers.location, `https://blog.${SITE_HOST}:${tls.httpsPort}/a/page?x=1&y=2`);
  const post = await port80.post(`http://127.0.0.1:${tls.httpPort}/v0/sites`, { headers: { host: SITE_HOST } });
  t.is(post.statusCode, 308, 'a 308 keeps the method');
  t.is(post.headers.location, `https://${SITE_HOST}:${tls.httpsPort}/v0/sites`);
});

test.serial(
  'over HTTPS the session cookie is Secure and answers carry HSTS; over plain HTTP to a name neither',
  async (t) => {
    const { berth, pebble, tls } = main;
    const deps = berth.berth.deps;
    await createUser(deps, {
      email: 'tls@example.com',
      accountId: berth.owner.id,
      role: 'ADMIN',
      password: 'a long enough password',
    });
    const form = { email: 'tls@example.com', password: 'a long enough password' };
    const origin = `https://${SITE_HOST}:${tls.httpsPort}`;
    const secure = await httpsClient(pebble.root).post(`${origin}/login`, {
      json: form,
      headers: { origin, accept: 'application/json' },
    });
    t.is(secure.statusCode, 200);
    t.regex(String(secure.headers['set-cookie']), /__Host-berth_console=[^;]+;.*secure/i);
    t.is(secure.headers['strict-transport-security'], 'max-age=31536000');
    const ready = await httpsClient(pebble.root).get(`${origin}/readyz`);
    t.is(ready.headers['strict-transport-security'], 'max-age=31536000');
    const plain = await got.post(`${berth.url}/login`, {
      json: form,
      headers: { accept: 'application/json', host: `${SITE_HOST}:${berth.berth.port}` },
      throwHttpErrors: false,
    });
    t.is(plain.statusCode, 200);
    t.regex(String(plain.headers['set-cookie']), /^berth_console=/);
    t.notRegex(String(plain.headers['set-cookie']), /secure/i);
    t.is(plain.headers['strict-transport-security'], undefined);
  },
);

test.serial(
  'preview hosts get certificates up to the weekly cap, instants none, the site’s own host always',
  async (t) => {
    const { berth, pebble, tls } = main;
    const site = await siteWithPage(berth, '<p>live</p>');
    const deployment = async (body: string) => {
      const res = await berth.owner.api.post(`v0/sites/${site.id}/deployments`, {
        json: { files: [{ path: 'web/index.html', content: body, contentType: 'text/html' }] },
      });
      t.is(res.statusCode, 201);
      return (res.body as unknown as { deployment: { shortId: string } }).deployment.shortId;
    };
    const host = (label: string) => `${label}--${site.subdomain}.${SITE_HOST}`;
    const first = host(await deployment('<p>first</p>'));
    const second = host(await deployment('<p>second</p>'));
    const orders = pebble.orders();
    t.is((await peerCertificate(tls.httpsPort, first, pebble.root)).subjectaltname, `DNS:${first}`);
    t.is(pebble.orders(), orders + 1);
    // This instance allows one preview certificate a week: the next preview host gets none, nor an order.
    await t.throwsAsync(peerCertificate(tls.httpsPort, second, pebble.root), undefined, second);
    await t.throwsAsync(peerCertificate(tls.httpsPort, host(`t${Date.now()}`), pebble.root), undefined, 'an instant');
    t.is(pebble.orders(), orders + 1, 'no order reached the CA');
    // A proxy's on-demand question gets the same answers.
    const allowed = async (domain: string) =>
      (await berth.anonymous.get('_berth/tls/allowed', { searchParams: { domain } })).statusCode;
    t.is(await allowed(first), 200);
    t.is(await allowed(second), 404);
    // The site's own host is never held back by previews.
    const own = `${site.subdomain}.${SITE_HOST}`;
    t.is((await peerCertificate(tls.httpsPort, own, pebble.root)).subjectaltname, `DNS:${own}`);
    const grants = await berth.berth.deps.db('preview_certificates').select('hostname');
    t.deepEqual(
      grants.map((g) => g.hostname),
      [first],
    );
  },
);

test.serial(
  'a short-lived certificate renews; a renewal that fails keeps the old one serving and shows in /readyz and the metrics',
  async (t) => {
    // Certificates of 24 s: renewed once a third is left, 16 s after issue.
    const setup = await setUp({ validitySeconds: 24 });
    t.teardown(() => tearDown(setup));
    const { berth, pebble, dns, tls } = setup;
    const site = await siteWithPage(berth, 'renewed');
    const name = `${site.subdomain}.${SITE_HOST}`;
    const first = await peerCertificate(tls.httpsPort, name, pebble.root);
    const second = await until(
      async () => {
        const peer = await peerCertificate(tls.httpsPort, name, pebble.root);
        return peer.serialNumber !== first.serialNumber && peer;
      },
      'the renewed certificate',
      { ms: 30_000, every: 250 },
    );
    t.is(second.subjectaltname, `DNS:${name}`);
    t.is(pebble.orders(), 2);
    // The next renewal cannot validate: the name points where nothing listens.
    await dns.addA(name, '127.0.0.2');
    const failing = await until(
      async () => {
        const ready = (await berth.anonymous.get('readyz')).body as unknown as {
          ready: boolean;
          tls: { renewalsFailing: Array<{ hostname: string; notAfter: string; error: string }> };
        };
        return ready.tls.renewalsFailing.length > 0 && ready;
      },
      'a failing renewal in /readyz',
      { ms: 30_000, every: 250 },
    );
    t.true(failing.ready, 'still ready: the old certificate serves');
    t.is(failing.tls.renewalsFailing[0]!.hostname, name);
    t.is(Date.parse(failing.tls.renewalsFailing[0]!.notAfter), Date.parse(second.validTo));
    t.is(await metric(berth, /^berth_tls_renewals_failing /), 1);
    t.is(await metric(berth, /^berth_tls_orders_total\{outcome="failed"\}/), 1);
    t.is((await peerCertificate(tls.httpsPort, name, pebble.root)).serialNumber, second.serialNumber);

    // A name no longer served is not renewed; once its certificate ends it is forgotten, and refused.
    await berth.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
    await until(
      async () => (await berth.berth.deps.db('tls_certificates').where({ hostname: name }).first()) === undefined,
      'the ended certificate removed',
      { ms: 30_000, every: 250 },
    );
    await t.throwsAsync(peerCertificate(tls.httpsPort, name, pebble.root));
    t.is(pebble.orders(), 3, 'no order for a name no longer served');
  },
);

const shared = onPostgres ? test.serial : test.skip;

shared('two nodes on one PostgreSQL serve one certificate, and either answers the other’s challenge', async (t) => {
  const dns = await startChallengeDns();
  t.teardown(() => dns.stop());
  const root = await makeDataDir(t);
  const [dirA, dirB] = [path.join(root, 'a'), path.join(root, 'b')];
  const portA = await freePort();
  // The CA validates on node A's port 80 only: B's order is validated by A answering B's challenge.
  const pebble = await startPebble({ httpPort: portA, dnsServer: dns.address });
  t.teardown(() => pebble.stop());
  const common: Partial<Config> = {
    siteHost: SITE_HOST,
    dnsServers: [dns.address],
    databaseUrl: await databaseFor(dirA),
    masterKeyFile: path.join(root, 'master.key'),
    blobDir: path.join(root, 'blobs'),
    objectStore: null,
  };
  const a = await startTestBerth({ ...common, dataDir: dirA, tls: await tlsConfigFor(pebble, portA) });
  t.teardown(() => a.dispose());
  const tlsB = await tlsConfigFor(pebble, await freePort());
  const b: Berth = await startBerth({
    ...DEFAULTS,
    port: 0,
    logLevel: 'silent',
    ...common,
    dataDir: dirB,
    tls: tlsB,
  } as Config);
  t.teardown(() => b.close());
  const site = await siteWithPage(a, 'two nodes');
  const name = `${site.subdomain}.${SITE_HOST}`;
  const fromB = await peerCertificate(tlsB.httpsPort, name, pebble.root);
  t.is(fromB.subjectaltname, `DNS:${name}`);
  const fromA = await peerCertificate(a.config.tls!.httpsPort, name, pebble.root);
  t.is(fromA.serialNumber, fromB.serialNumber, 'the same certificate on both nodes');
  t.is(pebble.orders(), 1, 'one order for the two nodes');
  const res = await httpsClient(pebble.root).get(`https://${name}:${a.config.tls!.httpsPort}/`);
  t.is(res.body, 'two nodes');
});
