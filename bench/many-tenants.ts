// The many-tenant run of `make bench`: a fresh Berth with BENCH_TENANTS sites (1,000), each with the
// hello-world function. In order:
// - what one worker's start costs the server's core with no site's worker alive: sites called one at a
//   time, each the first call of its site;
// - the cold storm: every site called once, 16 at a time, from cold: the wall time and the first calls'
//   latencies;
// - the same start cost again, now with every site's worker alive (the ratio of the two is how much more
//   a start costs for the workers alive);
// - warm, uniformly at random, against the same load on 10 of those sites: the req/s ratio, and how many
//   workers started meanwhile (each a call that found its worker gone);
// - after a quiet while, the memory of every idle warm worker: resident (RSS), private, and proportional
//   (PSS: private plus its share of the pages every Deno process maps from the same executable), and how
//   many such workers fit in 16 GiB;
// - every site's function deployed anew (each worker then retires), and 50 connections for 60 s on all
//   the sites at random: every site's first call starts its worker again; the latencies of cold calls
//   (sent before their site first answered) and of warm ones, and the answers slower than 5 s;
// - more sites made (10,000 in all, BENCH_TENANTS_LARGE) and all of them called at random under 50
//   connections for 60 s: req/s, failures, latencies, workers started, memory.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import got from 'got';
import {
  commandLine,
  coreBusySeconds,
  processCpuSeconds,
  processTree,
  rssBytes,
  runLoad,
  SERVER_CORE,
  type Server,
  watchServer,
} from './harness.ts';
import { type Latencies, type LoadResult, type LoadTarget, Samples } from './load-worker.ts';
import type { Comparison } from './comparison.ts';

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

/** What starting a worker costs, measured one start at a time (each the first call of a site of its own). */
export interface StartCost {
  /** Deno processes alive under Berth meanwhile (workers, spares, database processes). */
  alive: number;
  starts: number;
  /**
   * CPU time of the server's core per start, in ms: its busy time from the call until the spare it
   * took is replaced, less what the core spent meanwhile at the rate it was busy while nothing was
   * asked of Berth (the workers alive have timers of their own).
   */
  cpuMs: { p50: number; mean: number };
  /** Of which Berth's Node process, mean, in ms. */
  nodeCpuMs: number;
  /** The core's busy share while nothing was asked. */
  idleShare: number;
  /** The first call's latency, p50, in ms. */
  firstCallMs: number;
}

/** Every site called once from cold, `concurrent` calls at a time. */
export interface ColdStorm {
  sites: number;
  concurrent: number;
  seconds: number;
  /** Latency of each site's first call. */
  firstCall: Latencies;
  failed: number;
}

/** Many more sites than workers fit: all of them at random under load. */
export interface LargeRun {
  sites: number;
  setupSeconds: number;
  load: LoadResult & { serverCpuShare: number };
  /** Workers started during the run: each a call that found no worker of its site. */
  workersStarted: number;
  /** Deno processes alive at the end, PSS of Berth's whole tree and RSS of its Node process, in bytes. */
  denoProcesses: number;
  treePss: number;
  serverRss: number;
}

export interface ManyTenantsResults {
  sites: number;
  fewSites: number;
  setupSeconds: number;
  starts: { none: StartCost; all: StartCost };
  storm: ColdStorm;
  /** After every function was deployed anew: all the sites at random for `seconds`, every worker starting again. */
  fromCold: LoadResult & { serverCpuShare: number };
  warm: Comparison;
  /** Workers started during the warm comparison (both sides, every attempt): calls that were cold. */
  workerStartsWhileWarm: number;
  memory: WorkerMemory;
  /** Absent when BENCH_TENANTS_LARGE is not above BENCH_TENANTS. */
  large?: LargeRun;
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
  /** The cold run after the redeployment lasts this long. */
  coldSeconds: number;
  /** Calls at a time in the cold storm. */
  stormConcurrency: number;
  /** Sites, beyond `sites`, called one at a time for each start-cost measurement. */
  startSamples: number;
  /** Sites in all for the last run (none when not above `sites` plus the samples). */
  largeSites: number;
  largeSeconds: number;
  idleSeconds: number;
  handler: Buffer;
  compare: (name: string, baseline: [Server, LoadTarget], berth: [Server, LoadTarget]) => Promise<Comparison>;
  noteFailures: (r: LoadResult) => void;
}

const MIB = 2 ** 20;

interface Tenant {
  host: string;
  bucketId: string;
}

/** Runs `work` on each item, `concurrent` at a time. */
async function eachAtOnce<T>(items: T[], concurrent: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const loop = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: concurrent }, loop));
}

