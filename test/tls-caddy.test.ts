// HTTPS by a proxy in front: Debian's caddy with on-demand certificates from pebble (real HTTP-01 on
// Caddy's port 80), asking Berth's /_berth/tls/allowed before each one, as docs/deploy.md shows. A new
// site's subdomain and a verified custom domain are served through it over HTTPS; an unknown name gets
// no certificate and costs no order.
import test from 'ava';
import got from 'got';
import { createSite, putFile, type TestBerth, startTestBerth } from './helpers/berth.ts';
import { type Caddy, startCaddy } from './helpers/caddy.ts';
import { type ChallengeDns, startChallengeDns } from './helpers/challenge-dns.ts';
import { type Pebble, startPebble } from './helpers/pebble.ts';
import { freePort } from './helpers/ports.ts';
import { httpsClient, peerCertificate } from './helpers/tls-client.ts';
import { until } from './helpers/until.ts';

const SITE_HOST = 'sites.example.com';
const METRICS_TOKEN = 'caddy-test-metrics-token';

let dns: ChallengeDns;
let pebble: Pebble;
let berth: TestBerth;
let caddy: Caddy;
let httpsPort: number;

test.before(async () => {
  dns = await startChallengeDns();
  const httpPort = await freePort();
  httpsPort = await freePort();
  pebble = await startPebble({ httpPort, tlsPort: httpsPort, dnsServer: dns.address });
  // Behind Caddy: the scheme and client address are the ones it forwards.
  berth = await startTestBerth({
    siteHost: SITE_HOST,
    dnsServers: [dns.address],
    trustProxy: true,
    metricsToken: METRICS_TOKEN,
  });
  caddy = await startCaddy({
    httpPort,
    httpsPort,
    directory: pebble.directory,
    caFile: pebble.caFile,
    berth: `127.0.0.1:${berth.berth.port}`,
  });
});

test.after.always(async () => {
  await caddy?.stop();
  await berth?.dispose();
  await pebble?.stop();
  await dns?.stop();
});

/** The page at `name` through Caddy, once it has its certificate. */
function throughCaddy(name: string) {
  const client = httpsClient(pebble.root);
  return until(
    async () => {
      try {
        return await client.get(`https://${name}:${httpsPort}/`);
      } catch {
        return false;
      }
    },
    `${name} through caddy`,
    { ms: 30_000, every: 200 },
  );
}

test.serial('a new site’s subdomain is served through Caddy over HTTPS', async (t) => {
  const site = await createSite(berth.owner);
  await putFile(berth.owner, site.bucketId, 'web/index.html', '<p>via caddy</p>', 'text/html');
  const name = `${site.subdomain}.${SITE_HOST}`;
  t.is((await berth.anonymous.get('_berth/tls/allowed', { searchParams: { domain: name } })).statusCode, 200);
  const res = await throughCaddy(name);
  t.is(res.statusCode, 200);
  t.is(res.body, '<p>via caddy</p>');
  t.is(res.headers['strict-transport-security'], 'max-age=31536000', 'HTTPS as Caddy forwarded it');
  t.is((await peerCertificate(httpsPort, name, pebble.root)).subjectaltname, `DNS:${name}`);
});

test.serial('a verified custom domain is served through Caddy over HTTPS', async (t) => {
  const site = await createSite(berth.owner);
  await putFile(berth.owner, site.bucketId, 'web/index.html', '<p>shop via caddy</p>', 'text/html');
  const hostname = 'shop.example.org';
  const { domain } = (await berth.owner.api.post(`v0/sites/${site.id}/domains`, { json: { hostname } }))
    .body as unknown as { domain: { verification: { name: string; value: string } } };
  const ask = () => berth.anonymous.get('_berth/tls/allowed', { searchParams: { domain: hostname } });
  t.is((await ask()).statusCode, 404, 'not while it is PENDING');
  await dns.setTxt(domain.verification.name, domain.verification.value);
  t.is((await berth.owner.api.post(`v0/sites/${site.id}/domains/${hostname}/verify`)).statusCode, 200);
  t.is((await ask()).statusCode, 200);
  const res = await throughCaddy(hostname);
  t.is(res.body, '<p>shop via caddy</p>');
});

/** How many times /_berth/tls/allowed answered 404. */
async function refusals(): Promise<number> {
  const text = (
    await got(`${berth.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, responseType: 'text' })
  ).body;
  const line = text.split('\n').find((l) => l.includes('route="/_berth/tls/allowed",status="404"'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

test.serial('an unknown name is refused: Caddy asks Berth, gets a 404 and orders nothing', async (t) => {
  const orders = pebble.orders();
  const names = ['nobody.example.net', `nosuchsite.${SITE_HOST}`];
  const asked = await refusals();
  for (const name of names) await t.throwsAsync(peerCertificate(httpsPort, name, pebble.root), undefined, name);
  t.true((await refusals()) >= asked + names.length, 'Caddy asked Berth about each name');
  t.is(pebble.orders(), orders);
  for (const name of names) {
    const ask = await berth.anonymous.get('_berth/tls/allowed', { searchParams: { domain: name } });
    t.is(ask.statusCode, 404);
    t.is((ask.body as unknown as { error: { code: string } }).error.code, 'not_found');
  }
});
