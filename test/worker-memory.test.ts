// The workers' memory budget (BERTH_WORKER_MEMORY_MB): past it, the least recently used idle workers
// stop, never one serving a request, and their sites' next calls start fresh workers.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, createSite, deployFixture, startTestBerth } from './helpers/berth.ts';

const MIB = 1024 * 1024;

let t0: TestBerth;
test.before(async () => {
  // An idle worker holds about 12 MiB of its own: 64 MiB holds four or five of them.
  t0 = await startTestBerth({ workerMemoryBytes: 64 * MIB, maxWorkers: 50, spareWorkers: 0 });
});
test.after.always(async () => {
  await t0?.dispose();
});

const count = async (subdomain: string, query = '') => {
  const response = await t0.site(subdomain).get(`api/counter${query}`);
  return (JSON.parse(response.body) as { count: number }).count;
};

async function sites(n: number) {
  const list = [];
  for (let i = 0; i < n; i++) {
    const site = await createSite(t0.owner);
    await deployFixture(t0.owner, site.bucketId, 'counter');
    list.push(site.subdomain);
  }
  return list;
}

test.serial('past the budget the least recently used idle workers stop, and their sites start again', async (t) => {
  const subdomains = await sites(8);
  for (const subdomain of subdomains) t.is(await count(subdomain), 1);
  // The memory watch runs twice a second.
  await sleep(1500);
  const live = t0.berth.deps.runtime.workerCount;
  t.true(live < 8, `${live} workers alive`);
  t.true(live >= 2, `${live} workers alive: the budget stops only what it must`);
  // The most recently used worker kept its state; the least recently used one was stopped.
  t.is(await count(subdomains[7]!), 2);
  t.is(await count(subdomains[0]!), 1);
  // The watch keeps each live worker's /proc/<pid>/statm open, and no stopped one's.
  const statm = fs.readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      return [/^\/proc\/(\d+)\/statm$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`))?.[1]]
        .filter((pid) => pid !== undefined)
        .map(Number);
    } catch {
      return [];
    }
  });
  const alive = new Set(t0.berth.deps.runtime.workerPids());
  t.true(statm.length > 0);
  t.deepEqual(
    statm.filter((pid) => !alive.has(pid)),
    [],
  );
});

test.serial('a worker serving a request is not stopped for the budget', async (t) => {
  const [slow, ...others] = await sites(8);
  t.is(await count(slow!), 1);
  // The slow site's worker is the least recently used while its request waits.
  const waiting = count(slow!, '?delay=2500');
  await sleep(100);
  for (const subdomain of others) await count(subdomain);
  t.is(await waiting, 2, 'the request in flight was answered by the same worker');
});