/** Creates `count` sites and their functions, 16 API calls at a time. */
async function createSites(o: Options, count: number, from = 0): Promise<Tenant[]> {
  const names = Array.from({ length: count }, (_, i) => `tenant-${String(from + i).padStart(5, '0')}`);
  const tenants: Tenant[] = [];
  await eachAtOnce(names, 16, async (name) => {
    const site = await o.berth.api
      .post('v0/sites', { json: { accountId: o.berth.accountId, name, subdomain: name } })
      .json<{ bucketId: string }>();
    await o.berth.api.put(`v0/buckets/${site.bucketId}/objects/api/hello.ts`, { body: o.handler });
    tenants.push({ host: `${name}.localhost:${o.berth.port}`, bucketId: site.bucketId });
  });
  return tenants.sort((a, b) => a.host.localeCompare(b.host));
}

/** One call of a site's function, in ms; throws unless it answers 200. */
async function callOnce(o: Options, host: string): Promise<number> {
  const started = performance.now();
  await got(`${o.berth.origin}/api/hello`, { headers: { host }, retry: { limit: 0 }, timeout: { request: 60_000 } });
  return performance.now() - started;
}

const denoProcesses = (server: Server) =>
  processTree(server.pid).filter((pid) => /\bdeno\b/.test(commandLine(pid))).length;

/** Long enough for the runtime to start a spare in place of the one a cold call took (30–60 ms of CPU). */
const SPARE_REFILL_MS = 700;

/**
 * Starts the workers of `hosts` one at a time and reads what each start cost the server's core. A
 * cold call takes a spare and the runtime starts another in its place: the window runs until then.
 */
async function startCost(o: Options, hosts: string[]): Promise<StartCost> {
  const core = () => coreBusySeconds(SERVER_CORE);
  await sleep(3000);
  const quietFrom = performance.now();
  const quietBusy = core();
  await sleep(5000);
  const idleShare = (core() - quietBusy) / ((performance.now() - quietFrom) / 1000);
  const costs: number[] = [];
  const nodeCosts: number[] = [];
  const firstCalls: number[] = [];
  for (const host of hosts) {
    const from = performance.now();
    const busy = core();
    const node = processCpuSeconds(o.berth.server.pid) ?? NaN;
    firstCalls.push(await callOnce(o, host));
    await sleep(SPARE_REFILL_MS);
    const window = (performance.now() - from) / 1000;
    costs.push((core() - busy - idleShare * window) * 1000);
    nodeCosts.push(((processCpuSeconds(o.berth.server.pid) ?? NaN) - node) * 1000);
  }
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  return {
    alive: denoProcesses(o.berth.server),
    starts: hosts.length,
    cpuMs: { p50: median(costs), mean: mean(costs) },
    nodeCpuMs: mean(nodeCosts),
    idleShare,
    firstCallMs: median(firstCalls),
  };
}

/** Every site's first call, `concurrent` at a time. */
async function coldStorm(o: Options, hosts: string[]): Promise<ColdStorm> {
  const firstCalls = new Samples();
  let failed = 0;
  const started = performance.now();
  await eachAtOnce(hosts, o.stormConcurrency, async (host) => {
    try {
      firstCalls.push(await callOnce(o, host));
    } catch {
      failed++;
    }
  });
  return {
    sites: hosts.length,
    concurrent: o.stormConcurrency,
    seconds: (performance.now() - started) / 1000,
    firstCall: firstCalls.summary(),
    failed,
  };
}

