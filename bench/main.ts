// `make bench`: Berth against its baselines on equal CPU, in one run. Every server under test (Berth's
// `berth serve` with its Deno workers and database processes, and each baseline in its turn) runs
// pinned to CPU 0; the load generator (autocannon, in a process of its own) and this script run on
// CPU 1. Both sides of a ratio get the same load: same connections, same duration, same warm-up.
// Before measuring, both sides must answer the same bytes; any failed request (error, timeout,
// non-2xx) is reported and makes the run exit non-zero.
//   static files:  1 KiB and 1 MiB vs a bare Node http server holding the bytes in memory
//   functions:     warm hello world vs the same handler under a bare `deno serve`, at BENCH_CONNECTIONS
//                  and swept over 1, 16 and 64 connections
//   workerd:       warm hello world vs the same handler under workerd, Cloudflare's Workers runtime
//   site database: a function doing one ctx.db.first vs hello world; the query endpoint vs the same
//                  statement run on SQLite by a bare Node http server
//   uploads:       1 KiB PUTs vs a bare Node http server writing a new file, fsync, one SQLite insert
//   mixed load:    static, hello, ctx.db.first and uploads at once (64 connections), per path, with the
//                  RSS of the server and of each Deno process at 10 s and at the end
//   PostgreSQL:    1 KiB static file, warm hello and 1 KiB uploads with the metadata on PostgreSQL vs the
//                  same on SQLite (PostgreSQL pinned with Berth, its CPU counted as Berth's)
//   cold paths:    a new function's first answer, alone and 8 at a time; an idle-evicted worker's first answer
//   HTTPS:         the 1 KiB file over Berth's own HTTPS (BERTH_TLS=acme, a certificate from pebble) vs
//                  the same Berth over plain HTTP, on kept connections and with a new connection per
//                  request (the handshake); vs bare Node `https` with the same certificate (bench/https.ts)
//   many tenants:  1,000 sites: a worker start's CPU with none and with all of their workers alive;
//                  every site called once from cold, 16 at a time; warm, uniformly at random, vs 10
//                  of them; the memory of each idle warm worker; from cold again under 50 connections
//                  for 60 s after a new deployment of every site; 10,000 sites at random for 60 s
//                  (bench/many-tenants.ts)
// Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (50), BENCH_MIXED_SECONDS (60),
// BENCH_MIXED_CONNECTIONS (64), BENCH_COLD_ROUNDS (8), BENCH_TENANTS (1000),
// BENCH_TENANTS_COLD_SECONDS (60), BENCH_START_SAMPLES (20), BENCH_TENANTS_LARGE (10,000; 0 skips that run), BENCH_TENANTS_LARGE_SECONDS (60), BENCH_HTTPS_SECONDS (5); BENCH_ONLY=<section>,… runs
// those sections alone (no aims, nothing written; the sections are listed in SECTIONS); BENCH_MAX_OTHERS (0.15) and BENCH_RETRIES (1):
// a ratio is measured again when other processes took more than that share of the server's core;
// BENCH_WRITE_DOCS=1 writes docs/benchmarks.md's "Last run" section and docs/benchmarks.json from this
// run; BENCH_KEEP_DATA=1 keeps the data dirs and Berth's request logs.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import got from 'got';
import pg from 'pg';
import { resolveDenoBinary } from '../runtime-host/deno-binary.ts';
import { BENCH_STATEMENT } from './baselines.ts';
import {
  checkPinning,
  commandLine,
  cpusAllowed,
  freePort,
  LOAD_CORE,
  machine,
  pinProcess,
  pinSelf,
  processTree,
  ROOT,
  rssBytes,
  runLoad,
  SERVER_CORE,
  type Server,
  startPinned,
  startServe,
  stopAll,
  waitForPort,
  watchServer,
} from './harness.ts';
import type { LoadTarget } from './load-worker.ts';
import {
  aims,
  earlierAims,
  SATURATED,
  type BenchResults,
  type Distribution,
  printReport,
  round3Aims,
  writeDocs,
} from './report.ts';
import type { Comparison, Measured } from './comparison.ts';
import { startPublicHost } from '../test/helpers/public-host.ts';
import { startCluster } from '../test/helpers/postgres-cluster.ts';
import { startObjectStoreServer } from '../test/helpers/object-store-server.ts';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { manyTenants } from './many-tenants.ts';
import { httpsCosts } from './https.ts';

function envNumber(name: string, fallback: number, min = Number.MIN_VALUE): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min)
    throw new Error(`${name} must be a number of at least ${min}, got "${raw}"`);
  return value;
}

const SECONDS = envNumber('BENCH_SECONDS', 10);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 50);
const MIXED_SECONDS = envNumber('BENCH_MIXED_SECONDS', 60);
const MIXED_CONNECTIONS = envNumber('BENCH_MIXED_CONNECTIONS', 64);
const COLD_ROUNDS = envNumber('BENCH_COLD_ROUNDS', 8);
const TENANTS = Math.floor(envNumber('BENCH_TENANTS', 1000, 20));
const TENANTS_COLD_SECONDS = envNumber('BENCH_TENANTS_COLD_SECONDS', 60);
const START_SAMPLES = Math.floor(envNumber('BENCH_START_SAMPLES', 20, 3));
const LARGE_TENANTS = Math.floor(envNumber('BENCH_TENANTS_LARGE', 10_000, 0));
const LARGE_SECONDS = envNumber('BENCH_TENANTS_LARGE_SECONDS', 60);
const HTTPS_SECONDS = envNumber('BENCH_HTTPS_SECONDS', 5);
/** The sections BENCH_ONLY may name: a run of some of them judges no aims and writes nothing. */
const SECTIONS = [
  'static',
  'functions',
  'egress',
  'database',
  'upload',
  'mixed',
  'postgres',
  'objectstore',
  'https',
  'cold',
  'tenants',
] as const;
type Section = (typeof SECTIONS)[number];
const ONLY = (process.env.BENCH_ONLY ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const name of ONLY)
  if (!(SECTIONS as readonly string[]).includes(name))
    throw new Error(`BENCH_ONLY names sections among ${SECTIONS.join(', ')}; got "${name}"`);
