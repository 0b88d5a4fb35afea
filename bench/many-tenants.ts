// The many-tenant run of `make bench`: a fresh Berth with BENCH_TENANTS sites (1,000), each with the
// hello-world function, called uniformly at random. First from cold (every site's first call starts
// its worker, 50 connections at once, no warm-up): the latencies of cold calls (sent before their site
// first answered) and of warm ones. Then warm, against the same load on 10 of those sites: the req/s
// ratio, and how many workers started meanwhile (each a call that found its worker gone). Last, after
// a quiet while, the memory of every idle warm worker: resident (RSS), private, and proportional (PSS:
// private plus its share of the pages every Deno process maps from the same executable), and how many
// such workers fit in 16 GiB.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type got from 'got';
import { commandLine, processTree, rssBytes, runLoad, SERVER_CORE, type Server, watchServer } from './harness.ts';
import type { LoadResult, LoadTarget } from './load-worker.ts';
import type { Comparison } from './report.ts';

export interface WorkerMemory {
  workers: number;
  /** Medians and largest values, in bytes. */
  rss: { p50: number; max: number };
  private: { p50: number; max: number };
  pss: { p50: number; max: number };
  /** Resident memory of Berth's Node process, and PSS of its whole tree. */
  serverRss: number;
  treePss: number;
  /** How many idle warm workers of this PSS fit in 16 GiB. */
  fitIn16GiB: number;
  /** How long the workers had been idle when read. */
  idleSeconds: number;
}

export interface ManyTenantsResults {
  sites: number;
  fewSites: number;
  setupSeconds: number;
  fromCold: LoadResult & { serverCpuShare: number };
  warm: Comparison;
  /** Workers started during the warm comparison (both sides, every attempt): calls that were cold. */
  workerStartsWhileWarm: number;
  memory: WorkerMemory;
}

interface BerthUnderTest {
  server: Server;
  origin: string;
  port: number;
  api: typeof got;
  accountId: string;
  /** Started with BERTH_METRICS_TOKEN set to this. */
  metricsToken: string;
}

interface Options {
  berth: BerthUnderTest;
  sites: number;
  fewSites: number;
  connections: number;
  coldSeconds: number;
  idleSeconds: number;
  handler: Buffer;
  compare: (name: string, baseline: [Server, LoadTarget], berth: [Server, LoadTarget]) => Promise<Comparison>;
  noteFailures: (r: LoadResult) => void;
}

const MIB = 2 ** 20;

/** Creates the sites and their functions, 16 API calls at a time. */
async function createSites(o: Options): Promise<string[]> {
  const names = Array.from({ length: o.sites }, (_, i) => `tenant-${String(i).padStart(4, '0')}`);
  let next = 0;
  const one = async () => {
    while (next < names.length) {
      const name = names[next++]!;
      const site = await o.berth.api
        .post('v0/sites', { json: { accountId: o.berth.accountId, name, subdomain: name } })
        .json<{ bucketId: string }>();
      await o.berth.api.put(`v0/buckets/${site.bucketId}/objects/api/hello.ts`, { body: o.handler });
    }
  };
  await Promise.all(Array.from({ length: 16 }, one));
  return names.map((name) => `${name}.localhost:${o.berth.port}`);
}

async function workersStarted(o: Options): Promise<number> {
  const text = await o.berth.api
    .get('metrics', { headers: { authorization: `Bearer ${o.berth.metricsToken}` } })
    .text();
  return Number(/^berth_workers_started_total (\S+)$/m.exec(text)?.[1] ?? NaN);
}

function smapsRollup(pid: number): { pss: number; private: number } | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  } catch {
    return undefined;
  }
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
  return { pss: kib('Pss'), private: kib('Private_Clean') + kib('Private_Dirty') };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