function describeStart(s: StartCost, when: string): string {
  return (
    `  a worker's start ${when}, ${s.alive} Deno processes alive (${s.starts} starts, one at a time): ` +
    `server core ${s.cpuMs.p50.toFixed(1)} ms p50 (mean ${s.cpuMs.mean.toFixed(1)}), Node ${s.nodeCpuMs.toFixed(1)} ms of it; ` +
    `core ${(s.idleShare * 100).toFixed(1)}% busy while quiet; first call p50 ${s.firstCallMs.toFixed(1)} ms`
  );
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

function treeMemory(server: Server): { treePss: number; denoProcesses: number } {
  let treePss = 0;
  let denoProcesses = 0;
  for (const pid of processTree(server.pid)) {
    treePss += smapsRollup(pid)?.pss ?? 0;
    if (/\bdeno\b/.test(commandLine(pid))) denoProcesses++;
  }
  return { treePss, denoProcesses };
}

/** Makes sites up to `o.largeSites` and calls all of them at random. */
async function largeRun(o: Options, existing: Tenant[], target: (label: string, list: string[]) => LoadTarget) {
  const started = performance.now();
  const more = await createSites(o, o.largeSites - existing.length, existing.length);
  const setupSeconds = (performance.now() - started) / 1000;
  const hosts = [...existing, ...more].map((t) => t.host);
  console.log(`  ${more.length} more sites made in ${setupSeconds.toFixed(1)} s: ${hosts.length} in all`);
  const before = await workersStarted(o);
  let stop: ReturnType<typeof watchServer> | undefined;
  const report = await runLoad(
    { targets: [target(`${hosts.length} sites, uniformly`, hosts)], seconds: o.largeSeconds, warmupSeconds: 0 },
    () => (stop = watchServer(o.berth.server, SERVER_CORE)),
  );
  const watched = stop!();
  o.berth.server.checkAlive();
  const load = { ...report.results[0]!, serverCpuShare: watched.cpu };
  o.noteFailures(load);
  const starts = (await workersStarted(o)) - before;
  const memory = treeMemory(o.berth.server);
  const run: LargeRun = {
    sites: hosts.length,
    setupSeconds,
    load,
    workersStarted: starts,
    ...memory,
    serverRss: rssBytes(o.berth.server.pid) ?? NaN,
  };
  console.log(
    `  ${run.sites} sites at random, ${load.connections} connections, ${load.seconds.toFixed(0)} s: ${load.rps.toFixed(1)} req/s, p50 ${load.p50.toFixed(0)} ms, p99 ${load.p99.toFixed(0)} ms; ` +
      `${load.errors + load.non2xx} failed (${load.timeouts} timeouts), ${load.slow} past 5 s; ${run.workersStarted} workers started; ` +
      `${run.denoProcesses} Deno processes alive, the tree ${(run.treePss / 2 ** 30).toFixed(1)} GiB PSS, Node ${(run.serverRss / MIB).toFixed(0)} MiB\n`,
  );
  return run;
}

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
  const created = await createSites(o, o.sites + 2 * o.startSamples);
  const tenants = created.slice(0, o.sites);
  const hosts = tenants.map((t) => t.host);
  const samplesCreated = created.slice(o.sites);
  const samples = samplesCreated.map((t) => t.host);
  const setupSeconds = (performance.now() - setupStarted) / 1000;
  console.log(`  ${created.length} sites with a function each, created in ${setupSeconds.toFixed(1)} s`);

  const none = await startCost(o, samples.slice(0, o.startSamples));
  console.log(describeStart(none, 'with no site warm'));
  const storm = await coldStorm(o, hosts);
  console.log(
    `  cold storm: ${storm.sites} sites called once each, ${storm.concurrent} at a time, in ${storm.seconds.toFixed(1)} s; ` +
      `first call p50 ${storm.firstCall.p50.toFixed(0)} ms, p99 ${storm.firstCall.p99.toFixed(0)} ms, max ${storm.firstCall.max.toFixed(0)} ms; ${storm.failed} failed`,
  );
  berth.server.checkAlive();
  const warmStart = await startCost(o, samples.slice(o.startSamples));
  console.log(describeStart(warmStart, 'with every site warm'));
  const target = (label: string, list: string[]): LoadTarget => ({
    label,
    origin: berth.origin,
    path: '/api/hello',
    connections: o.connections,
    hosts: list,
  });

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
      `(max ${mib(memory.pss.max)}); Berth's node process ${mib(memory.serverRss)}, the whole tree ${mib(memory.treePss)} PSS; ${memory.fitIn16GiB} such workers fit in 16 GiB`,
  );
  // Every function deployed anew: each site's next call starts its worker again, now under 50
  // connections for coldSeconds (not stopped once every site has answered).
  const redeployed = Buffer.concat([o.handler, Buffer.from('\n// deployed again\n')]);
  await eachAtOnce(tenants, 16, async (t) => {
    await o.berth.api.put(`v0/buckets/${t.bucketId}/objects/api/hello.ts`, { body: redeployed });
  });
  let stop: ReturnType<typeof watchServer> | undefined;
  const report = await runLoad(
    { targets: [target(`${o.sites} sites from cold`, hosts)], seconds: o.coldSeconds, warmupSeconds: 0 },
    () => (stop = watchServer(berth.server, SERVER_CORE)),
  );
  const watched = stop!();
  berth.server.checkAlive();
  const fromCold = { ...report.results[0]!, serverCpuShare: watched.cpu };
  o.noteFailures(fromCold);
  const byHost = fromCold.byHost!;
  console.log(
    `  from cold after a new deployment of every site, ${fromCold.seconds.toFixed(0)} s: ${byHost.hostsAnswered} of ${o.sites} sites answered; cold calls p50 ${byHost.cold.p50.toFixed(1)} ms p99 ${byHost.cold.p99.toFixed(1)} ms (n=${byHost.cold.n}), ` +
      `warm calls p50 ${byHost.warm.p50.toFixed(2)} ms p99 ${byHost.warm.p99.toFixed(1)} ms (n=${byHost.warm.n}); ${fromCold.slow} answers past 5 s, ${fromCold.timeouts} timeouts\n`,
  );
  const all = [...tenants, ...samplesCreated];
  const large = o.largeSites > all.length ? await largeRun(o, all, target) : undefined;
  return {
    sites: o.sites,
    fewSites: o.fewSites,
    large,
    setupSeconds,
    starts: { none, all: warmStart },
    storm,
    fromCold,
    warm,
    workerStartsWhileWarm,
    memory,
  };
}
