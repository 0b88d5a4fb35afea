// What per-site analytics costs (issue 34): Berth servers of the same build on the server core, some
// with their defaults (every site request counted in memory, written to site_analytics at each minute's
// end) and some with BERTH_ANALYTICS=false, all serving the same 1 KiB web file, once plain and once with
// a Referer from another host (the hook then parses it and counts the host). One pair is loaded in turns,
// off-on-on-off; then each of two pairs (started in opposite orders) is loaded at once, both servers
// sharing the core, so drift on the machine hits both in the same instant: the judged figure is the ratio
// of their CPU per request, the mean of the two pairs' (two servers of one build differ by a few percent
// by themselves).
// Meanwhile a few other sites of the first pair get a steady trickle of requests from this process, and
// the rows the counting server writes are read from its meta.sqlite as they appear: with the default
// flush, each site that had traffic in a minute gets one row for it, a second after the minute's end.
// At the end the account's analytics API flushes what the node holds and the rows are counted per site
// and minute, and each trickle site's counted requests are checked against those sent.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import got from 'got';
import {
  checkPinning,
  LOAD_CORE,
  pinSelf,
  runLoad,
  SERVER_CORE,
  type Serving,
  startServe,
  stopAll,
  watchServer,
} from './harness.ts';
import type { LoadResult, LoadTarget } from './load-worker.ts';
import { type Aim, aimsTable } from './report.ts';

const SECONDS = 10;
const CONNECTIONS = 50;
const WARMUP_SECONDS = 2;
const PAUSE_MS = 2000;
const AIM = 0.97;
/** One round of turns: off-on-on-off, so slow drift on the machine hits both sides alike. */
const TURNS = <T>(off: T, on: T): T[] => [off, on, on, off];
/** The sites of the steady trickle, and how often each gets a request. */
const TRICKLE_SITES = ['alpha', 'beta', 'gamma'];
const TRICKLE_MS = 250;
/** The trickle lasts at least this long, so that its rows span two whole minutes and more. */
const TRICKLE_MIN_MS = 150_000;
const READ_ROWS_MS = 2000;
const REFERER = 'https://news.example.com/2026/11/a-post-about-berth';
const MINUTE = 60;

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';

interface Instance extends Serving {
  /** Site ids by subdomain. */
  sites: Map<string, string>;
}

/** `berth serve` on the server core with a data dir of its own, its sites each holding the 1 KiB file. */
async function startBerth(name: string, dir: string, env: NodeJS.ProcessEnv, file: Buffer): Promise<Instance> {
  // The rows written are those of the default flush, whatever the shell running the bench has set.
  const serving = await startServe(name, dir, { ...env, BERTH_ANALYTICS_FLUSH_MS: undefined });
  const { api, accountId, origin, port } = serving;
  const sites = new Map<string, string>();
  for (const subdomain of ['bench', ...TRICKLE_SITES]) {
    const site = await api
      .post('v0/sites', { json: { accountId, name: subdomain, subdomain } })
      .json<{ id: string; bucketId: string }>();
    await api.put(`v0/buckets/${site.bucketId}/objects/web/small.bin`, {
      body: file,
      headers: { 'content-type': 'application/octet-stream' },
    });
    const served = await got.get(`${origin}/small.bin`, {
      headers: { host: `${subdomain}.localhost:${port}` },
      responseType: 'buffer',
    });
    if (!served.body.equals(file)) throw new Error(`${name}: ${subdomain} does not answer the file's bytes`);
    sites.set(subdomain, site.id);
  }
  return { ...serving, sites };
}

interface Run extends LoadResult {
  server: string;
  cpuPerRequestUs: number;
  others: number;
}

const failures: string[] = [];

