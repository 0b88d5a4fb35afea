// The load generator of `make bench`, run as its own process pinned to the load core:
//   taskset -c 1 node --import tsx bench/load-worker.ts < spec.json
// The spec (LoadSpec) lists one or more loads that run at the same time (one for each side of a ratio,
// several for the mixed load). Each gets a warm-up, then the measured run; every response's latency is
// recorded at full resolution (autocannon's own histogram keeps whole milliseconds). A load over HTTPS
// trusts the CA and asks for the name it is given; a load of new connections (one request each, which
// autocannon cannot count) is sent by this file's own loop. Prints JSON lines: {"event":"start"} when
// the measured runs begin, then {"event":"result",...}.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import tls from 'node:tls';

export interface LoadTarget {
  label: string;
  /** Origin, e.g. http://127.0.0.1:8080 */
  origin: string;
  path: string;
  connections: number;
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: string;
  /**
   * Each request writes a new file: `<prefix><n>.bin` with `bytes` bytes, different for every request;
   * n counts from `first` (give each load its own range so that no run rewrites an earlier file).
   */
  upload?: { prefix: string; bytes: number; first: number };
  /**
   * Each request goes to one of these Host headers, drawn uniformly at random (many sites at once).
   * The result then splits latencies into cold (sent before that host had answered once in the run)
   * and warm (sent after).
   */
  hosts?: string[];
  /** With `hosts`: the run ends early once every host has answered (its `seconds` are then a limit). */
  untilEveryHostAnswered?: boolean;
  /** For an https:// origin: the only CA trusted (PEM) and the name asked for in the handshake (SNI). */
  tls?: { ca: string; servername: string };
  /**
   * Every request on a connection of its own, closed by the server once it has answered (`connection:
   * close`): each HTTPS request pays a full handshake. GET or a body-less method only, one Host.
   */
  newConnections?: boolean;
}

export interface LoadSpec {
  targets: LoadTarget[];
  seconds: number;
  warmupSeconds: number;
}

export interface LoadResult {
  label: string;
  connections: number;
  seconds: number;
  /** Responses received in the measured run (any status). */
  responses: number;
  rps: number;
  /** Latency of every response, in ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  bytesPerSecond: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  /** Failures of the warm-up run (errors, timeouts and non-2xx together). */
  warmupFailures: number;
  /**
   * The longest a connection had been waiting for an answer when the run ended, in ms. Latencies are
   * those of answered requests only: a request still waiting at the end is in no percentile.
   */
  longestWaitAtEnd: number;
  /** Connections that got no answer at all during the measured run. */
  neverAnswered: number;
  /** Answers that took longer than SLOW_MS (timeouts, past TIMEOUT_MS, are counted apart). */
  slow: number;
  /** With `hosts`: latencies of requests sent before their host first answered, and of the others. */
  byHost?: { hosts: number; hostsAnswered: number; cold: Latencies; warm: Latencies };
}

export interface Latencies {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export interface LoadReport {
  event: 'result';
  results: LoadResult[];
  /** CPU time of this process over the measured run, as a share of one core. */
  cpuShare: number;
  /** CPUs this process may run on (Cpus_allowed_list). */
  cpus: string;
}

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
}
interface AutocannonRequest {
  path: string;
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}
interface Tracker {
  stop(): void;
  on(event: 'response', listener: (client: unknown, status: number, bytes: number, ms: number) => void): void;
}
type Autocannon = (opts: Record<string, unknown>, cb: (err: Error | null, result: AutocannonResult) => void) => Tracker;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The next file number of each uploading target, kept from its warm-up to its measured run. */
const nextUpload = new WeakMap<LoadTarget, number>();

function options(target: LoadTarget, connections: number, seconds: number): Record<string, unknown> {
  const request: Record<string, unknown> = {
    method: target.method ?? 'GET',
    path: target.path,
    headers: target.headers ?? {},
  };
  if (target.body !== undefined) request.body = target.body;
  if (target.hosts) {
    const hosts = target.hosts;
    const started = new WeakMap<object, { host: string; at: number }>();
    request.setupRequest = (req: AutocannonRequest, context: object) => {
      const host = hosts[Math.floor(Math.random() * hosts.length)]!;
      started.set(context, { host, at: performance.now() });
      req.headers = { ...target.headers, host };
      return req;
    };
    // Called by autocannon just before its 'response' event for the same answer (see run()).
    request.onResponse = (_status: number, _body: unknown, context: object) => (answered = started.get(context));
  }
  if (target.upload) {
    const { prefix, bytes } = target.upload;
    if (!nextUpload.has(target)) nextUpload.set(target, target.upload.first);
    const base = Buffer.alloc(bytes);
    for (let i = 0; i < bytes; i++) base[i] = (i * 31 + process.pid) & 0xff;
    const salt = Date.now() & 0xffffffff;
    // A new path and new bytes for every request: a content-addressed store cannot skip the write.
    request.setupRequest = (req: AutocannonRequest) => {
      const n = nextUpload.get(target)!;
      nextUpload.set(target, n + 1);
      const body = Buffer.from(base);
      body.writeUInt32BE(n >>> 0, 0);
      body.writeUInt32BE(salt >>> 0, 4);
      req.path = `${prefix}${n}.bin`;
      req.body = body;
      return req;
    };
  }
  // autocannon connects with rejectUnauthorized false whatever it is given: main.ts checks the
  // certificate of each HTTPS side before measuring.
  const secure = target.tls ? { servername: target.tls.servername, tlsOptions: { ca: target.tls.ca } } : {};
  return { url: target.origin, connections, duration: seconds, requests: [request], ...secure };
}