/** Whether this run measures `section`. */
const runs = (section: Section) => ONLY.length === 0 || ONLY.includes(section);
const FEW_TENANTS = 10;
const STORM_CONCURRENCY = 16;
const IDLE_SECONDS = 15;
/** A ratio is measured again (BENCH_RETRIES times at most) when other processes took more than this of the server's core. */
const MAX_OTHERS = envNumber('BENCH_MAX_OTHERS', 0.15, 0);
const RETRIES = Math.floor(envNumber('BENCH_RETRIES', 1, 0));
const WARMUP_SECONDS = 2;
const SWEEP = [1, 16, 64];
const COLD_AT_ONCE = 8;
const COLD_ALONE = 20;
const WRITE_DOCS = process.env.BENCH_WRITE_DOCS === '1';
/** The sections measured on the one Berth started first (the PostgreSQL and object-store ones as their baseline). */
const MAIN_SECTIONS: Section[] = [
  'static',
  'functions',
  'egress',
  'database',
  'upload',
  'mixed',
  'postgres',
  'objectstore',
];

/** The workerd executable of the `workerd` package (its main export is the path for this platform). */
const workerdBinary = (createRequire(import.meta.url)('workerd') as { default: string }).default;

const failures: string[] = [];

/** Checks a condition that must hold before anything is measured. */
function same(condition: boolean, what: string): void {
  if (!condition) throw new Error(`the two sides do not answer the same: ${what}`);
}

const CLOCK = () => performance.now();

/**
 * One load against one server, with the server's CPU time and what else ran on its core; with `own`,
 * also the CPU time of the server's own process alone (Berth's Node process, without its workers).
 */
async function measure(server: Server, target: LoadTarget, seconds = SECONDS, own = false): Promise<Measured> {
  let stop: ReturnType<typeof watchServer> | undefined;
  const report = await runLoad(
    { targets: [freshUploads(target)], seconds, warmupSeconds: WARMUP_SECONDS },
    () => (stop = watchServer(server, SERVER_CORE)),
  );
  const watched = stop!();
  server.checkAlive();
  const r = report.results[0]!;
  const m: Measured = {
    ...r,
    server: server.name,
    serverCpuShare: watched.cpu,
    cpuPerRequestUs: r.responses > 0 ? ((watched.cpu * watched.seconds) / r.responses) * 1e6 : NaN,
    ...(own
      ? { ownCpuPerRequestUs: r.responses > 0 ? ((watched.own * watched.seconds) / r.responses) * 1e6 : NaN }
      : {}),
    othersOnServerCore: watched.others,
    loadCpuShare: report.cpuShare,
    loadCpus: report.cpus,
  };
  noteFailures(m);
  return m;
}

function noteFailures(m: {
  label: string;
  errors: number;
  timeouts: number;
  non2xx: number;
  warmupFailures: number;
  statusCodes: Record<string, number>;
}): void {
  if (m.errors + m.non2xx + m.warmupFailures === 0) return;
  const codes = Object.entries(m.statusCodes)
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, n]) => `${n}×${code}`)
    .join(', ');
  failures.push(
    `${m.label}: ${m.errors} errors (${m.timeouts} timeouts), ${m.non2xx} non-2xx${codes ? ` (${codes})` : ''}, ${m.warmupFailures} failures in the warm-up`,
  );
}

/**
 * The baseline, then Berth, under the same load. The machine may be shared: when other processes took
 * more than MAX_OTHERS of the server's core during either side, both are measured again (RETRIES
 * times at most) and the pair with the least interference is kept.
 */
async function compare(
  name: string,
  baseline: [Server, LoadTarget],
  berth: [Server, LoadTarget],
  seconds = SECONDS,
  own = false,
): Promise<Comparison> {
  let best: Comparison | undefined;
  for (let attempt = 1; attempt <= 1 + RETRIES; attempt++) {
    const b = await measure(...baseline, seconds);
    printRow(b);
    const m = await measure(...berth, seconds, own);
    printRow(m);
    const interference = Math.max(b.othersOnServerCore, m.othersOnServerCore);
    const c: Comparison = {
      name,
      baseline: b,
      berth: m,
      ratio: m.rps / b.rps,
      addedP50: m.p50 - b.p50,
      cpuRatio: b.cpuPerRequestUs / m.cpuPerRequestUs,
      attempts: attempt,
      interference,
    };
    if (!best || interference < best.interference) best = { ...c };
    best.attempts = attempt;
    if (interference <= MAX_OTHERS) break;
    console.log(
      `  (other processes took ${fmt(interference * 100)}% of CPU ${SERVER_CORE}${attempt <= RETRIES ? ': measuring again' : ''})`,
    );
  }
  const c = best!;
  console.log(
    `  → ${name}: ratio ${fmt(c.ratio, 2)} (req/s), ${fmt(c.cpuRatio, 2)} (server CPU per request); added p50 ${fmt(c.addedP50, 2)} ms\n`,
  );
  return c;
}

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';

function printRow(m: Measured): void {
  const failed = m.errors + m.non2xx + m.warmupFailures;
  console.log(
    `  ${m.label.padEnd(34)} ${fmt(m.rps).padStart(7)} req/s  p50 ${fmt(m.p50, 2).padStart(7)}  p99 ${fmt(m.p99, 2).padStart(7)} ms  ` +
      `server CPU ${fmt(m.cpuPerRequestUs).padStart(5)} µs/req (${fmt(m.serverCpuShare * 100)}% of CPU ${SERVER_CORE}, others ${fmt(m.othersOnServerCore * 100)}%)  ` +
      `load ${fmt(m.loadCpuShare * 100)}%${m.loadCpuShare > SATURATED ? ' (saturated)' : ''}${failed ? `  FAILED ${failed}` : ''}`,
  );
}

