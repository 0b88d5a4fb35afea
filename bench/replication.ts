// What continuous replication of site databases costs (issue 33): two Berth servers side by side on
// the server core, the same build, one with its defaults (each site database replicated by Litestream
// to a folder of the data dir) and one with BERTH_DATABASE_REPLICATION=false. Each has a site whose
// function does one INSERT through ctx.db per request (bench/db-insert-function.ts, the row carrying
// the time it was written). Both get the same load in turns, off-on-on-off, so drift on the machine
// hits both; their req/s give the ratio (their CPU per request when other processes took much of the
// server's core, as in bench/report.ts). Then, on a second site of the replicated one, the same load
// again while the replica's lag is read from outside: the API's restore-points (its `latest`, to the second) and the
// replica itself, restored with the Litestream binary into a temporary file over and over, its newest
// row against the time it was written; after the load, how long the last acknowledged write takes to
// reach the replica. Per-process CPU (Node, the function worker, the database process, Litestream)
// is printed for every run.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import got from 'got';
import {
  listGenerations,
  type ReplicaTarget,
  type ReplicationTiming,
  restoreReplica,
} from '../control-plane/site-databases/replication/litestream.ts';
import {
  checkPinning,
  commandLine,
  LOAD_CORE,
  pinSelf,
  processCpuSeconds,
  processTree,
  ROOT,
  runLoad,
  SERVER_CORE,
  type Server,
  type Serving,
  startServe,
  stopAll,
  watchServer,
} from './harness.ts';
import type { LoadResult, LoadTarget } from './load-worker.ts';
import { type Aim, aimsTable } from './report.ts';

const SECONDS = 15;
const CONNECTIONS = 16;
const WARMUP_SECONDS = 2;
/** Between two runs: the last run's answers and the engine's shipping of them settle. */
const PAUSE_MS = 3000;
const AIM = 0.8;
/** Rounds of off-on-on-off. */
const ROUNDS = 2;
/** Past this share of the server's core taken by other processes, req/s say more of them than of Berth. */
const MAX_OTHERS = 0.15;
const POLL_MS = 1000;

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';

type Instance = Serving;

/** A site of one of the servers, with its insert function and its database. */
interface Berth extends Instance {
  host: string;
  siteId: string;
  base: string;
}

/** A new site on `s` with the insert function and a database of its own, its first row written. */
async function withSite(s: Instance, subdomain: string): Promise<Berth> {
  const { api, origin, name } = s;
  const site = await api
    .post('v0/sites', { json: { accountId: s.accountId, name: subdomain, subdomain } })
    .json<{ id: string; bucketId: string }>();
  await api.put(`v0/buckets/${site.bucketId}/objects/api/insert.ts`, {
    body: await fs.readFile(path.join(ROOT, 'bench/db-insert-function.ts')),
  });
  const db = await api.post(`v0/sites/${site.id}/databases`).json<{ database: { id: string } }>();
  const base = `v0/sites/${site.id}/databases/${db.database.id}`;
  await api.post(`${base}/query`, {
    json: { sql: 'CREATE TABLE writes (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)' },
  });
  const berth = { ...s, host: `${subdomain}.localhost:${s.port}`, siteId: site.id, base };
  const answer = await got
    .get(`${origin}/api/insert`, { headers: { host: berth.host } })
    .json<{ changes: number; lastInsertRowId: number }>();
  if (answer.changes !== 1 || answer.lastInsertRowId !== 1)
    throw new Error(`${name}: the insert function answered ${JSON.stringify(answer)}`);
  return berth;
}

const target = (b: Berth): LoadTarget => ({
  label: b.name,
  origin: b.origin,
  path: '/api/insert',
  connections: CONNECTIONS,
  headers: { host: b.host },
});

function kindOf(pid: number, serverPid: number): string {
  if (pid === serverPid) return 'node';
  const cmd = commandLine(pid);
  if (cmd.includes('sqlite-host')) return 'database process';
  if (cmd.includes('litestream')) return 'litestream';
  if (/\bdeno\b/.test(cmd)) return 'function worker';
  return path.basename(cmd.split(' ')[0] ?? '?');
}