/** When each host of a target first answered, kept from its warm-up to its measured run. */
const firstAnswers = new WeakMap<LoadTarget, Map<string, number>>();

/** The host and send time of the answer autocannon is about to report in its 'response' event. */
let answered: { host: string; at: number } | undefined;

/** Latencies in a growing Float64Array. */
export class Samples {
  values: Float64Array;
  count = 0;
  constructor(capacity = 1 << 12) {
    this.values = new Float64Array(capacity);
  }
  push(ms: number): void {
    if (this.count === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.count++] = ms;
  }
  sorted(): Float64Array {
    return this.values.slice(0, this.count).sort();
  }
  summary(): Latencies {
    const sorted = this.sorted();
    return {
      n: this.count,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    };
  }
}

interface Collected {
  /** With hosts: when each host first answered (since the warm-up began), and the latencies split by cold and warm. */
  firstAnswer: Map<string, number>;
  cold: Samples;
  warm: Samples;
  /** Every answer's latency. */
  latencies: Samples;
  bytes: number;
  /** When each connection (autocannon's client) last got an answer. */
  lastAnswer: Map<unknown, number>;
  started: number;
  ended: number;
}

function run(target: LoadTarget, seconds: number): Promise<{ result: AutocannonResult; collected: Collected }> {
  const collected: Collected = {
    firstAnswer: firstAnswers.get(target) ?? firstAnswers.set(target, new Map()).get(target)!,
    cold: new Samples(),
    warm: new Samples(),
    latencies: new Samples(1 << 16),
    bytes: 0,
    lastAnswer: new Map(),
    started: performance.now(),
    ended: 0,
  };
  return new Promise((resolve, reject) => {
    const tracker = autocannon(options(target, target.connections, seconds), (err, result) => {
      collected.ended = performance.now();
      if (err) reject(err);
      else resolve({ result, collected });
    });
    tracker.on('response', (client: unknown, _status: number, bytes: number, ms: number) => {
      const now = performance.now();
      collected.lastAnswer.set(client, now);
      if (target.hosts && answered) {
        const first = collected.firstAnswer.get(answered.host);
        (first === undefined || first > answered.at ? collected.cold : collected.warm).push(ms);
        if (first === undefined) {
          collected.firstAnswer.set(answered.host, now);
          if (target.untilEveryHostAnswered && collected.firstAnswer.size === target.hosts.length) tracker.stop();
        }
        answered = undefined;
      }
      collected.latencies.push(ms);
      collected.bytes += bytes;
    });
  });
}

/** As autocannon's: a request unanswered this long is a timeout. */
const TIMEOUT_MS = 10_000;
/** An answer slower than this is counted as slow (LoadResult.slow). */
export const SLOW_MS = 5_000;

/**
 * `target.connections` loops, each sending one request on a new connection (TCP, and TLS when
 * `target.tls`) and reading until the server closes it; the next starts when it has. A request's
 * latency runs from the connect to the close, so it holds the handshake. Results are shaped as
 * autocannon's; a request still open when the time is up is dropped, as autocannon drops its own.
 */