function distribution(values: number[]): Distribution {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return { n: sorted.length, p50: at(50), p99: at(99), max: sorted.at(-1)! };
}

function versions() {
  const deno =
    spawnSync(resolveDenoBinary(process.env.BERTH_DENO), ['--version'])
      .stdout.toString()
      .split('\n')[0]
      ?.replace(/^deno\s+/, '')
      .split(' ')[0] ?? '?';
  const pkg = (name: string) => {
    try {
      return (
        JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }
      ).version;
    } catch {
      return '?';
    }
  };
  const git = (...args: string[]) => spawnSync('git', args, { cwd: ROOT }).stdout?.toString().trim() ?? '';
  return {
    node: process.version.slice(1),
    deno,
    autocannon: pkg('autocannon'),
    betterSqlite3: pkg('better-sqlite3'),
    berthCommit: git('rev-parse', '--short', 'HEAD'),
    // Whether the server's own code (not the benchmark or the docs) differs from that commit.
    berthTreeClean:
      git(
        'status',
        '--porcelain',
        '--',
        'control-plane',
        'runtime-host',
        'storage',
        'deno-shim',
        'package.json',
        'package-lock.json',
      ) === '',
  };
}

async function main() {
  checkPinning();
  pinSelf(LOAD_CORE);
  const results: BenchResults = {
    date: new Date().toISOString(),
    machine: { ...machine(), loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100) },
    versions: versions(),
    method: {
      serverCore: SERVER_CORE,
      loadCore: LOAD_CORE,
      seconds: SECONDS,
      connections: CONNECTIONS,
      warmupSeconds: WARMUP_SECONDS,
      mixedSeconds: MIXED_SECONDS,
      mixedConnections: MIXED_CONNECTIONS,
      coldRounds: COLD_ROUNDS,
      maxOthers: MAX_OTHERS,
      retries: RETRIES,
      loadGenerator: 'autocannon (programmatic, one process), latencies of every response at full resolution',
    },
    affinity: {},
    failures,
  } as BenchResults;
  const { machine: mc, versions: v } = results;
  console.log(
    `Berth benchmark on ${mc.cpu} (${mc.cores} cores), Node ${v.node}, Deno ${v.deno}, autocannon ${v.autocannon}; load average ${mc.loadAverageAtStart.join(' ')}`,
  );
  console.log(
    `servers under test on CPU ${SERVER_CORE}, load generator on CPU ${LOAD_CORE}; ${CONNECTIONS} connections, ${SECONDS} s per run after a ${WARMUP_SECONDS} s warm-up; mixed load ${MIXED_CONNECTIONS} connections for ${MIXED_SECONDS} s\n`,
  );

  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-'));
  let completed = false;
  try {
    await run(work, results);
    completed = true;
  } finally {
    await stopAll();
    // A run that broke keeps its data dirs and Berth's request logs, to find out why.
    if (process.env.BENCH_KEEP_DATA === '1' || !completed)
      console.log(`\nkept the data dirs and Berth's logs in ${work}`);
    else await fs.rm(work, { recursive: true, force: true });
  }

  if (ONLY.length > 0) {
    console.log(`BENCH_ONLY=${ONLY.join(',')}: no aims judged${WRITE_DOCS ? ', nothing written' : ''}`);
  } else {
    results.round3Aims = round3Aims(results);
    results.aims = aims(results);
    results.earlierAims = earlierAims(results);
    printReport(results);
  }
  if (WRITE_DOCS && ONLY.length === 0) {
    await writeDocs(results);
    console.log('\nwrote docs/benchmarks.md (Last run) and docs/benchmarks.json');
  }
  if (failures.length > 0) {
    console.log(`\n${failures.length} load run(s) had failed requests:`);
    for (const f of failures) console.log(`  !! ${f}`);
    process.exitCode = 1;
  }
}

/** `berth serve` on the server core with a data dir of its own, its owner's WRITE key and one site. */
async function startBerth(dir: string, env: NodeJS.ProcessEnv) {
  const serving = await startServe('berth serve', dir, env);
  const site = await serving.api
    .post('v0/sites', { json: { accountId: serving.accountId, name: 'bench', subdomain: 'bench' } })
    .json<{ id: string; bucketId: string }>();
  return { ...serving, site };
}

/** Each uploading load gets file numbers of its own, so no run (or second attempt) rewrites a file. */
let uploadRange = 0;
function freshUploads(target: LoadTarget): LoadTarget {
  return target.upload ? { ...target, upload: { ...target.upload, first: ++uploadRange * 10_000_000 } } : target;
}