function workerMemory(server: Server, idleSeconds: number): WorkerMemory {
  const rows: Array<{ rss: number; pss: number; private: number }> = [];
  let treePss = 0;
  for (const pid of processTree(server.pid)) {
    const rollup = smapsRollup(pid);
    const rss = rssBytes(pid);
    if (!rollup || rss === undefined) continue;
    treePss += rollup.pss;
    const cmd = commandLine(pid);
    if (pid !== server.pid && /\bdeno\b/.test(cmd) && !cmd.includes('sqlite-host')) rows.push({ rss, ...rollup });
  }
  const of = (key: 'rss' | 'pss' | 'private') => ({
    p50: median(rows.map((r) => r[key])),
    max: Math.max(...rows.map((r) => r[key])),
  });
  const pss = of('pss');
  return {
    workers: rows.length,
    rss: of('rss'),
    private: of('private'),
    pss,
    serverRss: rssBytes(server.pid) ?? NaN,
    treePss,
    fitIn16GiB: Math.floor((16 * 1024 * MIB) / pss.p50),
    idleSeconds,
  };
}

export async function manyTenants(o: Options): Promise<ManyTenantsResults> {
  const { berth } = o;
  const setupStarted = performance.now();
  const hosts = await createSites(o);
  const setupSeconds = (performance.now() - setupStarted) / 1000;
  console.log(`  ${o.sites} sites with a function each, created in ${setupSeconds.toFixed(1)} s`);
  const target = (label: string, list: string[]): LoadTarget => ({
    label,
    origin: berth.origin,
    path: '/api/hello',
    connections: o.connections,
    hosts: list,
  });

  // From cold: no warm-up, every site's first call starts its worker; the run ends once every site
  // has answered (or after coldSeconds), so the warm runs below find every worker started.
  let stop: ReturnType<typeof watchServer> | undefined;
  const report = await runLoad(
    {
      targets: [{ ...target(`${o.sites} sites from cold`, hosts), untilEveryHostAnswered: true }],
      seconds: o.coldSeconds,
      warmupSeconds: 0,
    },
    () => (stop = watchServer(berth.server, SERVER_CORE)),
  );
  const watched = stop!();
  berth.server.checkAlive();
  const fromCold = { ...report.results[0]!, serverCpuShare: watched.cpu };
  o.noteFailures(fromCold);
  const byHost = fromCold.byHost!;
  console.log(
    `  from cold, ${fromCold.seconds.toFixed(1)} s: ${byHost.hostsAnswered} of ${o.sites} sites answered; cold calls p50 ${byHost.cold.p50.toFixed(1)} ms p99 ${byHost.cold.p99.toFixed(1)} ms (n=${byHost.cold.n}), ` +
      `warm calls p50 ${byHost.warm.p50.toFixed(2)} ms p99 ${byHost.warm.p99.toFixed(1)} ms (n=${byHost.warm.n})`,
  );

  const before = await workersStarted(o);
  const warm = await o.compare(
    `${o.sites} sites ÷ ${o.fewSites} sites, warm`,
    [berth.server, target(`${o.fewSites} sites, uniformly`, hosts.slice(0, o.fewSites))],
    [berth.server, target(`${o.sites} sites, uniformly`, hosts)],
  );
  const workerStartsWhileWarm = (await workersStarted(o)) - before;
  console.log(`  workers started during the warm runs: ${workerStartsWhileWarm}`);

  await sleep(o.idleSeconds * 1000);
  const memory = workerMemory(berth.server, o.idleSeconds);
  const mib = (n: number) => `${(n / MIB).toFixed(1)} MiB`;
  console.log(
    `  ${memory.workers} idle warm workers after ${o.idleSeconds} s: RSS p50 ${mib(memory.rss.p50)} (max ${mib(memory.rss.max)}), private p50 ${mib(memory.private.p50)}, PSS p50 ${mib(memory.pss.p50)} ` +
      `(max ${mib(memory.pss.max)}); Berth's node process ${mib(memory.serverRss)}, the whole tree ${mib(memory.treePss)} PSS; ${memory.fitIn16GiB} such workers fit in 16 GiB\n`,
  );
  return { sites: o.sites, fewSites: o.fewSites, setupSeconds, fromCold, warm, workerStartsWhileWarm, memory };
}