function runNewConnections(
  target: LoadTarget,
  seconds: number,
): Promise<{ result: AutocannonResult; collected: Collected }> {
  if (target.upload || target.hosts || target.body !== undefined)
    throw new Error(`${target.label}: a load of new connections sends no body and one Host`);
  const url = new URL(target.origin);
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  const headers = { host: url.host, ...target.headers, connection: 'close' };
  const request = Buffer.from(
    `${target.method ?? 'GET'} ${target.path} HTTP/1.1\r\n${Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}\r\n`,
  );
  const collected: Collected = {
    firstAnswer: new Map(),
    cold: new Samples(),
    warm: new Samples(),
    latencies: new Samples(1 << 16),
    bytes: 0,
    lastAnswer: new Map(),
    started: performance.now(),
    ended: 0,
  };
  const result: AutocannonResult = { duration: seconds, errors: 0, timeouts: 0, non2xx: 0, statusCodeStats: {} };
  // One context for every connection: given `ca` instead, tls.connect would build a context per connection.
  const secureContext = target.tls ? tls.createSecureContext({ ca: target.tls.ca }) : undefined;
  const open = new Set<net.Socket>();
  let done = false;
  const one = (loop: number): Promise<void> =>
    new Promise((resolve) => {
      const sent = performance.now();
      const socket = target.tls
        ? tls.connect({ host: url.hostname, port, servername: target.tls.servername, secureContext })
        : net.connect({ host: url.hostname, port });
      open.add(socket);
      const chunks: Buffer[] = [];
      let failed = false;
      socket.setTimeout(TIMEOUT_MS, () => {
        result.timeouts++;
        socket.destroy(new Error('timeout'));
      });
      socket.once(target.tls ? 'secureConnect' : 'connect', () => socket.write(request));
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.once('error', () => (failed = true));
      socket.once('close', () => {
        open.delete(socket);
        if (done) return resolve();
        const answer = Buffer.concat(chunks);
        const status = /^HTTP\/1\.1 (\d{3}) /.exec(answer.subarray(0, 16).toString('latin1'))?.[1];
        if (failed || !status) result.errors++;
        else {
          result.statusCodeStats[status] = { count: (result.statusCodeStats[status]?.count ?? 0) + 1 };
          if (!status.startsWith('2')) result.non2xx++;
          const now = performance.now();
          collected.latencies.push(now - sent);
          collected.bytes += answer.length;
          collected.lastAnswer.set(loop, now);
        }
        resolve();
      });
    });
  const loop = async (n: number) => {
    while (!done) await one(n);
  };
  return new Promise((resolve) => {
    setTimeout(() => {
      done = true;
      collected.ended = performance.now();
      for (const socket of open) socket.destroy();
      result.duration = (collected.ended - collected.started) / 1000;
      resolve({ result, collected });
    }, seconds * 1000);
    for (let n = 0; n < target.connections; n++) void loop(n);
  });
}

function failures(r: AutocannonResult): number {
  return r.errors + r.non2xx;
}

function summarize(
  target: LoadTarget,
  result: AutocannonResult,
  collected: Collected,
  warmupFailures: number,
): LoadResult {
  const sorted = collected.latencies.sorted();
  let sum = 0;
  for (const v of sorted) sum += v;
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  return {
    label: target.label,
    connections: target.connections,
    seconds: result.duration,
    responses: collected.latencies.count,
    rps: collected.latencies.count / result.duration,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    mean: sorted.length ? sum / sorted.length : NaN,
    bytesPerSecond: collected.bytes / result.duration,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes,
    warmupFailures,
    longestWaitAtEnd: longestWait(target, collected),
    neverAnswered: Math.max(0, target.connections - collected.lastAnswer.size),
    slow: countAbove(sorted, SLOW_MS),
    ...(target.hosts
      ? {
          byHost: {
            hosts: target.hosts.length,
            hostsAnswered: collected.firstAnswer.size,
            cold: collected.cold.summary(),
            warm: collected.warm.summary(),
          },
        }
      : {}),
  };
}

/** How many values of `sorted` (ascending) are above `value`. */
function countAbove(sorted: Float64Array, value: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (sorted[mid]! <= value) low = mid + 1;
    else high = mid;
  }
  return sorted.length - low;
}

function longestWait(target: LoadTarget, c: Collected): number {
  if (c.lastAnswer.size < target.connections) return c.ended - c.started;
  let oldest = c.ended;
  for (const t of c.lastAnswer.values()) oldest = Math.min(oldest, t);
  return c.ended - oldest;
}

async function main() {
  const spec = JSON.parse(fs.readFileSync(0, 'utf8')) as LoadSpec;
  const load = (t: LoadTarget, seconds: number) => (t.newConnections ? runNewConnections(t, seconds) : run(t, seconds));
  const warmups = spec.warmupSeconds > 0 ? await Promise.all(spec.targets.map((t) => load(t, spec.warmupSeconds))) : [];
  process.stdout.write(`${JSON.stringify({ event: 'start' })}\n`);
  const before = process.cpuUsage();
  const started = process.hrtime.bigint();
  const measured = await Promise.all(spec.targets.map((t) => load(t, spec.seconds)));
  const used = process.cpuUsage(before);
  const wallUs = Number(process.hrtime.bigint() - started) / 1000;
  const cpus = /Cpus_allowed_list:\s*(\S+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '?';
  const report: LoadReport = {
    event: 'result',
    results: spec.targets.map((t, i) =>
      summarize(t, measured[i]!.result, measured[i]!.collected, warmups[i] ? failures(warmups[i].result) : 0),
    ),
    cpuShare: (used.user + used.system) / wallUs,
    cpus,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

if (import.meta.filename === process.argv[1]) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