async function run(work: string, results: BenchResults) {
  const filesDir = path.join(work, 'files');
  await fs.mkdir(filesDir);
  const small = crypto.randomBytes(1024);
  const large = crypto.randomBytes(1024 * 1024);
  await fs.writeFile(path.join(filesDir, 'small.bin'), small);
  await fs.writeFile(path.join(filesDir, 'large.bin'), large);
  const tsx = ['--import', 'tsx'];
  const deno = resolveDenoBinary(process.env.BERTH_DENO);
  const https = () => {
    console.log(`HTTPS (a fresh Berth with BERTH_TLS=acme, ${HTTPS_SECONDS} s per run)`);
    return httpsCosts({
      work,
      small,
      filesDir,
      connections: CONNECTIONS,
      startBerth,
      compare: (name, baseline, berth) => compare(name, baseline, berth, HTTPS_SECONDS),
      same,
    });
  };
  if (MAIN_SECTIONS.some(runs)) await onMainBerth();
  if (runs('https')) results.https = await https();
  if (runs('cold')) await coldPaths();
  if (runs('tenants')) await tenants();

  // Berth as operators run it: `berth serve`, request logging on, to a file.
  async function onMainBerth() {
    const { server: berth, origin, port, key, api, site } = await startBerth(path.join(work, 'main'), {});
    const host = `bench.localhost:${port}`;
    const siteClient = got.extend({ headers: { host }, responseType: 'buffer', retry: { limit: 0 } });
    for (const [name, bytes] of [
      ['small.bin', small],
      ['large.bin', large],
    ] as const) {
      await api.put(`v0/buckets/${site.bucketId}/objects/web/${name}`, {
        body: bytes,
        headers: { 'content-type': 'application/octet-stream' },
      });
    }
    for (const [name, file] of [
      ['hello', 'hello-function.ts'],
      ['dbfirst', 'db-first-function.ts'],
    ] as const) {
      await api.put(`v0/buckets/${site.bucketId}/objects/api/${name}.ts`, {
        body: await fs.readFile(path.join(ROOT, 'bench', file)),
      });
    }
    const db = await api.post(`v0/sites/${site.id}/databases`).json<{ database: { id: string } }>();
    const queryPath = `/v0/sites/${site.id}/databases/${db.database.id}/query`;
    for (const sql of ['CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)', "INSERT INTO kv VALUES ('hello', 'world')"])
      await api.post(queryPath.slice(1), { json: { sql } });

    const onSite = (label: string, p: string, connections = CONNECTIONS): LoadTarget => ({
      label,
      origin,
      path: p,
      connections,
      headers: { host },
    });
    const at = (label: string, p: number, pathname: string, connections = CONNECTIONS): LoadTarget => ({
      label,
      origin: `http://127.0.0.1:${p}`,
      path: pathname,
      connections,
    });

    const fnAnswer = (await siteClient.get(`${origin}/api/hello`)).body.toString();
    const octets = { 'content-type': 'application/octet-stream' };
    const berthUpload = (label: string, connections: number): LoadTarget => ({
      label,
      origin,
      path: '/',
      connections,
      method: 'PUT',
      headers: { ...octets, authorization: `Bearer ${key}` },
      upload: { prefix: `/v0/buckets/${site.bucketId}/objects/web/up-`, bytes: 1024, first: 0 },
    });

    if (runs('static')) {
      // Static files.
      console.log('Static files');
      const nodePort = await freePort();
      const node = await startPinned(
        'bare node http',
        SERVER_CORE,
        process.execPath,
        [...tsx, path.join(ROOT, 'bench/baselines.ts'), 'node', String(nodePort), filesDir],
        process.env,
        { ready: (l) => l === 'ready' },
      );
      for (const [name, bytes] of [
        ['small.bin', small],
        ['large.bin', large],
      ] as const) {
        const viaBerth = await siteClient.get(`${origin}/${name}`);
        const viaNode = await got.get(`http://127.0.0.1:${nodePort}/${name}`, { responseType: 'buffer' });
        same(viaBerth.body.equals(bytes) && viaNode.body.equals(bytes), `${name}: the file's bytes`);
      }
      results.static1k = await compare(
        '1 KiB web file',
        [node, at('bare node http, 1 KiB', nodePort, '/small.bin')],
        [berth, onSite('berth, 1 KiB', '/small.bin')],
      );
      results.static1m = await compare(
        '1 MiB web file',
        [node, at('bare node http, 1 MiB', nodePort, '/large.bin')],
        [berth, onSite('berth, 1 MiB', '/large.bin')],
      );
      await node.stop();
    }

    if (runs('functions')) {
      // Warm function against the same handler under deno serve, at the standard concurrency and swept.
      console.log('Warm function (hello world)');
      const denoPort = await freePort();
      const denoServe = await startPinned(
        'deno serve',
        SERVER_CORE,
        deno,
        [
          'serve',
          '--no-config',
          '--quiet',
          `--allow-net=127.0.0.1:${denoPort}`,
          '--host',
          '127.0.0.1',
          '--port',
          String(denoPort),
          path.join(ROOT, 'bench/hello-deno.ts'),
        ],
        { ...process.env, NO_COLOR: '1' },
      );
      await waitForPort(denoPort);
      const denoAnswer = await got.get(`http://127.0.0.1:${denoPort}/`).text();
      same(fnAnswer === denoAnswer, `the function answers "${fnAnswer}", deno serve "${denoAnswer}"`);
      results.hello = await compare(
        'hello-world function',
        [denoServe, at('bare deno serve', denoPort, '/')],
        [berth, onSite('berth /api/hello', '/api/hello')],
      );
      const workerdPort = await freePort();
      const workerd = await startPinned(
        'workerd',
        SERVER_CORE,
        workerdBinary,
        ['serve', path.join(ROOT, 'bench/workerd/hello.capnp'), '--socket-addr', `http=127.0.0.1:${workerdPort}`],
        process.env,
      );
      await waitForPort(workerdPort);
      const workerdAnswer = await got.get(`http://127.0.0.1:${workerdPort}/`).text();
      same(fnAnswer === workerdAnswer, `the function answers "${fnAnswer}", workerd "${workerdAnswer}"`);
      results.workerd = await compare(
        'hello-world function against workerd',
        [workerd, at('workerd', workerdPort, '/')],
        [berth, onSite('berth /api/hello', '/api/hello')],
      );
      await workerd.stop();
      results.affinity = affinityOf(berth, 'after the warm function runs');
      results.sweep = [];
      for (const connections of SWEEP) {
        console.log(`Warm function, ${connections} connection${connections === 1 ? '' : 's'}`);
        results.sweep.push({
          connections,
          ...(await compare(
            `hello-world function, ${connections} c`,
            [denoServe, at(`bare deno serve, ${connections} c`, denoPort, '/', connections)],
            [berth, onSite(`berth /api/hello, ${connections} c`, '/api/hello', connections)],
          )),
        });
      }
      await denoServe.stop();
    }

    if (runs('egress')) {
      // Outbound fetch: a function through the egress proxy against the same fetch from bare Deno, both
      // of a page served on a public-looking address (a network namespace of the bench's own).
      console.log('Outbound fetch (through the egress proxy)');
      const far = await startPublicHost();
      try {
        await api.put(`v0/buckets/${site.bucketId}/objects/api/fetch.ts`, {
          body: await fs.readFile(path.join(ROOT, 'bench/fetch-function.ts')),
        });
        const fetchPort = await freePort();
        const denoFetch = await startPinned(
          'deno serve + fetch',
          SERVER_CORE,
          deno,
          [
            'serve',
            '--no-config',
            '--quiet',
            `--allow-net=127.0.0.1:${fetchPort},${far.address}:80`,
            '--host',
            '127.0.0.1',
            '--port',
            String(fetchPort),
            path.join(ROOT, 'bench/fetch-deno.ts'),
          ],
          { ...process.env, NO_COLOR: '1' },
        );
        await waitForPort(fetchPort);
        const viaFunction = (await siteClient.get(`${origin}/api/fetch`)).body.toString();
        const viaDeno = await got.get(`http://127.0.0.1:${fetchPort}/`).text();
        same(viaFunction === viaDeno, `the function fetched "${viaFunction}", deno serve "${viaDeno}"`);
        results.egress = await compare(
          'outbound fetch',
          [denoFetch, at('bare deno serve, fetch', fetchPort, '/')],
          [berth, onSite('berth /api/fetch', '/api/fetch')],
          SECONDS,
          true,
        );
        await denoFetch.stop();
        // The proxy's own cost: what Berth's Node process spends per fetch beyond a hello-world call,
        // whose path (request in, the worker, answer out) the fetch's function takes as well.
        results.egressHello = await measure(berth, onSite('berth /api/hello', '/api/hello'), SECONDS, true);
        printRow(results.egressHello);
        const perFetch = results.egress.berth.ownCpuPerRequestUs!;
        const perHello = results.egressHello.ownCpuPerRequestUs!;
        results.egressProxyCpuUs = perFetch - perHello;
        console.log(
          `  → egress proxy CPU per outbound fetch: ${fmt(results.egressProxyCpuUs)} µs (Berth's Node process: ${fmt(perFetch)} µs per fetch, ${fmt(perHello)} µs per hello)\n`,
        );
      } finally {
        await far.stop();
      }
    }

    if (runs('database')) {
      // Site database.
      console.log('Site database');
      const dbAnswer = (await siteClient.get(`${origin}/api/dbfirst`)).body.toString();
      same(dbAnswer === JSON.stringify({ v: 'world' }), `the ctx.db.first function answers ${dbAnswer}`);
      results.dbFirst = await compare(
        'ctx.db.first function',
        [berth, onSite('berth /api/hello', '/api/hello')],
        [berth, onSite('berth /api/dbfirst', '/api/dbfirst')],
      );
      const sqlitePort = await freePort();
      const sqlite = await startPinned(
        'bare node http + better-sqlite3',
        SERVER_CORE,
        process.execPath,
        [
          ...tsx,
          path.join(ROOT, 'bench/baselines.ts'),
          'sqlite',
          String(sqlitePort),
          path.join(work, 'main', 'data', 'sites', site.id, 'db.sqlite'),
        ],
        process.env,
        { ready: (l) => l === 'ready' },
      );
      const body = JSON.stringify(BENCH_STATEMENT);
      const json = { 'content-type': 'application/json' };
      const viaEndpoint = await api.post(queryPath.slice(1), { body, headers: json }).json<QueryAnswer>();
      const viaSqlite = await got.post(`http://127.0.0.1:${sqlitePort}/`, { body, headers: json }).json<QueryAnswer>();
      same(
        JSON.stringify(withoutDuration(viaEndpoint)) === JSON.stringify(withoutDuration(viaSqlite)),
        `query answers ${JSON.stringify(viaEndpoint)} and ${JSON.stringify(viaSqlite)}`,
      );
      results.query = await compare(
        'query endpoint',
        [sqlite, { ...at('node http + better-sqlite3 direct', sqlitePort, '/'), method: 'POST', body, headers: json }],
        [
          berth,
          {
            label: 'berth query endpoint',
            origin,
            path: queryPath,
            connections: CONNECTIONS,
            method: 'POST',
            body,
            headers: { ...json, authorization: `Bearer ${key}` },
          },
        ],
      );
      await sqlite.stop();
    }

    if (runs('upload')) {
      // Uploads: every request a new 1 KiB file.
      console.log('1 KiB uploads');
      const uploadPort = await freePort();
      const uploadDir = path.join(work, 'upload-baseline');
      const uploads = await startPinned(
        'bare node http, write + fsync + sqlite insert',
        SERVER_CORE,
        process.execPath,
        [...tsx, path.join(ROOT, 'bench/baselines.ts'), 'upload', String(uploadPort), uploadDir],
        process.env,
        {
          ready: (l) => l === 'ready',
        },
      );
      const probe = crypto.randomBytes(1024);
      await api.put(`v0/buckets/${site.bucketId}/objects/web/up-check.bin`, { body: probe, headers: octets });
      await got.put(`http://127.0.0.1:${uploadPort}/up-check.bin`, { body: probe, headers: octets });
      const backFromBerth = await api.get(`v0/buckets/${site.bucketId}/objects/web/up-check.bin`, {
        responseType: 'buffer',
      });
      const backFromNode = await got.get(`http://127.0.0.1:${uploadPort}/up-check.bin`, { responseType: 'buffer' });
      same(backFromBerth.body.equals(probe) && backFromNode.body.equals(probe), 'an uploaded file read back');
      results.upload = await compare(
        '1 KiB upload',
        [
          uploads,
          {
            label: 'node http, write + fsync + insert',
            origin: `http://127.0.0.1:${uploadPort}`,
            path: '/',
            connections: CONNECTIONS,
            method: 'PUT',
            headers: octets,
            upload: { prefix: '/up-', bytes: 1024, first: 0 },
          },
        ],
        [berth, berthUpload('berth PUT web/up-<n>.bin', CONNECTIONS)],
      );
      await uploads.stop();
    }

    if (runs('mixed')) {
      // The mixed load.
      console.log(`Mixed load: ${MIXED_CONNECTIONS} connections for ${MIXED_SECONDS} s`);
      results.mixed = await mixed(berth, [
        onSite('static 1 KiB', '/small.bin'),
        onSite('function hello', '/api/hello'),
        onSite('function ctx.db.first', '/api/dbfirst'),
        berthUpload('upload 1 KiB', 0),
      ]);
    }

    if (runs('postgres')) {
      // Metadata on PostgreSQL: a second Berth, its metadata on a PostgreSQL server with its own crash
      // safety on, against the Berth above on SQLite. PostgreSQL runs on the server core and its CPU is
      // counted as Berth's: SQLite runs inside Berth's process, so each side has one core for everything.
      console.log('Metadata on PostgreSQL (against the same Berth on SQLite)');
      const cluster = await startCluster({ durable: true });
      try {
        const postmaster = cluster.serverPid();
        for (const pid of processTree(postmaster)) pinProcess(pid, SERVER_CORE, 'PostgreSQL');
        const admin = new pg.Client({ connectionString: cluster.adminUrl });
        await admin.connect();
        await admin.query("CREATE ROLE berth_bench LOGIN PASSWORD 'bench-password'");
        await admin.query('CREATE DATABASE berth_bench OWNER berth_bench');
        await admin.end();
        const onPg = await startBerth(path.join(work, 'postgres'), {
          BERTH_DATABASE_URL: `postgres://berth_bench:bench-password@127.0.0.1:${cluster.port}/berth_bench`,
        });
        onPg.server.companions = [postmaster];
        await onPg.api.put(`v0/buckets/${onPg.site.bucketId}/objects/web/small.bin`, { body: small, headers: octets });
        await onPg.api.put(`v0/buckets/${onPg.site.bucketId}/objects/api/hello.ts`, {
          body: await fs.readFile(path.join(ROOT, 'bench/hello-function.ts')),
        });
        const pgHost = `bench.localhost:${onPg.port}`;
        const pgClient = got.extend({ headers: { host: pgHost }, responseType: 'buffer', retry: { limit: 0 } });
        same((await pgClient.get(`${onPg.origin}/small.bin`)).body.equals(small), 'the 1 KiB file on PostgreSQL');
        same(
          (await pgClient.get(`${onPg.origin}/api/hello`)).body.toString() === fnAnswer,
          'the hello function on PostgreSQL',
        );
        const onPgSite = (label: string, p: string): LoadTarget => ({
          label,
          origin: onPg.origin,
          path: p,
          connections: CONNECTIONS,
          headers: { host: pgHost },
        });
        results.postgres = {
          static1k: await compare(
            '1 KiB web file, metadata on PostgreSQL',
            [berth, onSite('berth on SQLite, 1 KiB', '/small.bin')],
            [onPg.server, onPgSite('berth on PostgreSQL, 1 KiB', '/small.bin')],
          ),
          hello: await compare(
            'hello-world function, metadata on PostgreSQL',
            [berth, onSite('berth on SQLite, /api/hello', '/api/hello')],
            [onPg.server, onPgSite('berth on PostgreSQL, /api/hello', '/api/hello')],
          ),
          upload: await compare(
            '1 KiB upload, metadata on PostgreSQL',
            [berth, berthUpload('berth on SQLite, PUT', CONNECTIONS)],
            [
              onPg.server,
              {
                label: 'berth on PostgreSQL, PUT',
                origin: onPg.origin,
                path: '/',
                connections: CONNECTIONS,
                method: 'PUT',
                headers: { ...octets, authorization: `Bearer ${onPg.key}` },
                upload: { prefix: `/v0/buckets/${onPg.site.bucketId}/objects/web/up-`, bytes: 1024, first: 0 },
              },
            ],
          ),
        };
        await onPg.server.stop();
      } finally {
        cluster.stop();
      }
    }

    if (runs('objectstore')) {
      // Files on an object store: a Berth whose blobs are in a bucket of Ceph's radosgw (on a one-host
      // Ceph cluster), against the Berth above on the blob directory. The store's daemons run on the server
      // core and their CPU is counted as Berth's, as the file system's work is the kernel's on the other side.
      console.log('Files on an object store (against the same Berth on the blob directory)');
      const store = await startObjectStoreServer();
      try {
        for (const pid of store.pids()) for (const thread of processTree(pid)) pinProcess(thread, SERVER_CORE, 'Ceph');
        const s3 = new S3Client({
          endpoint: store.endpoint,
          region: 'us-east-1',
          forcePathStyle: true,
          credentials: { accessKeyId: store.accessKeyId, secretAccessKey: store.secretAccessKey },
        });
        await s3.send(new CreateBucketCommand({ Bucket: 'berth-bench' }));
        s3.destroy();
        const onS3 = await startBerth(path.join(work, 'object-store'), {
          BERTH_OBJECT_STORE: 's3://berth-bench',
          BERTH_S3_ENDPOINT: store.endpoint,
          BERTH_S3_FORCE_PATH_STYLE: 'true',
          AWS_ACCESS_KEY_ID: store.accessKeyId,
          AWS_SECRET_ACCESS_KEY: store.secretAccessKey,
          AWS_REGION: 'us-east-1',
        });
        onS3.server.companions = store.pids();
        for (const [name, bytes] of [
          ['small.bin', small],
          ['large.bin', large],
        ] as const) {
          await onS3.api.put(`v0/buckets/${onS3.site.bucketId}/objects/web/${name}`, { body: bytes, headers: octets });
        }
        const s3Host = `bench.localhost:${onS3.port}`;
        const s3Client = got.extend({ headers: { host: s3Host }, responseType: 'buffer', retry: { limit: 0 } });
        same((await s3Client.get(`${onS3.origin}/small.bin`)).body.equals(small), 'the 1 KiB file on the object store');
        const range = { range: 'bytes=65536-131071' };
        const ranged = await s3Client.get(`${onS3.origin}/large.bin`, { headers: range, responseType: 'buffer' });
        same(
          ranged.statusCode === 206 && ranged.body.equals(large.subarray(65536, 131072)),
          'a 64 KiB range of the 1 MiB file on the object store',
        );
        const onS3Site = (label: string, p: string, headers: Record<string, string> = {}): LoadTarget => ({
          label,
          origin: onS3.origin,
          path: p,
          connections: CONNECTIONS,
          headers: { host: s3Host, ...headers },
        });
        results.objectStore = {
          static1k: await compare(
            '1 KiB web file, files on an object store',
            [berth, onSite('berth on the blob directory, 1 KiB', '/small.bin')],
            [onS3.server, onS3Site('berth on the object store, 1 KiB', '/small.bin')],
          ),
          ranged1m: await compare(
            '64 KiB range of a 1 MiB web file, files on an object store',
            [
              berth,
              { ...onSite('berth on the blob directory, range of 1 MiB', '/large.bin'), headers: { host, ...range } },
            ],
            [onS3.server, onS3Site('berth on the object store, range of 1 MiB', '/large.bin', range)],
          ),
          upload: await compare(
            '1 KiB upload, files on an object store',
            [berth, berthUpload('berth on the blob directory, PUT', CONNECTIONS)],
            [
              onS3.server,
              {
                label: 'berth on the object store, PUT',
                origin: onS3.origin,
                path: '/',
                connections: CONNECTIONS,
                method: 'PUT',
                headers: { ...octets, authorization: `Bearer ${onS3.key}` },
                upload: { prefix: `/v0/buckets/${onS3.site.bucketId}/objects/web/up-`, bytes: 1024, first: 0 },
              },
            ],
          ),
        };
        await onS3.server.stop();
      } finally {
        await store.stop();
      }
    }

    await berth.stop();
  }

  // Cold paths, on a Berth of their own that evicts workers idle for 200 ms: the idle-eviction path
  // can then be measured, and each round of new functions starts with no worker of the last alive.
  // (The runs above keep the default idle time: a short one would evict workers whenever Node stalls.)
  async function coldPaths() {
    console.log('Cold first answers (a fresh Berth with BERTH_FUNCTION_IDLE_MS=200)');
    const coldBerth = await startBerth(path.join(work, 'cold'), { BERTH_FUNCTION_IDLE_MS: '200' });
    results.cold = await cold(
      coldBerth.server,
      coldBerth.origin,
      coldBerth.site.bucketId,
      coldBerth.api,
      got.extend({
        headers: { host: `bench.localhost:${coldBerth.port}` },
        responseType: 'buffer',
        retry: { limit: 0 },
      }),
    );
    await coldBerth.server.stop();
  }

  async function tenants() {
    console.log(`Many tenants (a fresh Berth, ${TENANTS} sites with one function each)`);
    const metricsToken = crypto.randomBytes(16).toString('hex');
    const tenantsBerth = await startBerth(path.join(work, 'tenants'), { BERTH_METRICS_TOKEN: metricsToken });
    results.manyTenants = await manyTenants({
      berth: { ...tenantsBerth, metricsToken },
      sites: TENANTS,
      fewSites: FEW_TENANTS,
      connections: CONNECTIONS,
      coldSeconds: TENANTS_COLD_SECONDS,
      stormConcurrency: STORM_CONCURRENCY,
      startSamples: START_SAMPLES,
      largeSites: LARGE_TENANTS,
      largeSeconds: LARGE_SECONDS,
      idleSeconds: IDLE_SECONDS,
      handler: await fs.readFile(path.join(ROOT, 'bench/hello-function.ts')),
      compare,
      noteFailures,
    });
    await tenantsBerth.server.stop();
  }
}