async function measure(b: Instance, label: string, headers: Record<string, string>): Promise<Run> {
  const target: LoadTarget = {
    label: `${label}, ${b.name}`,
    origin: b.origin,
    path: '/small.bin',
    connections: CONNECTIONS,
    headers: { host: `bench.localhost:${b.port}`, ...headers },
  };
  let stop: ReturnType<typeof watchServer> | undefined;
  const report = await runLoad({ targets: [target], seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }, () => {
    stop = watchServer(b.server, SERVER_CORE);
  });
  const watched = stop!();
  b.server.checkAlive();
  const r = report.results[0]!;
  const run: Run = {
    ...r,
    server: b.name,
    cpuPerRequestUs: ((watched.cpu * watched.seconds) / r.responses) * 1e6,
    others: watched.others,
  };
  const failed = r.errors + r.non2xx + r.warmupFailures;
  if (failed)
    failures.push(
      `${r.label}: ${r.errors} errors (${r.timeouts} timeouts), ${r.non2xx} non-2xx, ${r.warmupFailures} failures in the warm-up`,
    );
  console.log(
    `  ${r.label.padEnd(30)} ${fmt(r.rps).padStart(6)} req/s  p50 ${fmt(r.p50, 2).padStart(5)}  p99 ${fmt(r.p99, 2).padStart(6)} ms  ` +
      `server CPU ${fmt(run.cpuPerRequestUs, 1)} µs/req (${fmt(watched.cpu * 100)}% of CPU ${SERVER_CORE}, others ${fmt(run.others * 100)}%)  ` +
      `load ${fmt(report.cpuShare * 100)}%${failed ? `  FAILED ${failed}` : ''}`,
  );
  return run;
}

/**
 * Both servers under load at once, each from half the connections, on the one core they share: drift
 * on the machine (which moves one server's runs by more than analytics costs) then hits both in the same
 * instant, and each one's CPU per request is read from its own processes.
 */
async function measureTogether(
  sides: Instance[],
  label: string,
  headers: Record<string, string>,
): Promise<Map<string, { rps: number; cpuPerRequestUs: number }>> {
  const targets: LoadTarget[] = sides.map((b) => ({
    label: `${label}, together, ${b.name}`,
    origin: b.origin,
    path: '/small.bin',
    connections: CONNECTIONS / 2,
    headers: { host: `bench.localhost:${b.port}`, ...headers },
  }));
  let stops: Array<ReturnType<typeof watchServer>> = [];
  const report = await runLoad({ targets, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }, () => {
    stops = sides.map((b) => watchServer(b.server, SERVER_CORE));
  });
  const watched = stops.map((stop) => stop());
  const out = new Map<string, { rps: number; cpuPerRequestUs: number }>();
  sides.forEach((b, i) => {
    b.server.checkAlive();
    const r = report.results[i]!;
    const w = watched[i]!;
    const failed = r.errors + r.non2xx + r.warmupFailures;
    if (failed)
      failures.push(`${r.label}: ${r.errors} errors, ${r.non2xx} non-2xx, ${r.warmupFailures} in the warm-up`);
    const cpuPerRequestUs = ((w.cpu * w.seconds) / r.responses) * 1e6;
    out.set(b.name, { rps: r.rps, cpuPerRequestUs });
    console.log(
      `  ${r.label.padEnd(40)} ${fmt(r.rps).padStart(6)} req/s  server CPU ${fmt(cpuPerRequestUs, 1)} µs/req (${fmt(w.cpu * 100)}% of CPU ${SERVER_CORE})`,
    );
  });
  return out;
}

/** The runs of one side together: responses over seconds, the runs' CPU per request and latencies averaged. */
function pooled(runs: Run[]) {
  const responses = runs.reduce((s, r) => s + r.responses, 0);
  const seconds = runs.reduce((s, r) => s + r.seconds, 0);
  const mean = (f: (r: Run) => number) => runs.reduce((s, r) => s + f(r), 0) / runs.length;
  return {
    rps: responses / seconds,
    p50: mean((r) => r.p50),
    p99: mean((r) => r.p99),
    cpuPerRequestUs: mean((r) => r.cpuPerRequestUs),
    others: Math.max(...runs.map((r) => r.others)),
  };
}

