// The warm pool: reuse, concurrency, idle eviction, the worker cap, and redeploys that do not fail
// requests in flight.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, createSite, deployFixture, putFile, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth({ functionIdleMs: 400, maxWorkers: 2 });
});
test.after.always(async () => {
  await t0?.dispose();
});

const count = async (subdomain: string, query = '') =>
  JSON.parse((await t0.site(subdomain).get(`api/counter${query}`)).body) as {
    count: number;
    version: string;
    concurrent?: number;
  };

test.serial('a worker is reused across requests and serves them concurrently', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'counter');
  t.is((await count(site.subdomain)).count, 1);
  t.is((await count(site.subdomain)).count, 2);
  // Five requests that can only finish once all five are inside the handler together.
  const together = await Promise.all(Array.from({ length: 5 }, () => count(site.subdomain, '?gather=5')));
  t.deepEqual(
    together.map((r) => r.concurrent),
    [5, 5, 5, 5, 5],
  );
  t.is((await count(site.subdomain)).count, 8);
});

test.serial('idle workers are evicted and the next request starts a fresh one', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'counter');
  await count(site.subdomain);
  t.is((await count(site.subdomain)).count, 2);
  await sleep(1600);
  t.is(t0.berth.deps.runtime.workerCount, 0);
  t.is((await count(site.subdomain)).count, 1);
});

test.serial('live workers are capped; the least recently used idle one makes room', async (t) => {
  const sites = [];
  for (let i = 0; i < 3; i++) {
    const site = await createSite(t0.owner);
    await deployFixture(t0.owner, site.bucketId, 'counter');
    sites.push(site);
  }
  for (const site of sites) t.is((await count(site.subdomain)).count, 1);
  t.true(t0.berth.deps.runtime.workerCount <= 2);
  // The first site's worker was the least recently used: it was evicted.
  t.is((await count(sites[0]!.subdomain)).count, 1);
  t.is((await count(sites[2]!.subdomain)).count, 2);
});

test.serial('a redeploy switches versions without failing requests in flight', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'counter');
  const slow = count(site.subdomain, '?delay=800');
  await sleep(200);
  const source = (
    await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/api/counter.ts`, { responseType: 'text' })
  ).body;
  const written = await putFile(t0.owner, site.bucketId, 'api/counter.ts', source.replace("'v1'", "'v2'"));
  t.is(written.deployment?.status, 'READY');
  const fresh = await count(site.subdomain);
  t.is(fresh.version, 'v2');
  const finished = await slow;
  t.is(finished.version, 'v1', 'the request in flight finished on the old version');
});