type QueryAnswer = { result?: Array<{ meta?: { duration?: number } }> };
function withoutDuration(answer: QueryAnswer): unknown {
  return { ...answer, result: answer.result?.map((r) => ({ ...r, meta: { ...r.meta, duration: 0 } })) };
}

function kindOf(pid: number, serverPid: number): string {
  if (pid === serverPid) return 'berth serve (node)';
  const cmd = commandLine(pid);
  if (cmd.includes('sqlite-host')) return 'site database process (deno)';
  if (/\bdeno\b/.test(cmd)) return 'function worker (deno)';
  return path.basename(cmd.split(' ')[0] ?? '?');
}

/** The CPUs each process of Berth's tree may use; fails the run if any may leave the server core. */
function affinityOf(server: Server, when: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pid of processTree(server.pid)) {
    const cpus = cpusAllowed(pid);
    out[`${kindOf(pid, server.pid)} ${pid}`] = cpus.join(',');
    if (cpus.length !== 1 || cpus[0] !== SERVER_CORE)
      failures.push(
        `${kindOf(pid, server.pid)} ${pid} may run on CPUs ${cpus.join(',')} ${when}, not only on ${SERVER_CORE}`,
      );
  }
  console.log(
    `  affinity ${when}: ${Object.entries(out)
      .map(([p, c]) => `${p} → ${c}`)
      .join('; ')}\n`,
  );
  return out;
}

