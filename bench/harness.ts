// What `make bench` needs around the servers it measures: CPU pinning with taskset, starting and
// stopping pinned servers, the load generator in its own pinned process, and /proc readings of a
// process tree (CPU time, RSS, allowed CPUs).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import got, { type Got } from 'got';
import { loopbackPort as freePort } from '../control-plane/loopback-port.ts';
import type { LoadReport, LoadSpec } from './load-worker.ts';

export const ROOT = path.resolve(import.meta.dirname, '..');
/** The core of the servers under test, and the core of the load generator (and of this process). */
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

/** Fails with a clear message when the machine cannot pin processes as the benchmark needs. */
export function checkPinning(): void {
  const probe = spawnSync('taskset', ['-c', String(SERVER_CORE), 'true']);
  if (probe.error && (probe.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(
      'taskset is missing: `make bench` pins the servers and the load generator to their own cores with it. Install util-linux (Debian: apt-get install util-linux).',
    );
  }
  if (probe.status !== 0) throw new Error(`taskset -c ${SERVER_CORE} failed: ${probe.stderr.toString().trim()}`);
  const allowed = cpusAllowed(process.pid);
  if (!allowed.includes(SERVER_CORE) || !allowed.includes(LOAD_CORE)) {
    throw new Error(
      `make bench needs CPUs ${SERVER_CORE} and ${LOAD_CORE}; this process may use ${allowed.join(',') || 'none'}`,
    );
  }
}

/** Moves every thread of process `pid` to `core`; children it starts later inherit it. */
export function pinProcess(pid: number, core: number, what: string): void {
  const r = spawnSync('taskset', ['-a', '-p', '-c', String(core), String(pid)]);
  if (r.status !== 0) throw new Error(`taskset could not pin ${what} to CPU ${core}: ${r.stderr.toString().trim()}`);
}

/** Moves every thread of this process to `core`; children started later inherit it. */
export const pinSelf = (core: number): void => pinProcess(process.pid, core, 'the benchmark');

function parseCpuList(list: string): number[] {
  return list.split(',').flatMap((part) => {
    const [a, b] = part.split('-').map(Number);
    if (a === undefined || Number.isNaN(a)) return [];
    return b === undefined ? [a] : Array.from({ length: b - a + 1 }, (_, i) => a + i);
  });
}

function readStatus(pid: number): string | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
}

export function cpusAllowed(pid: number): number[] {
  return parseCpuList(/Cpus_allowed_list:\s*(\S+)/.exec(readStatus(pid) ?? '')?.[1] ?? '');
}

/** Resident memory of `pid` in bytes, or undefined once it has exited. */
export function rssBytes(pid: number): number | undefined {
  const kib = /VmRSS:\s*(\d+) kB/.exec(readStatus(pid) ?? '')?.[1];
  return kib === undefined ? undefined : Number(kib) * 1024;
}

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100;

interface Stat {
  ppid: number;
  /** utime + stime, in seconds. */
  cpu: number;
}

function readStat(pid: number): Stat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name sits in parentheses and may hold spaces: fields count from after it.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS };
}

/** CPU seconds `pid` itself has used so far (all its threads, not its children), or undefined once it has exited. */
export const processCpuSeconds = (pid: number): number | undefined => readStat(pid)?.cpu;

/** `pid` and all its descendants alive now (found through /proc/<pid>/stat's parent field). */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (!stat) continue;
    const list = children.get(stat.ppid) ?? [];
    list.push(Number(entry));
    children.set(stat.ppid, list);
  }
  const tree: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const next = queue.shift()!;
    tree.push(next);
    queue.push(...(children.get(next) ?? []));
  }
  return tree;
}

/** CPU seconds used so far by `pid` and its live descendants (children that exited are not counted). */
export function treeCpuSeconds(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + (readStat(p)?.cpu ?? 0), 0);
}