/**
 * A request every TRICKLE_MS to each trickle site of each server, over kept connections, until `stop`
 * resolves; returns the answers each (server, site) gave.
 */
async function trickle(servers: Instance[], stop: Promise<void>): Promise<Map<string, number>> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const sent = new Map<string, number>();
  let over = false;
  void stop.then(() => (over = true));
  const get = (b: Instance, subdomain: string) =>
    new Promise<void>((resolve, reject) => {
      const req = http.get(
        `${b.origin}/small.bin`,
        { agent, headers: { host: `${subdomain}.localhost:${b.port}` } },
        (res) => {
          res.resume();
          res.once('end', () => {
            if (res.statusCode !== 200) reject(new Error(`${b.name}, ${subdomain}: status ${res.statusCode}`));
            else resolve();
          });
        },
      );
      req.once('error', reject);
    });
  await Promise.all(
    servers.flatMap((b) =>
      TRICKLE_SITES.map(async (subdomain) => {
        const key = `${b.name} ${subdomain}`;
        sent.set(key, 0);
        while (!over) {
          await get(b, subdomain);
          sent.set(key, sent.get(key)! + 1);
          await sleep(TRICKLE_MS);
        }
      }),
    ),
  );
  agent.destroy();
  return sent;
}

interface RowCount {
  site_id: string;
  at: number;
  period: number;
  rows: number;
  requests: number;
  bytes: number;
}

/** The minute rows of site_analytics of a server's meta.sqlite, grouped by site and minute, read-only. */
function readRows(b: Instance): RowCount[] {
  const db = new Database(path.join(b.dataDir, 'meta.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare(
        `SELECT site_id, at, period, count(*) AS rows, sum(requests) AS requests,
                sum(length(latency) + length(function_latency) + length(paths) + length(referrers)) AS bytes
           FROM site_analytics WHERE period = ${MINUTE} GROUP BY site_id, at, period ORDER BY at`,
      )
      .all() as RowCount[];
  } finally {
    db.close();
  }
}