async function mixed(berth: Server, targets: LoadTarget[]): Promise<BenchResults['mixed']> {
  const share = Math.floor(MIXED_CONNECTIONS / targets.length);
  for (const [i, t] of targets.entries()) t.connections = share + (i < MIXED_CONNECTIONS % targets.length ? 1 : 0);
  const early = Math.min(10, MIXED_SECONDS / 2);
  const late = Math.max(early, MIXED_SECONDS - 0.5);
  const times = [early];
  for (let t = 20; t < late; t += 10) times.push(t);
  times.push(late);
  const samples: Array<{ t: number; processes: Array<{ pid: number; kind: string; rss: number }> }> = [];
  const timers: NodeJS.Timeout[] = [];
  let stop: ReturnType<typeof watchServer> | undefined;
  const report = await runLoad(
    { targets: targets.map(freshUploads), seconds: MIXED_SECONDS, warmupSeconds: WARMUP_SECONDS },
    () => {
      stop = watchServer(berth, SERVER_CORE);
      for (const t of new Set(times)) {
        timers.push(
          setTimeout(() => {
            const processes = processTree(berth.pid).flatMap((pid) => {
              const rss = rssBytes(pid);
              return rss === undefined ? [] : [{ pid, kind: kindOf(pid, berth.pid), rss }];
            });
            samples.push({ t, processes });
          }, t * 1000),
        );
      }
    },
  );
  timers.forEach(clearTimeout);
  const watched = stop!();
  berth.checkAlive();
  const affinity = affinityOf(berth, 'after the mixed load');
  for (const r of report.results) {
    noteFailures(r);
    console.log(
      `  ${r.label.padEnd(24)} ${String(r.connections).padStart(3)} c ${fmt(r.rps).padStart(7)} req/s  p50 ${fmt(r.p50, 1).padStart(7)}  p99 ${fmt(r.p99, 1).padStart(7)}  max ${fmt(r.max, 0).padStart(6)} ms  ` +
        `failed ${r.errors + r.non2xx + r.warmupFailures}  longest wait at the end ${fmt(r.longestWaitAtEnd / 1000, 1)} s${r.neverAnswered ? ` (${r.neverAnswered} connections never answered)` : ''}`,
    );
  }
  const first = samples.find((s) => s.t === early);
  const last = samples.find((s) => s.t === late) ?? samples.at(-1);
  const memory = (first?.processes ?? []).map((p) => {
    const end = last?.processes.find((q) => q.pid === p.pid);
    return { pid: p.pid, kind: p.kind, early: p.rss, late: end?.rss ?? null, growth: end ? end.rss / p.rss - 1 : null };
  });
  for (const p of last?.processes ?? []) {
    if (!memory.some((m) => m.pid === p.pid))
      memory.push({ pid: p.pid, kind: `${p.kind}, started after ${early} s`, early: NaN, late: p.rss, growth: null });
  }
  console.log(`  RSS at ${early} s → ${late} s:`);
  for (const m of memory) {
    const mib = (bytes: number | null) =>
      bytes === null ? 'gone' : Number.isFinite(bytes) ? `${fmt(bytes / 2 ** 20, 1)} MiB` : '—';
    console.log(
      `    ${`${m.kind} ${m.pid}`.padEnd(48)} ${mib(m.early).padStart(10)} → ${mib(m.late)}${m.growth === null ? '' : ` (${m.growth >= 0 ? '+' : ''}${fmt(m.growth * 100, 1)}%)`}`,
    );
  }
  console.log(
    `  berth's CPU ${fmt(watched.cpu * 100)}% of CPU ${SERVER_CORE}, others ${fmt(watched.others * 100)}%; load generator ${fmt(report.cpuShare * 100)}%\n`,
  );
  return {
    seconds: MIXED_SECONDS,
    connections: MIXED_CONNECTIONS,
    paths: report.results,
    serverCpuShare: watched.cpu,
    othersOnServerCore: watched.others,
    loadCpuShare: report.cpuShare,
    memory: { early, late, processes: memory, samples },
    affinity,
  };
}

