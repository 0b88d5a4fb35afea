// `make bench`: Berth against its baselines, side by side in one run, with the same load generator
// (autocannon, in its own process) and the same concurrency. Prints requests/s, latency and ratios.
//   static files: Berth vs a bare Node http server holding the same bytes in memory (1 KiB, 1 MiB)
//   functions:    a warm hello-world function vs the same handler under a bare `deno serve`
//   site database: a function doing one ctx.db.first vs hello world; the query endpoint vs the same
//                 statement run on SQLite directly behind a bare Node http server
//   cold paths:   write of a new function → first answer; idle-evicted worker → first answer
// BENCH_SECONDS sets each load run's duration (default 10), BENCH_CONNECTIONS the concurrency (50).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import got from 'got';
import { resolveDenoBinary } from '../runtime-host/deno-binary.ts';
import { BENCH_STATEMENT } from './baselines.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const children: ChildProcess[] = [];

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once something accepts connections on `port`. */
async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on port ${port}`);
}

/** Starts a process; resolves once a line of its stdout satisfies `ready` (at once without one). */
function start(command: string, args: string[], env: NodeJS.ProcessEnv, ready?: (line: string) => boolean): Promise<{ lines: string[] }> {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    let settled = !ready;
    if (!ready) resolve({ lines });
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const line of parts) {
        if (lines.length < 100) lines.push(line);
        if (!settled && ready?.(line)) {
          settled = true;
          resolve({ lines });
        }
      }
    });
    child.stderr!.on('data', () => {});
    child.once('exit', (code) => {
      if (!settled) reject(new Error(`${command} exited with ${code}`));
    });
  });
}

interface LoadResult {
  requests: number;
  p50: number;
  p99: number;
  throughputMBs: number;
  errors: number;
  non2xx: number;
}

async function load(url: string, host?: string, post?: { body: string; key?: string }): Promise<LoadResult> {
  const args = ['-c', String(CONNECTIONS), '-d', String(SECONDS), '-j', '--warmup', '[', '-c', String(CONNECTIONS), '-d', '2', ']'];
  if (host) args.push('-H', `host=${host}`);
  if (post) {
    args.push('-m', 'POST', '-b', post.body, '-H', 'content-type=application/json');
    if (post.key) args.push('-H', `authorization=Bearer ${post.key}`);
  }
  const { stdout } = await promisify(execFile)(path.join(ROOT, 'node_modules/.bin/autocannon'), [...args, url], { maxBuffer: 64 * 1024 * 1024 });
  // With a warm-up, autocannon prints one JSON line per run: the measured run is the last.
  const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
    requests: { average: number };
    latency: { p50: number; p99: number };
    throughput: { average: number };
    errors: number;
    non2xx: number;
  };
  return { requests: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, throughputMBs: r.throughput.average / 1048576, errors: r.errors, non2xx: r.non2xx };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function row(label: string, r: LoadResult): string {
  return `  ${label.padEnd(28)} ${fmt(r.requests).padStart(9)} req/s   p50 ${fmt(r.p50, 1).padStart(6)} ms   p99 ${fmt(r.p99, 1).padStart(6)} ms   ${fmt(r.throughputMBs, 1).padStart(7)} MB/s   errors ${r.errors + r.non2xx}`;
}

let failures = 0;
function check(result: LoadResult, label: string) {
  if (result.errors > 0 || result.non2xx > 0) {
    failures++;
    console.log(`  !! ${label}: ${result.errors} errors and ${result.non2xx} non-2xx answers`);
  }
}

async function main() {
  console.log(`Berth benchmark on ${os.cpus()[0]?.model} (${os.cpus().length} cores), Node ${process.version}`);
  console.log(`autocannon: ${CONNECTIONS} connections, ${SECONDS} s per run after a 2 s warm-up\n`);

  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-'));
  const filesDir = path.join(work, 'files');
  await fs.mkdir(filesDir);
  const small = crypto.randomBytes(1024);
  const large = crypto.randomBytes(1024 * 1024);
  await fs.writeFile(path.join(filesDir, 'small.bin'), small);
  await fs.writeFile(path.join(filesDir, 'large.bin'), large);

  // Berth as operators run it: `berth serve`, request logging on (to a pipe we drain).
  const berthPort = await freePort();
  const berth = await start(process.execPath, [path.join(ROOT, 'control-plane/cli/berth.js'), 'serve'], {
    ...process.env,
    BERTH_PORT: String(berthPort),
    BERTH_DATA_DIR: path.join(work, 'data'),
    BERTH_FUNCTION_IDLE_MS: '200',
  }, (line) => line.includes('"msg":"listening"'));
  const output = berth.lines.join('\n');
  const key = /WRITE key:\s+(\S+)/.exec(output)![1]!;
  const accountId = /account:\s+(\S+)/.exec(output)![1]!;
  const api = got.extend({ prefixUrl: `http://127.0.0.1:${berthPort}`, headers: { authorization: `Bearer ${key}` } });
  const site = await api.post('v0/sites', { json: { accountId, name: 'bench', subdomain: 'bench' } }).json<{ id: string; bucketId: string }>();
  const host = `bench.localhost:${berthPort}`;
  for (const [name, bytes] of [['small.bin', small], ['large.bin', large]] as const) {
    await api.put(`v0/buckets/${site.bucketId}/objects/web/${name}`, { body: bytes });
  }
  await api.put(`v0/buckets/${site.bucketId}/objects/api/hello.ts`, { body: await fs.readFile(path.join(ROOT, 'bench/hello-function.ts')) });

  const nodePort = await freePort();
  await start(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/baselines.ts'), 'node', String(nodePort), filesDir], process.env, (l) => l === 'ready');
  const denoPort = await freePort();
  await start(resolveDenoBinary(process.env.BERTH_DENO), ['serve', '--no-config', '--quiet', `--allow-net=127.0.0.1:${denoPort}`, '--host', '127.0.0.1', '--port', String(denoPort), path.join(ROOT, 'bench/hello-deno.ts')], { ...process.env, NO_COLOR: '1' });
  await waitForPort(denoPort);

  // Both sides must answer the same bytes before anything is measured.
  const siteClient = got.extend({ headers: { host }, responseType: 'buffer' });
  for (const [name, bytes] of [['small.bin', small], ['large.bin', large]] as const) {
    const viaBerth = await siteClient.get(`http://127.0.0.1:${berthPort}/${name}`);
    const viaNode = await got.get(`http://127.0.0.1:${nodePort}/${name}`, { responseType: 'buffer' });
    if (!viaBerth.body.equals(bytes) || !viaNode.body.equals(bytes)) throw new Error(`${name}: the servers do not answer the same bytes`);
  }
  const fnAnswer = (await siteClient.get(`http://127.0.0.1:${berthPort}/api/hello`)).body.toString();
  const denoAnswer = await got.get(`http://127.0.0.1:${denoPort}/`).text();
  if (fnAnswer !== denoAnswer) throw new Error(`the function answers "${fnAnswer}", deno serve "${denoAnswer}"`);

  console.log('Static files');
  for (const [name, label] of [['small.bin', '1 KiB'], ['large.bin', '1 MiB']] as const) {
    const bare = await load(`http://127.0.0.1:${nodePort}/${name}`);
    const viaBerth = await load(`http://127.0.0.1:${berthPort}/${name}`, host);
    check(bare, `bare ${label}`);
    check(viaBerth, `berth ${label}`);
    console.log(row(`bare node http, ${label}`, bare));
    console.log(row(`berth, ${label}`, viaBerth));
    console.log(`  ratio berth / bare (${label}): ${fmt(viaBerth.requests / bare.requests, 2)}\n`);
  }

  console.log('Warm function (hello world)');
  const bareDeno = await load(`http://127.0.0.1:${denoPort}/`);
  const fn = await load(`http://127.0.0.1:${berthPort}/api/hello`, host);
  check(bareDeno, 'bare deno serve');
  check(fn, 'berth function');
  console.log(row('bare deno serve', bareDeno));
  console.log(row('berth /api/hello', fn));
  console.log(`  ratio berth / deno serve: ${fmt(fn.requests / bareDeno.requests, 2)}; added p50 ${fmt(fn.p50 - bareDeno.p50, 2)} ms\n`);

  console.log('Site database');
  const db = await api.post(`v0/sites/${site.id}/databases`).json<{ database: { id: string } }>();
  const queryPath = `v0/sites/${site.id}/databases/${db.database.id}/query`;
  for (const sql of ['CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)', "INSERT INTO kv VALUES ('hello', 'world')"]) await api.post(queryPath, { json: { sql } });
  await api.put(`v0/buckets/${site.bucketId}/objects/api/dbfirst.ts`, { body: await fs.readFile(path.join(ROOT, 'bench/db-first-function.ts')) });
  const sqlitePort = await freePort();
  await start(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/baselines.ts'), 'sqlite', String(sqlitePort), path.join(work, 'data', 'sites', site.id, 'db.sqlite')], process.env, (l) => l === 'ready');
  const hello = await load(`http://127.0.0.1:${berthPort}/api/hello`, host);
  const dbFirst = await load(`http://127.0.0.1:${berthPort}/api/dbfirst`, host);
  check(dbFirst, 'berth ctx.db.first');
  console.log(row('function, hello world', hello));
  console.log(row('function, ctx.db.first', dbFirst));
  console.log(`  ratio ctx.db.first / hello world: ${fmt(dbFirst.requests / hello.requests, 2)}\n`);
  const body = JSON.stringify(BENCH_STATEMENT);
  const direct = await load(`http://127.0.0.1:${sqlitePort}/`, undefined, { body });
  const endpoint = await load(`http://127.0.0.1:${berthPort}/${queryPath}`, undefined, { body, key });
  check(direct, 'node + sqlite3');
  check(endpoint, 'berth query endpoint');
  console.log(row('node http + sqlite3 direct', direct));
  console.log(row('berth query endpoint', endpoint));
  console.log(`  ratio endpoint / direct: ${fmt(endpoint.requests / direct.requests, 2)}\n`);

  console.log('Cold paths (p50 of 20)');
  const firstAnswers: number[] = [];
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    await api.put(`v0/buckets/${site.bucketId}/objects/api/cold${i}.ts`, { body: `export default () => new Response('cold ${i}');` });
    await siteClient.get(`http://127.0.0.1:${berthPort}/api/cold${i}`);
    firstAnswers.push(performance.now() - started);
  }
  const afterIdle: number[] = [];
  for (let i = 0; i < 20; i++) {
    await sleep(1300); // past BERTH_FUNCTION_IDLE_MS and one sweep
    const started = performance.now();
    await siteClient.get(`http://127.0.0.1:${berthPort}/api/hello`);
    afterIdle.push(performance.now() - started);
  }
  console.log(`  write of a new function → first answer: ${fmt(median(firstAnswers), 1)} ms`);
  console.log(`  idle-evicted worker → first answer:     ${fmt(median(afterIdle), 1)} ms`);

  for (const child of children) child.kill('SIGTERM');
  await sleep(300);
  await fs.rm(work, { recursive: true, force: true });
  if (failures > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  for (const child of children) child.kill('SIGKILL');
  process.exitCode = 1;
});
