// The figures of one `make bench` run: their types, the aims (issue 35's, issue 22's, then the earlier
// ones still held) met or missed, the tables printed at the end, and (BENCH_WRITE_DOCS=1) docs/benchmarks.md's
// "Last run" and docs/benchmarks.json.
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from './harness.ts';
import type { Comparison, Measured } from './comparison.ts';
import type { LoadResult } from './load-worker.ts';
import type { HttpsResults } from './https.ts';
import type { ManyTenantsResults } from './many-tenants.ts';

export interface Distribution {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export interface MemoryRow {
  pid: number;
  kind: string;
  early: number;
  late: number | null;
  growth: number | null;
}

export interface Aim {
  path: string;
  baseline: string;
  figure: string;
  value: number;
  shown: string;
  aim: string;
  met: boolean;
}

export interface BenchResults {
  date: string;
  machine: { cpu: string; cores: number; memoryGiB: number; kernel: string; loadAverageAtStart: number[] };
  versions: {
    node: string;
    deno: string;
    autocannon: string;
    betterSqlite3: string;
    berthCommit: string;
    berthTreeClean: boolean;
  };
  method: {
    serverCore: number;
    loadCore: number;
    seconds: number;
    connections: number;
    warmupSeconds: number;
    mixedSeconds: number;
    mixedConnections: number;
    coldRounds: number;
    maxOthers: number;
    retries: number;
    loadGenerator: string;
  };
  affinity: Record<string, string>;
  static1k: Comparison;
  static1m: Comparison;
  hello: Comparison;
  /** The same hello-world handler under workerd (the baseline side). */
  workerd: Comparison;
  sweep: Array<Comparison & { connections: number }>;
  dbFirst: Comparison;
  /** A function's fetch through the egress proxy against the same fetch from bare Deno. */
  egress: Comparison;
  /** Berth's /api/hello under the same load, right after its /api/fetch run, its Node process's CPU read alone. */
  egressHello: Measured;
  /**
   * The egress proxy's CPU per outbound fetch, in µs: the CPU of Berth's Node process per /api/fetch
   * answer less that per /api/hello answer (the function path both share).
   */
  egressProxyCpuUs: number;
  query: Comparison;
  upload: Comparison;
  /** Berth with its metadata on PostgreSQL (the "berth" side) against Berth on SQLite (the "baseline"). */
  postgres: { static1k: Comparison; hello: Comparison; upload: Comparison };
  /** Berth with its files on an object store (radosgw) against Berth on the blob directory. */
  objectStore: { static1k: Comparison; ranged1m: Comparison; upload: Comparison };
  mixed: {
    seconds: number;
    connections: number;
    paths: LoadResult[];
    serverCpuShare: number;
    othersOnServerCore: number;
    loadCpuShare: number;
    memory: {
      early: number;
      late: number;
      processes: MemoryRow[];
      samples: Array<{ t: number; processes: Array<{ pid: number; kind: string; rss: number }> }>;
    };
    affinity: Record<string, string>;
  };
  /** Berth's own HTTPS against its plain listener and against bare Node `https` (bench/https.ts). */
  https: HttpsResults;
  cold: {
    alone: Distribution;
    writeToAnswer: Distribution;
    atOnce: Distribution & { concurrent: number; rounds: number };
    idleEvicted: Distribution;
  };
  manyTenants: ManyTenantsResults;
  /** Issue 35's aims (performance, round three). */
  round3Aims: Aim[];
  /** Issue 22's aims, then the earlier ones still held. */
  aims: Aim[];
  earlierAims: Aim[];
  failures: string[];
}

/** Past this share of its core, the load generator rather than the server may set the pace. */
export const SATURATED = 0.9;

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';
const pct = (n: number) => `${n >= 0 ? '+' : ''}${fmt(n * 100, 1)}%`;

/**
 * Why a req/s ratio does not compare CPU cost per request, if it does not: other processes took a
 * share of the server's core on one side or both, or the load generator could not keep up with a side.
 */
function disturbed(c: Comparison, maxOthers: number): string | undefined {
  const reasons: string[] = [];
  if (c.interference > maxOthers)
    reasons.push(`other processes took up to ${fmt(c.interference * 100)}% of the server's CPU`);
  const saturated = [c.baseline, c.berth].filter((m) => m.loadCpuShare > SATURATED).map((m) => m.label);
  if (saturated.length) reasons.push(`the load generator was saturated against ${saturated.join(' and ')}`);
  return reasons.length ? reasons.join('; ') : undefined;
}

/**
 * A ratio aim. The req/s ratio is judged when both sides had the server's core to themselves and the
 * load generator kept up; otherwise the ratio of server CPU per request, which is what the req/s ratio
 * measures on an undisturbed core, and which other processes and a saturated client barely move.
 */
function ratioAim(path: string, baseline: string, c: Comparison, min: number, r: BenchResults): Aim {
  const why = disturbed(c, r.method.maxOthers);
  const value = why ? c.cpuRatio : c.ratio;
  const rps = `${fmt(c.berth.rps)} / ${fmt(c.baseline.rps)} req/s`;
  return {
    path,
    baseline,
    figure: why
      ? `ratio of server CPU per request, ${r.method.connections} connections`
      : `req/s ratio, ${r.method.connections} connections`,
    value,
    shown: why
      ? `${fmt(c.cpuRatio, 2)} (${fmt(c.baseline.cpuPerRequestUs)} / ${fmt(c.berth.cpuPerRequestUs)} µs; req/s ratio ${fmt(c.ratio, 2)}, ${rps}, not judged: ${why})`
      : `${fmt(c.ratio, 2)} (${rps}; by CPU per request ${fmt(c.cpuRatio, 2)})`,
    aim: `≥ ${min}`,
    met: value >= min,
  };
}

function below(
  path: string,
  baseline: string,
  figure: string,
  value: number,
  max: number,
  unit: string,
  shown = `${fmt(value, unit === 'ms' && value < 10 ? 2 : 1)} ${unit}`,
): Aim {
  return {
    path,
    baseline,
    figure,
    value,
    shown,
    aim: `< ${Number.isInteger(max) ? max : fmt(max, 2)} ${unit}`,
    met: value < max,
  };
}

const MIB = 2 ** 20;
/** Failed requests of a run: autocannon's errors (timeouts among them), non-2xx answers, failures in the warm-up. */
const failedIn = (m: LoadResult) => m.errors + m.non2xx + m.warmupFailures;

/** Warm hello against workerd: at least its req/s, and a p99 below its. */
function againstWorkerd(r: BenchResults): Aim[] {
  return [
    ratioAim('warm hello-world function', 'workerd, same handler', r.workerd, 1.0, r),
    below(
      'warm hello-world function',
      'workerd, same handler',
      `p99, ${r.method.connections} connections (workerd's ${fmt(r.workerd.baseline.p99, 2)} ms)`,
      r.workerd.berth.p99,
      r.workerd.baseline.p99,
      'ms',
    ),
  ];
}

/** The 10,000-site run: measured is the aim (what the figures mean is written in docs/benchmarks.md). */
function largeRow(t: ManyTenantsResults): Aim {
  const l = t.large;
  const path = `${fmt(l?.sites ?? 10_000)} sites, uniformly at random`;
  const figure = '50 connections, 60 s: req/s, failed, p99, workers started, memory';
  if (!l)
    return {
      path,
      baseline: '—',
      figure,
      value: NaN,
      shown: 'not run (BENCH_TENANTS_LARGE)',
      aim: 'measured',
      met: false,
    };
  const shown =
    `${fmt(l.load.rps, 1)} req/s, ${failedIn(l.load)} failed (${l.load.timeouts} timeouts), p99 ${fmt(l.load.p99)} ms, ` +
    `${fmt(l.workersStarted)} workers started, ${fmt(l.denoProcesses)} Deno processes, ${fmt(l.treePss / 2 ** 30, 1)} GiB PSS in all`;
  return { path, baseline: '—', figure, value: l.load.rps, shown, aim: 'measured', met: true };
}

/** The aims of issue 35 (performance, round three), each with this run's figure. */
export function round3Aims(r: BenchResults): Aim[] {
  const t = r.manyTenants;
  const { none, all } = t.starts;
  const startRatio = all.cpuMs.p50 / none.cpuMs.p50;
  const storm = t.storm;
  const cold = t.fromCold;
  const pastFive = cold.slow + cold.timeouts;
  const m = t.memory;
  return [
    {
      path: "a worker's start",
      baseline: 'the same with no site warm',
      figure: `server-core CPU per start (p50 of ${all.starts}) with ${all.alive} Deno processes alive ÷ with ${none.alive}`,
      value: startRatio,
      shown: `${fmt(startRatio, 2)} (${fmt(all.cpuMs.p50, 1)} / ${fmt(none.cpuMs.p50, 1)} ms; Node ${fmt(all.nodeCpuMs, 1)} / ${fmt(none.nodeCpuMs, 1)} ms of them)`,
      aim: '≤ 1.1',
      met: startRatio <= 1.1,
    },
    {
      path: `${storm.sites} sites from cold, each called once`,
      baseline: '—',
      figure: `${storm.concurrent} at a time: wall time; first call p99`,
      value: storm.seconds,
      shown: `${fmt(storm.seconds, 1)} s; p99 ${fmt(storm.firstCall.p99)} ms (p50 ${fmt(storm.firstCall.p50)}, max ${fmt(storm.firstCall.max)}); ${storm.failed} failed`,
      aim: '≤ 20 s; p99 < 400 ms',
      met: storm.seconds <= 20 && storm.firstCall.p99 < 400 && storm.failed === 0,
    },
    {
      path: `${t.sites} sites from cold (every function deployed anew)`,
      baseline: '—',
      figure: `${cold.connections} connections for ${fmt(cold.seconds)} s: answers past 5 s (timeouts included)`,
      value: pastFive,
      shown: `${pastFive} (${cold.slow} answered past 5 s, ${cold.timeouts} timeouts past 10 s; ${failedIn(cold)} failed; cold calls p99 ${fmt(cold.byHost!.cold.p99)} ms)`,
      aim: 'none past 5 s',
      met: pastFive === 0 && failedIn(cold) === 0,
    },
    ratioAim(
      `many tenants: ${t.sites} functions, one per site, uniformly at random, warm`,
      `the same load on ${t.fewSites} of them`,
      t.warm,
      0.4,
      r,
    ),
    {
      path: 'one idle warm worker',
      baseline: '—',
      figure: `PSS, p50 of ${m.workers} workers idle ${m.idleSeconds} s`,
      value: m.pss.p50,
      shown: `${fmt(m.pss.p50 / MIB, 1)} MiB (RSS ${fmt(m.rss.p50 / MIB, 1)}, private ${fmt(m.private.p50 / MIB, 1)} MiB)`,
      aim: '≤ 10 MiB',
      met: m.pss.p50 <= 10 * MIB,
    },
    largeRow(t),
    ratioAim('function with one `ctx.db.first`', 'the hello-world function', r.dbFirst, 0.7, r),
    ratioAim('query endpoint, one indexed SELECT', 'bare Node `http` + SQLite, same statement', r.query, 0.4, r),
    ratioAim('1 KiB upload, metadata on PostgreSQL', 'the same on SQLite', r.postgres.upload, 0.5, r),
    ratioAim('1 KiB upload, files on an object store', 'the same on the blob directory', r.objectStore.upload, 0.5, r),
    ratioAim(
      '64 KiB range of a 1 MiB web file, files on an object store',
      'the same on the blob directory',
      r.objectStore.ranged1m,
      0.7,
      r,
    ),
    ...againstWorkerd(r),
    {
      path: 'outbound `fetch` from a function, through the egress proxy',
      baseline: 'a hello-world call, same load',
      figure: "the egress proxy's CPU per fetch: Berth's Node process per fetch less per hello",
      value: r.egressProxyCpuUs,
      shown: `${fmt(r.egressProxyCpuUs)} µs (${fmt(r.egress.berth.ownCpuPerRequestUs ?? NaN)} − ${fmt(r.egressHello.ownCpuPerRequestUs ?? NaN)} µs)`,
      aim: '≤ 250 µs',
      met: r.egressProxyCpuUs <= 250,
    },
  ];
}

/** The aims of issue 22 (performance, round two), each with this run's figure. */
export function aims(r: BenchResults): Aim[] {
  const mixedUpload = r.mixed.paths.find((p) => p.label.startsWith('upload'));
  const t = r.manyTenants;
  const tenantFailures = failedIn(t.fromCold) + failedIn(t.warm.baseline) + failedIn(t.warm.berth);
  const tenantsRatio = ratioAim(
    `many tenants: ${t.sites} functions, one per site, uniformly at random`,
    `the same load on ${t.fewSites} of them`,
    t.warm,
    0.25,
    r,
  );
  const { cold, warm } = t.fromCold.byHost!;
  const withinMemory = t.memory.treePss < r.machine.memoryGiB * 1024 * MIB;
  const m = t.memory;
  return [
    ...againstWorkerd(r),
    ratioAim('warm hello-world function', 'bare `deno serve`, same handler', r.hello, 0.2, r),
    ratioAim('1 KiB static file, logging on', 'bare Node `http`, bytes in memory', r.static1k, 0.6, r),
    ratioAim('function with one `ctx.db.first`', 'the hello-world function', r.dbFirst, 0.7, r),
    ratioAim('query endpoint, one indexed SELECT', 'bare Node `http` + SQLite, same statement', r.query, 0.4, r),
    below(
      '1 KiB upload',
      '—',
      `p99 under the mixed load (${r.mixed.connections} c, ${r.mixed.seconds} s)`,
      mixedUpload?.p99 ?? NaN,
      100,
      'ms',
    ),
    ratioAim(
      'outbound `fetch` from a function, through the egress proxy',
      'bare `deno serve`, the same fetch',
      r.egress,
      0.7,
      r,
    ),
    {
      ...tenantsRatio,
      shown:
        `${tenantsRatio.shown}; ${tenantFailures} failed; workers started while warm ${t.workerStartsWhileWarm}; from cold: cold calls p50 ${fmt(cold.p50, 1)} / p99 ${fmt(cold.p99, 1)} ms (n=${cold.n}), ` +
        `warm calls p50 ${fmt(warm.p50, 2)} / p99 ${fmt(warm.p99, 1)} ms; whole tree ${fmt(t.memory.treePss / 2 ** 30, 1)} GiB PSS`,
      aim: '≥ 0.25, no errors, memory within the machine',
      met: tenantsRatio.met && tenantFailures === 0 && withinMemory,
    },
    {
      path: 'one idle warm worker',
      baseline: '—',
      figure: `memory it costs (PSS: private + its share of shared pages), p50 of ${m.workers} workers idle ${m.idleSeconds} s`,
      value: m.pss.p50,
      shown: `${fmt(m.pss.p50 / MIB, 1)} MiB (RSS ${fmt(m.rss.p50 / MIB, 1)}, private ${fmt(m.private.p50 / MIB, 1)} MiB); ${fmt(m.fitIn16GiB)} fit in 16 GiB`,
      aim: '≤ 30 MiB, the count in 16 GiB stated',
      met: m.pss.p50 <= 30 * MIB,
    },
  ];
}

/** The aims of earlier rounds (issue 12 and after) not restated by issue 22, each with this run's figure. */
export function earlierAims(r: BenchResults): Aim[] {
  const oneConnection = r.sweep.find((s) => s.connections === 1);
  const workers = r.mixed.memory.processes.filter((p) => p.kind.includes('deno') && p.growth !== null);
  const worst = workers.reduce<MemoryRow | undefined>((a, b) => (a && a.growth! >= b.growth! ? a : b), undefined);
  const { early, late } = r.mixed.memory;
  return [
    below(
      'warm hello-world function',
      'bare `deno serve`, same handler',
      'added p50, 1 connection',
      oneConnection?.addedP50 ?? NaN,
      0.5,
      'ms',
      oneConnection
        ? `${fmt(oneConnection.addedP50, 3)} ms (${fmt(oneConnection.berth.p50, 3)} vs ${fmt(oneConnection.baseline.p50, 3)} ms)`
        : 'not measured',
    ),
    ratioAim('1 KiB upload', 'bare Node `http` writing + fsync + one SQLite insert', r.upload, 0.5, r),
    ratioAim('1 KiB static file, metadata on PostgreSQL', 'the same on SQLite', r.postgres.static1k, 0.9, r),
    ratioAim('warm hello-world function, metadata on PostgreSQL', 'the same on SQLite', r.postgres.hello, 0.9, r),
    ratioAim('1 KiB upload, metadata on PostgreSQL', 'the same on SQLite', r.postgres.upload, 0.5, r),
    ratioAim(
      '1 KiB static file, files on an object store',
      'the same on the blob directory',
      r.objectStore.static1k,
      0.9,
      r,
    ),
    below('cold first answer', '—', 'p50, alone (request → answer)', r.cold.alone.p50, 50, 'ms'),
    below('cold first answer', '—', `p50, ${r.cold.atOnce.concurrent} at a time`, r.cold.atOnce.p50, 150, 'ms'),
    {
      path: 'worker memory under load',
      baseline: '—',
      figure: `largest RSS growth of a Deno process, ${early} s → ${late} s of the mixed load`,
      value: worst?.growth ?? NaN,
      shown: worst
        ? `${pct(worst.growth!)} (${worst.kind}, ${fmt(worst.early / 2 ** 20, 1)} → ${fmt(worst.late! / 2 ** 20, 1)} MiB)`
        : 'no Deno process lived through the load',
      aim: '< 10%',
      met: worst !== undefined && worst.growth! < 0.1,
    },
  ];
}

export function aimsTable(list: Aim[]): string {
  const rows = list.map(
    (a) => `| ${a.path} | ${a.baseline} | ${a.figure} | ${a.shown} | ${a.aim} | ${a.met ? 'met' : '**missed**'} |`,
  );
  return ['| path | baseline | figure | this run | aim | |', '|---|---|---|---|---|---|', ...rows].join('\n');
}

const metCount = (list: Aim[]) => `${list.filter((a) => a.met).length} of ${list.length} met`;

export function printReport(r: BenchResults): void {
  console.log(`Aims of issue 35 (${metCount(r.round3Aims)})\n`);
  console.log(aimsTable(r.round3Aims).replaceAll('**', ''));
  console.log(`\nAims of issue 22 (${metCount(r.aims)})\n`);
  console.log(aimsTable(r.aims).replaceAll('**', ''));
  console.log(`\nEarlier aims (${metCount(r.earlierAims)})\n`);
  console.log(aimsTable(r.earlierAims).replaceAll('**', ''));
}

function runRow(label: string, m: Measured): string {
  const failed = m.errors + m.non2xx + m.warmupFailures;
  const load = `${fmt(m.loadCpuShare * 100)}%${m.loadCpuShare > SATURATED ? ' (saturated)' : ''}`;
  return `| ${label} | ${fmt(m.rps)} | ${fmt(m.p50, 2)} | ${fmt(m.p99, 2)} | ${fmt(m.cpuPerRequestUs)} µs | ${fmt(m.serverCpuShare * 100)}% | ${fmt(m.othersOnServerCore * 100)}% | ${load} | ${failed} |`;
}

/** The "Last run" section of docs/benchmarks.md. */
export function lastRunMarkdown(r: BenchResults): string {
  const m = r.method;
  const v = r.versions;
  const comparisons: Array<[string, Comparison]> = [
    ['1 KiB web file', r.static1k],
    ['1 MiB web file', r.static1m],
    [`hello-world function, ${m.connections} c`, r.hello],
    [`hello-world function against workerd, ${m.connections} c`, r.workerd],
    ...r.sweep.map((s): [string, Comparison] => [`hello-world function, ${s.connections} c`, s]),
    ['function with one `ctx.db.first`', r.dbFirst],
    ['outbound fetch, through the egress proxy', r.egress],
    ['query endpoint, one indexed SELECT', r.query],
    ['1 KiB upload', r.upload],
    ['1 KiB web file, metadata on PostgreSQL', r.postgres.static1k],
    ['hello-world function, metadata on PostgreSQL', r.postgres.hello],
    ['1 KiB upload, metadata on PostgreSQL', r.postgres.upload],
    ['1 KiB web file, files on an object store', r.objectStore.static1k],
    ['64 KiB range of a 1 MiB web file, files on an object store', r.objectStore.ranged1m],
    ['1 KiB upload, files on an object store', r.objectStore.upload],
    ['1 KiB web file over HTTPS, kept connections', r.https.kept],
    ['1 KiB web file over HTTPS, a new connection per request', r.https.fresh],
    ['1 KiB web file over HTTPS, new connections, against bare Node', r.https.againstNode],
    [`${r.manyTenants.sites} sites' functions against ${r.manyTenants.fewSites} of them, warm`, r.manyTenants.warm],
  ];
  const lines: string[] = [];
  lines.push(
    `${r.date.slice(0, 10)}: ${r.machine.cpu}, ${r.machine.cores} cores, ${r.machine.memoryGiB} GiB, ${r.machine.kernel}; Node ${v.node}, Deno ${v.deno}, autocannon ${v.autocannon}, better-sqlite3 ${v.betterSqlite3}; ` +
      `Berth ${v.berthCommit}${v.berthTreeClean ? '' : ' with uncommitted changes'}. Servers on CPU ${m.serverCore}, load generator on CPU ${m.loadCore}; ` +
      `${m.connections} connections, ${m.seconds} s per run after a ${m.warmupSeconds} s warm-up; load average ${r.machine.loadAverageAtStart.join(', ')} at the start. ` +
      `Every figure is also in [benchmarks.json](benchmarks.json).`,
  );
  lines.push('', `### Aims of issue 35 (${metCount(r.round3Aims)})`, '', aimsTable(r.round3Aims));
  lines.push('', `### Aims of issue 22 (${metCount(r.aims)})`, '', aimsTable(r.aims));
  lines.push('', `### Earlier aims (${metCount(r.earlierAims)})`, '', aimsTable(r.earlierAims));
  lines.push(
    '',
    '### Every run',
    '',
    `Server CPU is the CPU time of the server's whole process tree (Berth: Node, workers, database processes) per response, and its share of CPU ${m.serverCore}; "others" is what other processes of the machine took of CPU ${m.serverCore} meanwhile; "load" is the load generator's share of CPU ${m.loadCore} (saturated past ${SATURATED * 100}%: the server may then be faster than measured). Ratios are Berth over its baseline; the CPU ratio is the baseline's CPU per request over Berth's.`,
    '',
    `| run | req/s | p50 ms | p99 ms | server CPU per request | server on CPU ${m.serverCore} | others on CPU ${m.serverCore} | load | failed |`,
    '|---|---|---|---|---|---|---|---|---|',
  );
  for (const [name, c] of comparisons) {
    lines.push(runRow(`${name}: ${c.baseline.label}`, c.baseline), runRow(`${name}: ${c.berth.label}`, c.berth));
    const attempts = c.attempts > 1 ? ` (kept from ${c.attempts} attempts)` : '';
    lines.push(
      `| **${name}: ratio${attempts}** | **${fmt(c.ratio, 2)}** | ${c.addedP50 >= 0 ? '+' : ''}${fmt(c.addedP50, 2)} | | CPU ratio ${fmt(c.cpuRatio, 2)} | | | | |`,
    );
    if (c === r.egress)
      lines.push(
        runRow(`${name}: ${r.egressHello.label}, same load`, r.egressHello),
        `| **${name}: the egress proxy's CPU per fetch** (Berth's Node process, ${fmt(c.berth.ownCpuPerRequestUs ?? NaN)} µs per fetch less ${fmt(r.egressHello.ownCpuPerRequestUs ?? NaN)} per hello) | | | | **${fmt(r.egressProxyCpuUs)} µs** | | | | |`,
      );
  }
  lines.push('', `### Mixed load (${r.mixed.connections} connections for ${r.mixed.seconds} s)`, '');
  lines.push(
    `Berth used ${fmt(r.mixed.serverCpuShare * 100)}% of CPU ${m.serverCore} (others ${fmt(r.mixed.othersOnServerCore * 100)}%); the load generator ${fmt(r.mixed.loadCpuShare * 100)}% of CPU ${m.loadCore}.`,
    '',
    'Latencies are those of answered requests; a request still waiting when the run ends is in none, so the last column gives the longest a connection had then been waiting, and how many connections got no answer at all.',
    '',
    '| path | connections | req/s | p50 ms | p99 ms | max ms | failed | longest wait at the end |',
    '|---|---|---|---|---|---|---|---|',
  );
  for (const p of r.mixed.paths) {
    const wait = `${fmt(p.longestWaitAtEnd / 1000, 1)} s${p.neverAnswered ? ` (${p.neverAnswered} never answered)` : ''}`;
    lines.push(
      `| ${p.label} | ${p.connections} | ${fmt(p.rps)} | ${fmt(p.p50, 1)} | ${fmt(p.p99, 1)} | ${fmt(p.max)} | ${p.errors + p.non2xx + p.warmupFailures} | ${wait} |`,
    );
  }
  const samples = r.mixed.memory.samples;
  lines.push(
    '',
    `RSS of each process of Berth, sampled during the mixed load; growth is from ${r.mixed.memory.early} s to ${r.mixed.memory.late} s.`,
    '',
    `| process | ${samples.map((x) => `${x.t} s`).join(' | ')} | growth |`,
    `|---|${samples.map(() => '---|').join('')}---|`,
  );
  for (const p of r.mixed.memory.processes) {
    const at = samples.map((x) => {
      const rss = x.processes.find((q) => q.pid === p.pid)?.rss;
      return rss === undefined ? '—' : `${fmt(rss / 2 ** 20, 1)} MiB`;
    });
    lines.push(`| ${p.kind}, pid ${p.pid} | ${at.join(' | ')} | ${p.growth === null ? '—' : pct(p.growth)} |`);
  }
  const h = r.https;
  lines.push(
    '',
    '### HTTPS',
    '',
    `Certificate: ${h.certificate}. Server CPU per request that HTTPS adds to the 1 KiB web file: ${fmt(h.addedPerRequestUs)} µs on a kept connection, ` +
      `${fmt(h.addedPerNewConnectionUs)} µs with a new connection for each request; the handshake alone ${fmt(h.handshakeUs)} µs. ` +
      `New connections per second: ${fmt(h.fresh.berth.rps)} over HTTPS, ${fmt(h.fresh.baseline.rps)} over plain HTTP, ${fmt(h.againstNode.baseline.rps)} to bare Node \`https\`. ` +
      `HTTPS ÷ HTTP: ${fmt(h.kept.ratio, 2)} (req/s, kept connections), ${fmt(h.fresh.ratio, 2)} (new connections); Berth ÷ bare Node over HTTPS, new connections: ${fmt(h.againstNode.ratio, 2)} (req/s), ${fmt(h.againstNode.cpuRatio, 2)} (CPU per request).`,
  );
  const c = r.cold;
  lines.push(
    '',
    '### Cold first answers',
    '',
    '| path | p50 | p99 | samples |',
    '|---|---|---|---|',
    `| new function, request → first answer, alone | ${fmt(c.alone.p50, 1)} ms | ${fmt(c.alone.p99, 1)} ms | ${c.alone.n} |`,
    `| new functions, ${c.atOnce.concurrent} at a time, request → first answer | ${fmt(c.atOnce.p50, 1)} ms | ${fmt(c.atOnce.p99, 1)} ms | ${c.atOnce.n} (${c.atOnce.rounds} rounds) |`,
    `| new function, write → first answer | ${fmt(c.writeToAnswer.p50, 1)} ms | ${fmt(c.writeToAnswer.p99, 1)} ms | ${c.writeToAnswer.n} |`,
    `| idle-evicted worker → first answer | ${fmt(c.idleEvicted.p50, 1)} ms | ${fmt(c.idleEvicted.p99, 1)} ms | ${c.idleEvicted.n} |`,
  );
  const t = r.manyTenants;
  const { cold, warm, hostsAnswered } = t.fromCold.byHost!;
  const mem = t.memory;
  const mib = (n: number) => `${fmt(n / MIB, 1)} MiB`;
  lines.push(
    '',
    `### Many tenants (${t.sites} sites, one function each)`,
    '',
    `A fresh Berth with ${t.sites} sites (created in ${fmt(t.setupSeconds, 1)} s), each with the hello-world function, called uniformly at random by ${t.fromCold.connections} connections. ` +
      `From cold (${fmt(t.fromCold.seconds)} s, no warm-up): ${hostsAnswered} of ${t.sites} sites answered, ${fmt(t.fromCold.rps)} req/s over the run, Berth at ${fmt(t.fromCold.serverCpuShare * 100)}% of CPU ${m.serverCore}. ` +
      `Warm: ${fmt(t.warm.berth.rps)} req/s against ${fmt(t.warm.baseline.rps)} on ${t.fewSites} of the sites (ratio ${fmt(t.warm.ratio, 2)}), ${t.workerStartsWhileWarm} workers started meanwhile.`,
    '',
    '| calls | p50 | p99 | max | calls |',
    '|---|---|---|---|---|',
    `| cold (sent before the site first answered) | ${fmt(cold.p50, 1)} ms | ${fmt(cold.p99, 1)} ms | ${fmt(cold.max)} ms | ${cold.n} |`,
    `| warm, in the run from cold | ${fmt(warm.p50, 2)} ms | ${fmt(warm.p99, 1)} ms | ${fmt(warm.max)} ms | ${warm.n} |`,
    `| warm, ${t.sites} sites | ${fmt(t.warm.berth.p50, 2)} ms | ${fmt(t.warm.berth.p99, 1)} ms | ${fmt(t.warm.berth.max)} ms | ${t.warm.berth.responses} |`,
    `| warm, ${t.fewSites} sites | ${fmt(t.warm.baseline.p50, 2)} ms | ${fmt(t.warm.baseline.p99, 1)} ms | ${fmt(t.warm.baseline.max)} ms | ${t.warm.baseline.responses} |`,
    '',
    `Memory of the ${mem.workers} workers after ${mem.idleSeconds} s idle: RSS p50 ${mib(mem.rss.p50)} (max ${mib(mem.rss.max)}), private p50 ${mib(mem.private.p50)} (max ${mib(mem.private.max)}), ` +
      `PSS p50 ${mib(mem.pss.p50)} (max ${mib(mem.pss.max)}); ${fmt(mem.fitIn16GiB)} such workers fit in 16 GiB. Berth's Node process ${mib(mem.serverRss)} resident; the whole tree ${mib(mem.treePss)} PSS.`,
  );
  if (r.failures.length > 0) {
    lines.push('', '### Failed requests', '', ...r.failures.map((f) => `- ${f}`));
  }
  return lines.join('\n');
}

const START = '<!-- last run: written by `BENCH_WRITE_DOCS=1 make bench`; edit bench/report.ts, not this section -->';
const END = '<!-- end of last run -->';

/** Rounds floats for the JSON file: three decimals are more than any of these figures can tell. */
function rounded(_key: string, value: unknown): unknown {
  return typeof value === 'number' && !Number.isInteger(value)
    ? Number.isFinite(value)
      ? Math.round(value * 1000) / 1000
      : null
    : value;
}

export async function writeDocs(r: BenchResults): Promise<void> {
  const mdPath = path.join(ROOT, 'docs/benchmarks.md');
  const md = await fs.readFile(mdPath, 'utf8');
  const start = md.indexOf(START);
  const end = md.indexOf(END);
  if (start < 0 || end < start)
    throw new Error(`docs/benchmarks.md has lost its "Last run" markers:\n${START}\n${END}`);
  await fs.writeFile(mdPath, `${md.slice(0, start + START.length)}\n\n${lastRunMarkdown(r)}\n\n${md.slice(end)}`);
  await fs.writeFile(path.join(ROOT, 'docs/benchmarks.json'), `${JSON.stringify(r, rounded, 2)}\n`);
}