/** CPU seconds used so far by each process of the server's tree, summed by kind. */
function cpuByPid(server: Server): Map<number, { kind: string; cpu: number }> {
  const out = new Map<number, { kind: string; cpu: number }>();
  for (const pid of processTree(server.pid)) {
    const cpu = processCpuSeconds(pid);
    if (cpu !== undefined) out.set(pid, { kind: kindOf(pid, server.pid), cpu });
  }
  return out;
}

function cpuByKind(before: Map<number, { cpu: number }>, after: Map<number, { kind: string; cpu: number }>) {
  const kinds: Record<string, number> = {};
  for (const [pid, { kind, cpu }] of after) kinds[kind] = (kinds[kind] ?? 0) + cpu - (before.get(pid)?.cpu ?? 0);
  return kinds;
}

interface Run extends LoadResult {
  server: string;
  serverCpuShare: number;
  cpuPerRequestUs: number;
  othersOnServerCore: number;
  loadCpuShare: number;
  /** Each kind of process's CPU per response, in µs. */
  perRequestUs: Record<string, number>;
}

const failures: string[] = [];

/** One load against one Berth; `during` runs from the start of the measured run to its end. */
async function measure(b: Berth, during?: (done: Promise<void>) => Promise<void>): Promise<Run> {
  let stop: ReturnType<typeof watchServer> | undefined;
  let before = new Map<number, { cpu: number }>();
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  let sampling: Promise<void> = Promise.resolve();
  const report = await runLoad({ targets: [target(b)], seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }, () => {
    stop = watchServer(b.server, SERVER_CORE);
    before = cpuByPid(b.server);
    if (during) sampling = during(done);
  });
  const after = cpuByPid(b.server);
  const watched = stop!();
  ended();
  await sampling;
  b.server.checkAlive();
  const r = report.results[0]!;
  const perRequestUs = Object.fromEntries(
    Object.entries(cpuByKind(before, after)).map(([kind, cpu]) => [kind, (cpu / r.responses) * 1e6]),
  );
  const run: Run = {
    ...r,
    server: b.name,
    serverCpuShare: watched.cpu,
    cpuPerRequestUs: ((watched.cpu * watched.seconds) / r.responses) * 1e6,
    othersOnServerCore: watched.others,
    loadCpuShare: report.cpuShare,
    perRequestUs,
  };
  const failed = r.errors + r.non2xx + r.warmupFailures;
  if (failed)
    failures.push(
      `${r.label}: ${r.errors} errors (${r.timeouts} timeouts), ${r.non2xx} non-2xx, ${r.warmupFailures} failures in the warm-up`,
    );
  const kinds = Object.entries(perRequestUs)
    .map(([kind, us]) => `${kind} ${fmt(us)}`)
    .join(', ');
  console.log(
    `  ${r.label.padEnd(18)} ${fmt(r.rps).padStart(6)} req/s  p50 ${fmt(r.p50, 2).padStart(6)}  p99 ${fmt(r.p99, 2).padStart(6)} ms  ` +
      `server CPU ${fmt(run.cpuPerRequestUs)} µs/req (${kinds}; ${fmt(run.serverCpuShare * 100)}% of CPU ${SERVER_CORE}, others ${fmt(run.othersOnServerCore * 100)}%)  ` +
      `load ${fmt(run.loadCpuShare * 100)}%${failed ? `  FAILED ${failed}` : ''}`,
  );
  return run;
}

/** The runs of one side together: responses over seconds, latencies of the runs pooled by their medians' mean. */
function pooled(runs: Run[]) {
  const responses = runs.reduce((s, r) => s + r.responses, 0);
  const seconds = runs.reduce((s, r) => s + r.seconds, 0);
  const mean = (f: (r: Run) => number) => runs.reduce((s, r) => s + f(r), 0) / runs.length;
  const kinds = [...new Set(runs.flatMap((r) => Object.keys(r.perRequestUs)))];
  return {
    rps: responses / seconds,
    p50: mean((r) => r.p50),
    p99: mean((r) => r.p99),
    cpuPerRequestUs: mean((r) => r.cpuPerRequestUs),
    others: Math.max(...runs.map((r) => r.othersOnServerCore)),
    perRequestUs: Object.fromEntries(kinds.map((k) => [k, mean((r) => r.perRequestUs[k] ?? 0)])),
  };
}