export function commandLine(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Seconds one CPU has been busy since boot (everything but idle and iowait), from /proc/stat. */
export function coreBusySeconds(core: number): number {
  const line = fs
    .readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `));
  // user nice system idle iowait irq softirq steal (guest time is counted in user already)
  const values = (line ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
  const busy = values.reduce((a, b) => a + b, 0) - (values[3] ?? 0) - (values[4] ?? 0);
  return busy / CLOCK_TICKS;
}

/**
 * Watches a server over one load run: CPU time of its process tree (and of its companions' trees), of
 * its own process alone (Berth: the Node process, without its workers), and what the rest of the
 * machine took of its core meanwhile.
 */
export function watchServer(
  server: Pick<Server, 'pid' | 'companions'>,
  core: number,
): () => { seconds: number; cpu: number; own: number; others: number } {
  const roots = [server.pid, ...(server.companions ?? [])];
  const cpuOf = () => roots.reduce((sum, pid) => sum + treeCpuSeconds(pid), 0);
  const started = performance.now();
  const cpu = cpuOf();
  const own = processCpuSeconds(server.pid) ?? 0;
  const busy = coreBusySeconds(core);
  return () => {
    const seconds = (performance.now() - started) / 1000;
    const used = cpuOf() - cpu;
    return {
      seconds,
      cpu: used / seconds,
      own: ((processCpuSeconds(server.pid) ?? own) - own) / seconds,
      others: Math.max(0, (coreBusySeconds(core) - busy - used) / seconds),
    };
  };
}

export { freePort };

/** A `berth serve` started by startServe: its address, its owner's WRITE key and account, an API client. */
export interface Serving {
  name: string;
  server: Server;
  origin: string;
  port: number;
  key: string;
  accountId: string;
  api: Got;
  dataDir: string;
}

/**
 * `berth serve` on the server core with a data dir of its own (`<dir>/data`), its request log in
 * `<dir>/berth.log`; answers once it listens, with the owner's key and account its first start printed.
 */
export async function startServe(name: string, dir: string, env: NodeJS.ProcessEnv): Promise<Serving> {
  await fs.promises.mkdir(dir, { recursive: true });
  const port = await freePort();
  const logFile = path.join(dir, 'berth.log');
  const dataDir = path.join(dir, 'data');
  const server = await startPinned(
    name,
    SERVER_CORE,
    process.execPath,
    [path.join(ROOT, 'control-plane/cli/berth.js'), 'serve'],
    { ...process.env, BERTH_PORT: String(port), BERTH_DATA_DIR: dataDir, ...env },
    { ready: (line) => line.includes('"msg":"listening"'), logFile },
  );
  const log = await fs.promises.readFile(logFile, 'utf8');
  const key = /WRITE key:\s+(\S+)/.exec(log)![1]!;
  const accountId = /account:\s+(\S+)/.exec(log)![1]!;
  const origin = `http://127.0.0.1:${port}`;
  const api = got.extend({ prefixUrl: origin, headers: { authorization: `Bearer ${key}` } });
  return { name, server, origin, port, key, accountId, api, dataDir };
}

/** Resolves once something accepts connections on `port`. */
export async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
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

export interface Server {
  name: string;
  /** The server's own pid (taskset execs it, so this is the server, not taskset). */
  pid: number;
  child: ChildProcess;
  /**
   * Processes that serve with it on its core (PostgreSQL, for Berth with its metadata there): their
   * CPU is the server's, not another process's.
   */
  companions?: number[];
  /** Throws if the server has exited (not by stop()), with its exit status and the end of its stderr. */
  checkAlive(): void;
  stop(): Promise<void>;
}

const running = new Set<Server>();

/**
 * Starts `command` pinned to `core`. Its stdout goes to `logFile` when given (Berth's request log:
 * written as an operator's redirect would, read by nobody during the runs), else it is drained; once
 * `ready` accepts a line of it, or at once without `ready`, the server is returned.
 */
export async function startPinned(
  name: string,
  core: number,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { ready?: (line: string) => boolean; logFile?: string } = {},
): Promise<Server> {
  const out = options.logFile ? fs.openSync(options.logFile, 'a') : 'pipe';
  const child = spawn('taskset', ['-c', String(core), command, ...args], { env, stdio: ['ignore', out, 'pipe'] });
  if (typeof out === 'number') fs.closeSync(out);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-16384);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopping = false;
  const server: Server = {
    name,
    pid: child.pid!,
    child,
    checkAlive() {
      if (stopping || (child.exitCode === null && child.signalCode === null)) return;
      throw new Error(
        `${name} (pid ${child.pid}) exited (${child.exitCode ?? child.signalCode}) in the middle of the run, not stopped by the benchmark ` +
          `(a crash, or a signal from another process; its request log says which, see BENCH_KEEP_DATA); the end of its stderr:\n${stderr.slice(-3000).trim()}`,
      );
    },
    async stop() {
      stopping = true;
      running.delete(server);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(15_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
  running.add(server);
  const failed = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready: ${stderr.trim().slice(0, 2000)}`)),
    ),
  );
  failed.catch(() => {});
  if (!options.ready) return server;
  const ready = options.ready;
  if (options.logFile) {
    const file = options.logFile;
    const found = (async () => {
      for (let i = 0; i < 1200; i++) {
        const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
        if (text.split('\n').some(ready)) return;
        await sleep(50);
      }
      throw new Error(`${name} did not get ready within 60 s`);
    })();
    await Promise.race([found, failed]);
  } else {
    let buffered = '';
    const found = new Promise<void>((resolve) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        if (lines.some(ready)) resolve();
      });
    });
    await Promise.race([found, failed]);
    child.stdout!.resume();
  }
  return server;
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((s) => s.stop()));
}

/**
 * Runs the load generator in its own process on the load core and returns its report. `onStart` is
 * called when the measured runs begin (after the warm-up).
 */
export function runLoad(spec: LoadSpec, onStart?: () => void): Promise<LoadReport> {
  const child = spawn(
    'taskset',
    ['-c', String(LOAD_CORE), process.execPath, '--import', 'tsx', path.join(ROOT, 'bench/load-worker.ts')],
    {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  child.stdin.end(JSON.stringify(spec));
  let stdout = '';
  let stderr = '';
  let report: LoadReport | undefined;
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    const lines = stdout.split('\n');
    stdout = lines.pop()!;
    for (const line of lines) {
      const message = JSON.parse(line) as { event: string };
      if (message.event === 'start') onStart?.();
      else if (message.event === 'result') report = message as LoadReport;
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      if (code === 0 && report) resolve(report);
      else reject(new Error(`the load generator failed (${code}): ${stderr.trim()}`));
    });
  });
}

export const machine = () => ({
  cpu: os.cpus()[0]?.model ?? 'unknown',
  cores: os.cpus().length,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  kernel: `${os.type()} ${os.release()}`,
});