async function cold(
  server: Server,
  origin: string,
  bucketId: string,
  api: typeof got,
  siteClient: typeof got,
): Promise<BenchResults['cold']> {
  const tag = Date.now().toString(36);
  let n = 0;
  const source = (name: string) => `export default () => new Response('${name}');`;
  const put = (name: string) => api.put(`v0/buckets/${bucketId}/objects/api/${name}.ts`, { body: source(name) });
  const first = async (name: string): Promise<number> => {
    const started = CLOCK();
    const answer = await siteClient.get(`${origin}/api/${name}`, { throwHttpErrors: false }).catch((err: unknown) => {
      server.checkAlive();
      throw err;
    });
    const ms = CLOCK() - started;
    if (answer.statusCode !== 200 || answer.body.toString() !== name)
      failures.push(`cold /api/${name}: ${answer.statusCode} "${answer.body.toString().slice(0, 200)}"`);
    return ms;
  };

  // One at a time: the write's answer, then the first request.
  const writeToAnswer: number[] = [];
  const requestToAnswer: number[] = [];
  for (let i = 0; i < COLD_ALONE; i++) {
    const name = `cold${tag}x${n++}`;
    const started = CLOCK();
    await put(name);
    requestToAnswer.push(await first(name));
    writeToAnswer.push(CLOCK() - started);
    await sleep(100);
  }
  // Eight new functions, then all eight requested at once.
  const atOnce: number[] = [];
  for (let round = 0; round < COLD_ROUNDS; round++) {
    const names = Array.from({ length: COLD_AT_ONCE }, () => `cold${tag}x${n++}`);
    await Promise.all(names.map(put));
    atOnce.push(...(await Promise.all(names.map(first))));
    await sleep(500);
  }
  // A worker evicted for idleness (BERTH_FUNCTION_IDLE_MS=200 in this run) and called again.
  const afterIdle: number[] = [];
  for (let i = 0; i < COLD_ALONE; i++) {
    await sleep(1300); // past the idle time and one sweep
    afterIdle.push(await first(`cold${tag}x0`));
  }
  const c = {
    alone: distribution(requestToAnswer),
    writeToAnswer: distribution(writeToAnswer),
    atOnce: { ...distribution(atOnce), concurrent: COLD_AT_ONCE, rounds: COLD_ROUNDS },
    idleEvicted: distribution(afterIdle),
  };
  const line = (label: string, d: Distribution) =>
    console.log(
      `  ${label.padEnd(52)} p50 ${fmt(d.p50, 1).padStart(6)} ms  p99 ${fmt(d.p99, 1).padStart(6)} ms  (n=${d.n})`,
    );
  line('new function, request → first answer, alone', c.alone);
  line(`new functions, ${COLD_AT_ONCE} at a time, request → first answer`, c.atOnce);
  line('new function, write → first answer', c.writeToAnswer);
  line('idle-evicted worker → first answer', c.idleEvicted);
  console.log('');
  return c;
}

main().catch(async (err: unknown) => {
  console.error(err);
  await stopAll();
  process.exitCode = 1;
});