/** The requests the hour rows of each site hold (each minute's counts are added to its hour's row too). */
function readHourRequests(b: Instance): Map<string, number> {
  const db = new Database(path.join(b.dataDir, 'meta.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare(`SELECT site_id, sum(requests) AS requests FROM site_analytics WHERE period = 3600 GROUP BY site_id`)
      .all() as Array<{ site_id: string; requests: number }>;
    return new Map(rows.map((row) => [row.site_id, row.requests]));
  } finally {
    db.close();
  }
}

async function main() {
  checkPinning();
  pinSelf(LOAD_CORE);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-analytics-'));
  let completed = false;
  try {
    const file = crypto.randomBytes(1024);
    const on = await startBerth('analytics on', path.join(work, 'on'), {}, file);
    const off = await startBerth('analytics off', path.join(work, 'off'), { BERTH_ANALYTICS: 'false' }, file);
    // A second pair started the other way round: two servers of one build differ by a few percent by
    // themselves (seen with both counting nothing), so the judged ratio is the mean of the two pairs'.
    const off2 = await startBerth('analytics off (2)', path.join(work, 'off2'), { BERTH_ANALYTICS: 'false' }, file);
    const on2 = await startBerth('analytics on (2)', path.join(work, 'on2'), {}, file);

    // The trickle, and when each minute's rows appear in the counting server's metadata.
    let stopTrickle!: () => void;
    const trickleStarted = Date.now();
    const trickling = trickle([on, off], new Promise<void>((resolve) => (stopTrickle = resolve)));
    const appeared = new Map<number, number>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const now = Date.now();
        for (const row of readRows(on)) if (!appeared.has(row.at)) appeared.set(row.at, now);
        await sleep(READ_ROWS_MS);
      }
    })();

    console.log(
      `\nThe 1 KiB web file with and without analytics: ${CONNECTIONS} connections, ${SECONDS} s per run after a ${WARMUP_SECONDS} s warm-up, off-on-on-off, then each of two pairs at once, twice; ` +
        `meanwhile ${TRICKLE_SITES.length} more sites of each server get a request every ${TRICKLE_MS} ms`,
    );
    const kinds: Array<{ label: string; what: string; headers: Record<string, string> }> = [
      { label: 'plain', what: '1 KiB web file', headers: {} },
      { label: 'with a Referer', what: '1 KiB web file, Referer from another host', headers: { referer: REFERER } },
    ];
    const results = [];
    for (const kind of kinds) {
      const runs: Run[] = [];
      for (const side of TURNS(off, on)) {
        await sleep(PAUSE_MS);
        runs.push(await measure(side, kind.label, kind.headers));
      }
      const a = pooled(runs.filter((r) => r.server === on.name));
      const b = pooled(runs.filter((r) => r.server === off.name));
      // Then each pair together, twice, the servers' order swapped.
      const pairs: Array<{ cpu: number; rps: number }> = [];
      for (const [counting, counted] of [
        [on, off],
        [on2, off2],
      ] as const) {
        const together: Array<Map<string, { rps: number; cpuPerRequestUs: number }>> = [];
        for (const order of [
          [counting, counted],
          [counted, counting],
        ]) {
          await sleep(PAUSE_MS);
          together.push(await measureTogether(order, kind.label, kind.headers));
        }
        const meanOf = (name: string, f: (x: { rps: number; cpuPerRequestUs: number }) => number) =>
          together.reduce((sum, m) => sum + f(m.get(name)!), 0) / together.length;
        pairs.push({
          cpu: meanOf(counted.name, (x) => x.cpuPerRequestUs) / meanOf(counting.name, (x) => x.cpuPerRequestUs),
          rps: meanOf(counting.name, (x) => x.rps) / meanOf(counted.name, (x) => x.rps),
        });
      }
      const cpuTogether = (pairs[0]!.cpu + pairs[1]!.cpu) / 2;
      const rpsTogether = (pairs[0]!.rps + pairs[1]!.rps) / 2;
      results.push({ kind, a, b, cpuTogether, rpsTogether, pairs });
    }

    const left = TRICKLE_MIN_MS - (Date.now() - trickleStarted);
    if (left > 0) {
      console.log(`\nThe trickle goes on for ${fmt(left / 1000)} s more`);
      await sleep(left);
    }
    stopTrickle();
    const sent = await trickling;
    const trickleEnded = Date.now();
    watching = false;
    await watcher;
    // Reading the analytics writes what the node holds: the minute under way, cut short.
    await on.api.get(`v0/accounts/${on.accountId}/analytics`);
    const rows = readRows(on);
    const hourRequests = readHourRequests(on);
    const offRows = readRows(off);
    if (offRows.length > 0) throw new Error(`analytics off wrote ${offRows.length} rows`);

    const aims: Aim[] = results.map(({ kind, a, b, cpuTogether, rpsTogether, pairs }) => ({
      path: `${kind.what}, analytics on`,
      baseline: 'the same, BERTH_ANALYTICS=false',
      figure: `ratio of server CPU per request, each pair loaded at once on CPU ${SERVER_CORE}, two pairs, 2 × ${SECONDS} s each`,
      value: cpuTogether,
      shown: `${fmt(cpuTogether, 3)} (the pairs ${pairs.map((x) => fmt(x.cpu, 3)).join(' and ')}; req/s ratio together ${fmt(rpsTogether, 3)}; in turns: req/s ${fmt(a.rps / b.rps, 3)}, CPU per request ${fmt(b.cpuPerRequestUs / a.cpuPerRequestUs, 3)})`,
      aim: `≥ ${AIM}`,
      met: cpuTogether >= AIM,
    }));
    console.log(`\nAims of issue 34 (${aims.filter((x) => x.met).length} of ${aims.length} met)\n`);
    console.log(aimsTable(aims).replaceAll('**', ''));
    console.log(`\n| run | side | req/s | p50 ms | p99 ms | server CPU per request | others on CPU ${SERVER_CORE} |`);
    console.log('|---|---|---:|---:|---:|---:|---:|');
    for (const { kind, a, b } of results)
      for (const [name, s] of [
        ['analytics on', a],
        ['analytics off', b],
      ] as const)
        console.log(
          `| ${kind.label} | ${name} | ${fmt(s.rps)} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${fmt(s.cpuPerRequestUs, 1)} µs | up to ${fmt(s.others * 100)}% |`,
        );

    // The rows, per site and minute.
    const subdomainOf = new Map([...on.sites].map(([subdomain, id]) => [id, subdomain]));
    const firstMinute = Math.floor(trickleStarted / 1000 / MINUTE) * MINUTE;
    const lastMinute = Math.floor(trickleEnded / 1000 / MINUTE) * MINUTE;
    const spanned = (lastMinute - firstMinute) / MINUTE + 1;
    console.log(
      `\nRows in site_analytics of the counting server, ${fmt((trickleEnded - trickleStarted) / 1000)} s of traffic over ${spanned} minutes of the clock (the default flush, ${MINUTE} s)`,
    );
    console.log(
      '| site | requests sent | requests counted | rows | minutes with traffic | most rows in one minute | mean bytes of JSON per row |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    let most = 0;
    for (const [subdomain, id] of on.sites) {
      const mine = rows.filter((r) => r.site_id === id);
      const count = mine.reduce((s, r) => s + r.rows, 0);
      const counted = mine.reduce((s, r) => s + r.requests, 0);
      const bytes = mine.reduce((s, r) => s + r.bytes, 0);
      const perMinute = Math.max(0, ...mine.map((r) => r.rows));
      most = Math.max(most, perMinute);
      // The trickle's requests, and the one that checked the site's file before.
      const trickled = sent.get(`${on.name} ${subdomain}`);
      const expected = trickled === undefined ? undefined : trickled + 1;
      if (expected !== undefined && expected !== counted)
        failures.push(`${subdomain}: ${expected} requests sent, ${counted} counted`);
      if ((hourRequests.get(id) ?? 0) !== counted)
        failures.push(`${subdomain}: its hour rows hold ${hourRequests.get(id) ?? 0} requests, its minutes ${counted}`);
      console.log(
        `| ${subdomain} | ${expected === undefined ? 'the load and its warm-ups' : fmt(expected)} | ${fmt(counted)} | ${count} | ${new Set(mine.map((r) => r.at)).size} | ${perMinute} | ${fmt(bytes / Math.max(1, count))} |`,
      );
    }
    const strangers = rows.filter((r) => !subdomainOf.has(r.site_id));
    if (strangers.length) failures.push(`${strangers.length} rows of sites the bench did not make`);
    console.log("\nWhen each minute's rows first appeared in meta.sqlite (read every 2 s), after the minute's end:");
    for (const [at, seen] of [...appeared].sort((x, y) => x[0] - y[0]))
      console.log(
        `  minute ${new Date(at * 1000).toISOString().slice(11, 16)}: ${fmt((seen - (at + MINUTE) * 1000) / 1000, 1)} s`,
      );
    console.log(
      `\nAt most ${most} row per site per minute on this node: a site with traffic every minute writes 1,440 minute rows a day per node; ` +
        'each minute is also added to its hour row (24 a day per node, what reads of whole hours read); after 48 hours the minutes are removed, and after 90 days the hours fold into 1 day row (kept two years).',
    );
    if (failures.length) {
      console.log(`\n${failures.length} problem(s):`);
      for (const f of failures) console.log(`  !! ${f}`);
      process.exitCode = 1;
    }
    completed = true;
  } finally {
    await stopAll();
    if (process.env.BENCH_KEEP_DATA === '1' || !completed)
      console.log(`\nkept the data dirs and Berth's logs in ${work}`);
    else await fs.rm(work, { recursive: true, force: true });
  }
}

main().catch(async (err: unknown) => {
  console.error(err);
  await stopAll();
  process.exitCode = 1;
});
