// Spare workers: Deno processes started ahead of need that a cold call takes and gives its function.
// They answer for the right site, are refilled without passing their number or the worker cap, serve
// one function version each for good, stop with the server, and with none configured nothing changes.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { ConfigError, DEFAULTS, loadConfig } from '../control-plane/config.ts';
import { type TestBerth, createSite, deployFixture, json, putFile, startTestBerth } from './helpers/berth.ts';
import { processesMentioning } from './helpers/process.ts';
import { until } from './helpers/until.ts';

const runtime = (berth: TestBerth) => berth.berth.deps.runtime;
const standby = (berth: TestBerth, count: number) =>
  until(() => runtime(berth).sparePids().length === count && runtime(berth).sparePids(), `${count} spares on standby`);
const gone = (pid: number) => !fs.existsSync(`/proc/${pid}`);

/** Calls a function and returns the response with the pid of the worker that was started for it. */
async function coldCall(
  berth: TestBerth,
  subdomain: string,
  urlPath: string,
  options: { method?: 'GET' | 'POST'; body?: string } = {},
) {
  const before = new Set(runtime(berth).workerPids());
  const res = await berth.site(subdomain)(urlPath, {
    method: options.method ?? 'GET',
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const pid = runtime(berth)
    .workerPids()
    .find((p) => !before.has(p));
  return { res, pid: pid! };
}

const WHOAMI = `export default async function (req: Request, ctx: any): Promise<Response> {
  if (req.method === 'POST') await ctx.data.writeText('mine.txt', await req.text());
  return Response.json({ siteId: ctx.siteId, mine: await ctx.data.readText('mine.txt') });
}
`;

async function files(berth: TestBerth, bucketId: string): Promise<string[]> {
  return json<{ files: Array<{ path: string }> }>(
    await berth.owner.read.get(`v0/buckets/${bucketId}/objects`),
  ).files.map((f) => f.path);
}

test('a cold call is served by a spare bound to its own site: its ctx reads and writes that site only', async (t) => {
  const berth = await startTestBerth({ spareWorkers: 2 });
  t.teardown(() => berth.dispose());
  const [a, b] = [await createSite(berth.owner), await createSite(berth.owner)];
  for (const site of [a, b]) await putFile(berth.owner, site.bucketId, 'api/whoami.ts', WHOAMI, 'text/typescript');
  const onStandby = await standby(berth, 2);

  const fromA = await coldCall(berth, a.subdomain, 'api/whoami', { method: 'POST', body: 'written by a' });
  t.is(fromA.res.statusCode, 200);
  t.deepEqual(JSON.parse(fromA.res.body), { siteId: a.id, mine: 'written by a' });
  const fromB = await coldCall(berth, b.subdomain, 'api/whoami');
  t.deepEqual(JSON.parse(fromB.res.body), { siteId: b.id, mine: null }, 'b’s ctx does not see what a wrote');
  t.deepEqual(new Set([fromA.pid, fromB.pid]), new Set(onStandby), 'each call was served by one of the spares');
  t.deepEqual(await files(berth, a.bucketId), ['api/whoami.ts', 'data/mine.txt']);
  t.deepEqual(await files(berth, b.bucketId), ['api/whoami.ts']);
  // Warm now: the same workers answer again.
  t.deepEqual(JSON.parse((await berth.site(a.subdomain).get('api/whoami')).body), {
    siteId: a.id,
    mine: 'written by a',
  });
  t.deepEqual(runtime(berth).workerPids().sort(), [fromA.pid, fromB.pid].sort());
});

test('spares are refilled after they are taken, never more than configured, and a taken one is never a spare again', async (t) => {
  const berth = await startTestBerth({ spareWorkers: 2 });
  t.teardown(() => berth.dispose());
  const sites = await Promise.all([0, 1, 2].map(() => createSite(berth.owner)));
  for (const site of sites) await deployFixture(berth.owner, site.bucketId, 'counter');
  const first = await standby(berth, 2);
  let most = 0;
  const taken = new Set<number>();
  const watch = setInterval(() => {
    most = Math.max(most, runtime(berth).spareCount);
    for (const pid of runtime(berth).sparePids()) if (taken.has(pid)) t.fail(`worker ${pid} is a spare again`);
  }, 5);
  t.teardown(() => clearInterval(watch));

  // Three new functions at once: two take the spares, the third starts a spare of its own.
  const before = new Set(runtime(berth).workerPids());
  const answers = await Promise.all(sites.map((site) => berth.site(site.subdomain).get('api/counter')));
  for (const answer of answers) t.is(JSON.parse(answer.body).count, 1);
  const workers = runtime(berth)
    .workerPids()
    .filter((pid) => !before.has(pid));
  for (const pid of workers) taken.add(pid);
  t.is(workers.length, 3);
  t.is(workers.filter((pid) => first.includes(pid)).length, 2, 'both spares were taken');

  const refilled = await standby(berth, 2);
  t.is(refilled.filter((pid) => first.includes(pid) || taken.has(pid)).length, 0, 'the new spares are new processes');
  await sleep(300);
  clearInterval(watch);
  t.true(most <= 2, `at most 2 spares at once, saw ${most}`);
  t.deepEqual(runtime(berth).sparePids().sort(), refilled.sort());
});

test('a spare serves one function version for good: a redeploy goes to another, and the old one stops', async (t) => {
  const berth = await startTestBerth({ spareWorkers: 1 });
  t.teardown(() => berth.dispose());
  const site = await createSite(berth.owner);
  await deployFixture(berth.owner, site.bucketId, 'counter');
  const spare = (await standby(berth, 1))[0]!;
  const v1 = await coldCall(berth, site.subdomain, 'api/counter');
  t.is(v1.pid, spare);
  t.is(JSON.parse(v1.res.body).version, 'v1');

  const source = (
    await berth.owner.read.get(`v0/buckets/${site.bucketId}/objects/api/counter.ts`, { responseType: 'text' })
  ).body;
  await putFile(berth.owner, site.bucketId, 'api/counter.ts', source.replace("'v1'", "'v2'"));
  const next = (await standby(berth, 1))[0]!;
  const v2 = await coldCall(berth, site.subdomain, 'api/counter');
  t.is(JSON.parse(v2.res.body).version, 'v2');
  t.is(v2.pid, next, 'the new version took the next spare');
  await until(() => gone(spare), 'the retired worker to stop');
  t.false(runtime(berth).sparePids().includes(spare));
});

test('spares count against the worker cap and only fill free slots; a full pool evicts as before', async (t) => {
  const berth = await startTestBerth({ spareWorkers: 3, maxWorkers: 2 });
  t.teardown(() => berth.dispose());
  // What the runtime keeps alive (a process it has stopped may take a moment more to exit).
  let most = 0;
  const watch = setInterval(() => (most = Math.max(most, runtime(berth).workerCount + runtime(berth).spareCount)), 5);
  t.teardown(() => clearInterval(watch));
  await standby(berth, 2);
  const sites = await Promise.all([0, 1, 2].map(() => createSite(berth.owner)));
  for (const site of sites) await deployFixture(berth.owner, site.bucketId, 'counter');
  for (const site of sites) t.is(JSON.parse((await berth.site(site.subdomain).get('api/counter')).body).count, 1);
  t.is(runtime(berth).workerCount, 2);
  t.is(runtime(berth).spareCount, 0, 'no slot is free for a spare');
  // The first site's worker was the least recently used: it made room for the third.
  t.is(JSON.parse((await berth.site(sites[0]!.subdomain).get('api/counter')).body).count, 1);
  await sleep(300);
  clearInterval(watch);
  t.true(most <= 2, `at most 2 workers and spares at once, saw ${most}`);
});

test('stopping the server stops every spare, those still booting included: no Deno process is left', async (t) => {
  for (const wait of [true, false]) {
    const berth = await startTestBerth({ spareWorkers: 3 });
    t.teardown(() => fs.promises.rm(berth.dataDir, { recursive: true, force: true }));
    const pids: number[] = [];
    if (wait) {
      const site = await createSite(berth.owner);
      await deployFixture(berth.owner, site.bucketId, 'echo');
      await standby(berth, 3);
      t.is((await berth.site(site.subdomain).get('api/echo')).statusCode, 200);
      pids.push(...(await standby(berth, 3)), ...runtime(berth).workerPids());
      t.is(pids.length, 4);
    }
    await berth.berth.close();
    await until(
      () => pids.every(gone) && processesMentioning(berth.dataDir).length === 0,
      'every Deno process to stop',
    );
    t.deepEqual(
      processesMentioning(berth.dataDir),
      [],
      wait ? 'spares and workers stopped' : 'a spare stopped while booting',
    );
  }
});

test('with no spares configured, nothing starts ahead of need and a cold call starts its own worker', async (t) => {
  const berth = await startTestBerth({ spareWorkers: 0 });
  t.teardown(() => berth.dispose());
  const site = await createSite(berth.owner);
  await deployFixture(berth.owner, site.bucketId, 'echo');
  await sleep(500);
  t.deepEqual(processesMentioning(berth.dataDir), [], 'no Deno process before the first call');
  const sockets = path.join(berth.dataDir, 'runtime', 'sockets');
  const created: string[] = [];
  const watcher = fs.watch(sockets, (_event, name) => name && created.push(name));
  const { res, pid } = await coldCall(berth, site.subdomain, 'api/echo');
  watcher.close();
  t.is(res.statusCode, 200);
  t.true(
    created.length > 0 && processesMentioning(berth.dataDir).includes(pid),
    'the call made its worker and its socket',
  );
  t.true(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`--allow-read=${path.join(sockets, created[0]!)}`));
  await sleep(500);
  t.deepEqual(processesMentioning(berth.dataDir), [pid], 'and no spare followed it');
  t.is(runtime(berth).spareCount, 0);
});

test('BERTH_SPARE_WORKERS sets the number of spares: 4 by default, 0 for none', (t) => {
  t.is(DEFAULTS.spareWorkers, 4);
  t.is(loadConfig({}).spareWorkers, 4);
  t.is(loadConfig({ BERTH_SPARE_WORKERS: '0' }).spareWorkers, 0);
  t.is(loadConfig({ BERTH_SPARE_WORKERS: '8' }).spareWorkers, 8);
  for (const value of ['-1', '65', 'two', '1.5']) {
    t.regex(
      t.throws(() => loadConfig({ BERTH_SPARE_WORKERS: value }), { instanceOf: ConfigError })!.message,
      /^BERTH_SPARE_WORKERS must be an integer from 0 to 64/,
    );
  }
});