function distribution(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
  return { n: sorted.length, p50: at(50), max: sorted.at(-1) ?? NaN };
}

/** The replicated Berth's replica of its site's database, read with the engine's own restore. */
function replicaReader(b: Berth, work: string) {
  const target: ReplicaTarget = { kind: 'dir', dir: path.join(b.dataDir, 'database-replicas') };
  // Restores read only the replica; the timing matters to `replicate`, not to them.
  const timing: ReplicationTiming = { retentionMs: 7 * 24 * 3600_000, snapshotIntervalMs: 24 * 3600_000 };
  const workDir = path.join(work, 'restores');
  let n = 0;
  return async (): Promise<{ startedAt: number; endedAt: number; newest: number; rows: number }> => {
    const generations = await listGenerations(b.siteId, target, timing, workDir);
    const generation = generations.sort((a, b) => b.end.getTime() - a.end.getTime())[0]?.generation;
    if (!generation) throw new Error('the replica holds no generation');
    const out = path.join(workDir, `restored-${n++}.sqlite`);
    const startedAt = Date.now();
    await restoreReplica(b.siteId, target, timing, workDir, out, { generation });
    const endedAt = Date.now();
    const restored = new Database(out, { readonly: true });
    const row = restored.prepare('SELECT max(at) AS newest, count(*) AS rows FROM writes').get() as {
      newest: number;
      rows: number;
    };
    restored.close();
    await fs.rm(out, { force: true });
    return { startedAt, endedAt, ...row };
  };
}

