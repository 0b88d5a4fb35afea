// Functions' outbound traffic through the egress proxy, against a real server on a public-looking
// address (11.0.0.2, in a network namespace the test makes, reached over a veth pair) and names served
// by a DNS server of the test's own: public targets are reached, redirects included; every private,
// loopback, link-local, unique-local, multicast and IPv4-in-IPv6 target is refused, by name, by
// literal address in any notation and behind a redirect; raw connections go nowhere; a site's
// requests in flight are bounded, and a request aborted while it waits for a turn takes none; and
// requests, bytes and refusals are counted and logged.
import test from 'ava';
import got from 'got';
import { type TestBerth, createSite, deployFixture, startTestBerth } from './helpers/berth.ts';
import { type DnsServer, startDnsServer } from './helpers/dns-server.ts';
import { type PublicHost, PUBLIC_ADDRESS, startPublicHost } from './helpers/public-host.ts';
import { until } from './helpers/until.ts';

const TOKEN = 'metrics-token-for-the-egress-tests-01';
const FAR = PUBLIC_ADDRESS;

let t0: TestBerth;
let dns: DnsServer;
let far: PublicHost | undefined;
let site: { id: string; subdomain: string; bucketId: string };

test.before(async () => {
  far = await startPublicHost();
  dns = await startDnsServer({
    'far.test': { A: [FAR] },
    'loopback.test': { A: ['127.0.0.1'] },
    'private.test': { A: ['10.1.2.3'] },
    'shared.test': { A: ['100.64.0.1'] },
    'metadata.test': { A: ['169.254.169.254'] },
    'zero.test': { A: ['0.0.0.0'] },
    'multicast.test': { A: ['224.0.0.1'] },
    'loopback6.test': { AAAA: ['::1'] },
    'unique-local.test': { AAAA: ['fd00:ec2::254'] },
    'link-local6.test': { AAAA: ['fe80::1'] },
    'mapped.test': { AAAA: ['::ffff:127.0.0.1'] },
    'nat64.test': { AAAA: ['64:ff9b::7f00:1'] },
    // One public address and one private: refused, whichever a connection would have used.
    'mixed.test': { A: [FAR, '10.0.0.1'] },
  });
  t0 = await startTestBerth({ egressDnsServers: [dns.address], egressConnectionsPerSite: 2, metricsToken: TOKEN });
  site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'fetcher');
});

test.after.always(async () => {
  await t0?.dispose();
  await dns?.close();
  await far?.stop();
});

type Outcome = {
  status?: number;
  body?: string;
  url?: string;
  redirected?: boolean;
  location?: string | null;
  error?: { name: string; code?: string; message: string };
  connected?: boolean;
};

