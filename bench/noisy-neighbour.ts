// `make bench-noisy`: how much one tenant burning CPU slows another site's static files. One site's
// function spins 20 ms of CPU per request on every core (Web Workers) under 16 connections while
// another site's 1 KiB file is measured, with function workers at a lower CPU priority (the default, nice +10) and at the same
// priority as the server, alternating in one run. Prints each p99, the ratios to an idle server, and
// the ratio between the two. BENCH_SECONDS sets each measurement's duration (default 5).
// The load generator (autocannon) runs pinned to CPU 1; Berth and its workers may use every core, as
// the burning function does: this measures sharing, not CPU cost per request.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import got from 'got';
import { DEFAULTS } from '../control-plane/config.ts';
import { startBerth } from '../control-plane/server.ts';
import { checkPinning, LOAD_CORE } from './harness.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = 3;
const BURN_CONNECTIONS = 16;
const MEASURE_CONNECTIONS = 16;

// Spins 20 ms of CPU per request in Web Workers, one per core: the worst a tenant can do to its neighbours.
const BURN_SOURCE = `const spin = 'self.onmessage = (e) => { const end = performance.now() + e.data; while (performance.now() < end) {} self.postMessage(0); };';
const workers = Array.from({ length: navigator.hardwareConcurrency }, () => {
  const worker = new Worker('data:text/javascript,' + encodeURIComponent(spin), { type: 'module' });
  const waiting: Array<() => void> = [];
  worker.onmessage = () => waiting.shift()?.();
  return { worker, waiting };
});
let next = 0;

export default async function (): Promise<Response> {
  const { worker, waiting } = workers[next++ % workers.length]!;
  await new Promise<void>((resolve) => {
    waiting.push(resolve);
    worker.postMessage(20);
  });
  return new Response('burnt');
}
`;

interface LoadResult {
  requests: number;
  p50: number;
  p99: number;
  errors: number;
}

/** autocannon in its own process on the load core against 127.0.0.1, for `seconds`. */
async function load(url: string, host: string, connections: number, seconds: number): Promise<LoadResult> {
  const args = [
    '-c',
    String(LOAD_CORE),
    path.join(ROOT, 'node_modules/.bin/autocannon'),
    '-c',
    String(connections),
    '-d',
    String(seconds),
    '-j',
    '-H',
    `host=${host}`,
    url,
  ];
  const { stdout } = await promisify(execFile)('taskset', args, { maxBuffer: 64 * 1024 * 1024 });
  const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
    requests: { average: number };
    latency: { p50: number; p99: number };
    errors: number;
    non2xx: number;
  };
  return { requests: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

/** One Berth with workers at `workerNice`: the static file's p99 alone, then next to the burning function. */
async function measure(workerNice: number): Promise<{ idle: LoadResult; busy: LoadResult; burn: LoadResult }> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-noisy-'));
  const berth = await startBerth({ ...DEFAULTS, port: 0, logLevel: 'silent', dataDir }, { workerNice });
  try {
    const api = got.extend({ prefixUrl: berth.url, headers: { authorization: `Bearer ${berth.owner!.writeKey}` } });
    const site = async (name: string) =>
      api
        .post('v0/sites', { json: { accountId: berth.owner!.accountId, name, subdomain: name } })
        .json<{ bucketId: string }>();
    const noisy = await site('noisy');
    const quiet = await site('quiet');
    await api.put(`v0/buckets/${noisy.bucketId}/objects/api/burn.ts`, { body: BURN_SOURCE });
    await api.put(`v0/buckets/${quiet.bucketId}/objects/web/small.bin`, { body: crypto.randomBytes(1024) });
    const host = (name: string) => `${name}.localhost:${berth.port}`;
    const file = `${berth.url}/small.bin`;
    const burnUrl = `${berth.url}/api/burn`;
    // Warm both paths (the worker starts on the first request).
    await load(burnUrl, host('noisy'), 1, 1);
    await load(file, host('quiet'), MEASURE_CONNECTIONS, 1);

    const idle = await load(file, host('quiet'), MEASURE_CONNECTIONS, SECONDS);
    const burning = load(burnUrl, host('noisy'), BURN_CONNECTIONS, SECONDS + 2);
    await sleep(1000);
    const busy = await load(file, host('quiet'), MEASURE_CONNECTIONS, SECONDS);
    return { idle, busy, burn: await burning };
  } finally {
    await berth.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (n: number, digits = 1) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main() {
  checkPinning();
  console.log(`Noisy neighbour on ${os.cpus()[0]?.model} (${os.cpus().length} cores), Node ${process.version}`);
  console.log(
    `another site's 1 KiB file at ${MEASURE_CONNECTIONS} connections, ${SECONDS} s (autocannon on CPU ${LOAD_CORE}), while one site's function burns 20 ms of CPU per request on every core at ${BURN_CONNECTIONS} connections; ${ROUNDS} rounds\n`,
  );
  const results: Record<'lower' | 'same', Array<Awaited<ReturnType<typeof measure>>>> = { lower: [], same: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [mode, nice] of round % 2 === 0
      ? ([
          ['same', 0],
          ['lower', 10],
        ] as const)
      : ([
          ['lower', 10],
          ['same', 0],
        ] as const)) {
      const r = await measure(nice);
      results[mode].push(r);
      const errors = r.idle.errors + r.busy.errors + r.burn.errors;
      console.log(
        `  round ${round + 1}, workers at ${mode === 'lower' ? 'nice +10' : 'nice +0 '}: file p99 idle ${fmt(r.idle.p99).padStart(6)} ms, busy ${fmt(r.busy.p99).padStart(6)} ms (p50 ${fmt(r.busy.p50)} ms, ${fmt(r.busy.requests, 0)} req/s); function ${fmt(r.burn.requests, 0)} req/s${errors ? `; ${errors} errors` : ''}`,
      );
    }
  }
  const summary = (mode: 'lower' | 'same') => ({
    idle: median(results[mode].map((r) => r.idle.p99)),
    busy: median(results[mode].map((r) => r.busy.p99)),
    served: median(results[mode].map((r) => r.busy.requests)),
    burn: median(results[mode].map((r) => r.burn.requests)),
  });
  const same = summary('same');
  const lower = summary('lower');
  const line = (label: string, s: ReturnType<typeof summary>) =>
    `  ${label.padEnd(34)} file p99 ${fmt(s.busy)} ms under load (${fmt(s.busy / s.idle, 1)}x idle ${fmt(s.idle)} ms), ${fmt(s.served, 0)} req/s; function ${fmt(s.burn, 0)} req/s`;
  console.log('\nMedian over rounds');
  console.log(line('workers at the server’s priority:', same));
  console.log(line('workers at nice +10:', lower));
  console.log(`  ratio of p99 under load, same priority / lower priority: ${fmt(same.busy / lower.busy, 2)}`);
}

await main();