async function main() {
  checkPinning();
  pinSelf(LOAD_CORE);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-replication-'));
  let completed = false;
  try {
    const onServer = await startServe('replication on', path.join(work, 'on'), {});
    const offServer = await startServe('replication off', path.join(work, 'off'), {
      BERTH_DATABASE_REPLICATION: 'false',
    });
    const on = await withSite(onServer, 'bench');
    const off = await withSite(offServer, 'bench');
    console.log(
      `\nctx.db writes with and without replication: one INSERT per request, ${CONNECTIONS} connections, ${SECONDS} s per run after a ${WARMUP_SECONDS} s warm-up, off-on-on-off`,
    );
    const runs: Run[] = [];
    for (const side of Array.from({ length: ROUNDS }, () => [off, on, on, off]).flat()) {
      await sleep(PAUSE_MS);
      runs.push(await measure(side));
    }
    const a = pooled(runs.filter((r) => r.server === on.name));
    const b = pooled(runs.filter((r) => r.server === off.name));
    const ratio = a.rps / b.rps;
    const cpuRatio = b.cpuPerRequestUs / a.cpuPerRequestUs;
    const others = Math.max(a.others, b.others);
    const disturbed = others > MAX_OTHERS;
    const judged = disturbed ? cpuRatio : ratio;

    // The lag: the same load on the replicated Berth, read from outside meanwhile.
    console.log(
      `\nThe replica's lag under the same load (replication on; restore-points every ${POLL_MS} ms, restores back to back)`,
    );
    // A site of its own: each restore replays the replica's log from its first snapshot, which stays
    // short for a database that has taken this run's writes alone.
    const lag = await withSite(onServer, 'lag');
    const restore = replicaReader(lag, work);
    const pointsTrail: number[] = [];
    const restoreTrail: number[] = [];
    const restoreMs: number[] = [];
    await sleep(PAUSE_MS);
    const lagRun = await measure(lag, async (done) => {
      let over = false;
      void done.then(() => (over = true));
      const poll = (async () => {
        while (!over) {
          const points = await lag.api.get(`${lag.base}/restore-points`).json<{ latest: string | null }>();
          const now = Date.now();
          if (points.latest) pointsTrail.push(now - Date.parse(points.latest));
          await sleep(POLL_MS);
        }
      })();
      const restores = (async () => {
        while (!over) {
          const r = await restore();
          restoreTrail.push(r.startedAt - r.newest);
          restoreMs.push(r.endedAt - r.startedAt);
        }
      })();
      await Promise.all([poll, restores]);
    });
    // After the load: when the last acknowledged write is in the replica.
    const last = await lag.api
      .post(`${lag.base}/query`, { json: { sql: 'SELECT max(at) AS newest, count(*) AS rows FROM writes' } })
      .json<{ result: Array<{ results: Array<{ newest: number; rows: number }> }> }>();
    const { newest: lastWrite, rows: written } = last.result[0]!.results[0]!;
    let caughtUp: { startedAt: number; endedAt: number; newest: number; rows: number } | undefined;
    let before = lastWrite;
    for (let i = 0; i < 200; i++) {
      const r = await restore();
      if (r.rows >= written) {
        caughtUp = r;
        break;
      }
      before = r.startedAt;
    }
    if (!caughtUp) throw new Error('the replica did not receive the last write within 200 restores');
    const points = distribution(pointsTrail);
    const staleness = distribution(restoreTrail);
    const restoreTime = distribution(restoreMs);
    const drainFrom = Math.max(0, before - lastWrite);
    const drainTo = caughtUp.endedAt - lastWrite;

    const aims: Aim[] = [
      {
        path: 'function with one `ctx.db` INSERT, replication on (to a folder)',
        baseline: 'the same, BERTH_DATABASE_REPLICATION=false',
        figure: `${disturbed ? 'ratio of server CPU per request' : 'req/s ratio'}, ${CONNECTIONS} connections, ${2 * ROUNDS} × ${SECONDS} s each side`,
        value: judged,
        shown: disturbed
          ? `${fmt(cpuRatio, 2)} (${fmt(b.cpuPerRequestUs)} / ${fmt(a.cpuPerRequestUs)} µs; req/s ratio ${fmt(ratio, 2)}, ${fmt(a.rps)} / ${fmt(b.rps)} req/s, not judged: other processes took up to ${fmt(others * 100)}% of the server's CPU)`
          : `${fmt(ratio, 2)} (${fmt(a.rps)} / ${fmt(b.rps)} req/s; by CPU per request ${fmt(cpuRatio, 2)})`,
        aim: `≥ ${AIM}`,
        met: judged >= AIM,
      },
    ];
    console.log(`\nAims of issue 33 (${aims.filter((x) => x.met).length} of ${aims.length} met)\n`);
    console.log(aimsTable(aims).replaceAll('**', ''));
    const kinds = [...new Set([...Object.keys(a.perRequestUs), ...Object.keys(b.perRequestUs)])].filter(
      (k) => (a.perRequestUs[k] ?? 0) >= 0.5 || (b.perRequestUs[k] ?? 0) >= 0.5,
    );
    console.log(
      `\n| side | req/s | p50 ms | p99 ms | server CPU per request | ${kinds.join(' | ')} | others on CPU ${SERVER_CORE} |`,
    );
    console.log(`|---|---:|---:|---:|---:|${kinds.map(() => '---:|').join('')}---:|`);
    for (const [name, s] of [
      ['replication on', a],
      ['replication off', b],
    ] as const)
      console.log(
        `| ${name} | ${fmt(s.rps)} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${fmt(s.cpuPerRequestUs)} µs | ${kinds.map((k) => `${fmt(s.perRequestUs[k] ?? 0)} µs`).join(' | ')} | up to ${fmt(s.others * 100)}% |`,
      );
    console.log(
      `\nReplica lag under load (${fmt(lagRun.rps)} req/s, ${CONNECTIONS} connections, ${SECONDS} s; ${fmt(written)} rows in the database at the end)`,
    );
    console.log('| measure | p50 | max | samples |');
    console.log('|---|---:|---:|---:|');
    console.log(
      `| now − restore-points' \`latest\` (whole seconds: 1,000 ms or more by its granularity) | ${fmt(points.p50)} ms | ${fmt(points.max)} ms | ${points.n} |`,
    );
    console.log(
      `| a restore's start − the newest row it gave back | ${fmt(staleness.p50)} ms | ${fmt(staleness.max)} ms | ${staleness.n} |`,
    );
    console.log(
      `| how long a restore took | ${fmt(restoreTime.p50)} ms | ${fmt(restoreTime.max)} ms | ${restoreTime.n} |`,
    );
    console.log(
      `\nAfter the load: the last acknowledged write reached the replica ${fmt(drainFrom)}–${fmt(drainTo)} ms after it was written (restores back to back).`,
    );
    if (failures.length) {
      console.log(`\n${failures.length} load run(s) had failed requests:`);
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