const scrape = async () => (await got.get(`${t0.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).body;

/** A sample's value in a scrape of /metrics; 0 when the series does not exist yet. */
const value = (metrics: string, line: string) =>
  Number(new RegExp(`^${line.replace(/[{}]/g, '\\$&')} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);

const egressCount = async (siteId: string, outcome: string) =>
  value(await scrape(), `berth_egress_requests_total{site="${siteId}",outcome="${outcome}"}`);

async function fetchFrom(body: Record<string, unknown>, from = site): Promise<Outcome> {
  const res = await t0.site(from.subdomain).post('api/fetcher', { json: body });
  if (res.statusCode !== 200) throw new Error(`the function answered ${res.statusCode}: ${res.body}`);
  return JSON.parse(res.body) as Outcome;
}

test('a public name is reached through the proxy, with bodies both ways and nothing of the proxy showing', async (t) => {
  t.like(await fetchFrom({ url: 'http://far.test/hello' }), {
    status: 200,
    body: 'hello from far away',
    url: 'http://far.test/hello',
    redirected: false,
  });
  const echoed = await fetchFrom({ url: `http://${FAR}/echo`, init: { method: 'POST', body: 'sent by a function' } });
  t.is(echoed.status, 200);
  t.deepEqual(JSON.parse(echoed.body!), { method: 'POST', host: FAR, body: 'sent by a function', egressHeaders: [] });
});

// Serial: the public server's count of requests in flight, which another test reads, is of all sites.
test.serial("a site's connections are kept between its requests, and never carry another site's", async (t) => {
  // Two sites of their own: the other tests' requests run meanwhile on the shared one.
  const [one, other] = [await createSite(t0.owner), await createSite(t0.owner)];
  for (const each of [one, other]) await deployFixture(t0.owner, each.bucketId, 'fetcher');
  const connections = async (from: typeof site) => {
    const ports: string[] = [];
    for (let i = 0; i < 4; i++) ports.push((await fetchFrom({ url: 'http://far.test/connection' }, from)).body!);
    return ports;
  };
  const mine = await connections(one);
  const theirs = await connections(other);
  t.is(new Set(mine).size, 1, 'one request after another goes on the same connection');
  t.is(new Set(theirs).size, 1);
  t.not(theirs[0], mine[0], 'each site has a connection of its own');
});

test('every name that resolves to a refused range is refused, and nothing is sent', async (t) => {
  for (const name of [
    'loopback',
    'private',
    'shared',
    'metadata',
    'zero',
    'multicast',
    'loopback6',
    'unique-local',
    'link-local6',
    'mapped',
    'nat64',
    'mixed',
  ]) {
    const outcome = await fetchFrom({ url: `http://${name}.test/` });
    t.is(outcome.error?.name, 'TypeError', name);
    t.is(outcome.error?.code, 'EGRESS_REFUSED', name);
    t.regex(outcome.error!.message, /not a public address/, name);
  }
  t.is((await fetchFrom({ url: 'http://nowhere.test/' })).error?.code, 'EGRESS_FAILED');
});

test('literal addresses are refused in every notation, the control plane included', async (t) => {
  const port = new URL(t0.url).port;
  for (const url of [
    `http://127.0.0.1:${port}/healthz`,
    'http://2130706433/',
    'http://0x7f.1/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:a01:203]/',
    'http://[fd00:ec2::254]/latest/meta-data/',
    'http://[fe80::1]/',
    'https://169.254.169.254/',
    'http://10.0.0.1/',
  ]) {
    t.is((await fetchFrom({ url })).error?.code, 'EGRESS_REFUSED', url);
  }
});

test('redirects are followed hop by hop, each checked: a redirect to a refused address is refused', async (t) => {
  const to = (target: string, status = 302) =>
    `http://far.test/redirect?status=${status}&to=${encodeURIComponent(target)}`;
  t.like(await fetchFrom({ url: to('http://far.test/hello') }), {
    status: 200,
    body: 'hello from far away',
    url: 'http://far.test/hello',
    redirected: true,
  });
  t.like(await fetchFrom({ url: to('http://far.test/echo', 307), init: { method: 'POST', body: 'again' } }), {
    status: 200,
    redirected: true,
  });
  const refused = await fetchFrom({ url: to(`http://127.0.0.1:${new URL(t0.url).port}/healthz`) });
  t.is(refused.error?.code, 'EGRESS_REFUSED');
  t.is((await fetchFrom({ url: to('http://[fd00:ec2::254]/', 301) })).error?.code, 'EGRESS_REFUSED');
  t.like(await fetchFrom({ url: to('http://10.0.0.1/'), init: { redirect: 'manual' } }), {
    status: 302,
    location: 'http://10.0.0.1/',
  });
  t.is(
    (await fetchFrom({ url: to('http://far.test/hello'), init: { redirect: 'error' } })).error?.code,
    'EGRESS_REDIRECT',
  );
});

test('a raw connection goes nowhere, not even to a public address', async (t) => {
  for (const connect of [
    { hostname: FAR, port: 80 },
    { hostname: 'fd00:ec2::254', port: 80 },
    { hostname: '127.0.0.1', port: Number(new URL(t0.url).port) },
  ]) {
    t.is((await fetchFrom({ connect })).error?.name, 'NotCapable', JSON.stringify(connect));
  }
});

test('a site’s requests in flight are bounded; the rest wait for a turn and are answered', async (t) => {
  await fetchFrom({ url: 'http://far.test/most-in-flight' });
  const all = (await t0
    .site(site.subdomain)
    .post('api/fetcher', { json: { url: 'http://far.test/slow?ms=300', many: 6 } })
    .json()) as Outcome[];
  t.true(all.every((o) => o.status === 200 && o.body === 'slow'));
  t.is((await fetchFrom({ url: 'http://far.test/most-in-flight' })).body, '2');
});

// Serial: its held requests count in the public server's requests in flight.
test.serial(
  'a fetch aborted while it waits for a turn gives its place up, and the site’s turns stay free',
  async (t) => {
    const own = await createSite(t0.owner);
    await deployFixture(t0.owner, own.bucketId, 'fetcher');
    const held = async () => Number((await got.get(`http://${FAR}/held`)).body);
    const fetchMany = async (body: Record<string, unknown>) => (await fetchFrom(body, own)) as unknown as Outcome[];
    // Both of the site's turns are taken by requests the public server holds.
    const holding = fetchMany({ url: 'http://far.test/hold', many: 2 });
    await until(async () => (await held()) === 2, 'both turns held');
    // More requests than turns wait, and are aborted while they wait. Were one of them sent after all,
    // the public server would hold it, and the turn it took, to the end.
    const gaveUp = await fetchMany({ url: 'http://far.test/hold', many: 4, abortAfterMs: 1000 });
    t.deepEqual(
      gaveUp.map((o) => o.error?.name),
      Array(4).fill('TimeoutError'),
    );
    // The proxy learns of each abort when the function's connection closes, which may come after the
    // function's answer: the held requests are let go once it has counted all four as abandoned.
    await until(async () => (await egressCount(own.id, 'abandoned')) === 4, 'four requests abandoned');
    await got.get(`http://${FAR}/let-go`);
    t.true((await holding).every((o) => o.status === 200 && o.body === 'let go'));
    // Every turn is free again: as many requests as turns are answered (bounded, so a leak fails, not hangs).
    const later = await fetchMany({ url: 'http://far.test/hello', many: 2, abortAfterMs: 10_000 });
    t.deepEqual(
      later.map((o) => o.body ?? o.error?.name),
      Array(2).fill('hello from far away'),
    );
    t.is(await held(), 0, 'no request that gave up was sent');
  },
);

test('requests, bytes and refusals are counted by site, and refusals reach the site’s logs', async (t) => {
  await fetchFrom({ url: 'http://far.test/hello' });
  await fetchFrom({ url: 'http://metadata.test/latest/meta-data/' });
  const metrics = await scrape();
  t.true(value(metrics, `berth_egress_requests_total{site="${site.id}",outcome="forwarded"}`) >= 1);
  t.true(value(metrics, `berth_egress_requests_total{site="${site.id}",outcome="refused"}`) >= 1);
  t.true(value(metrics, `berth_egress_bytes_total{site="${site.id}",direction="in"}`) >= 'hello from far away'.length);
  const logs = await until(async () => {
    const body = (await t0.owner.read.get(`v0/sites/${site.id}/logs`).json()) as {
      logs: Array<{ message: string; level: string }>;
    };
    return body.logs.find((l) => l.message.includes('metadata.test'));
  }, 'the refusal in the site’s logs');
  t.is(logs.level, 'warn');
  t.regex(logs.message, /fetch refused: metadata\.test: 169\.254\.169\.254 is in the link-local range/);
});
