// The runtime host: starts workers for function versions on demand, sends them requests with a wall-clock
// limit, watches their memory, and routes their ctx calls and logs to the control plane's handlers
// for the one site each worker serves. Workers run at a lower CPU priority than the host, so hosting
// and the API stay responsive while functions burn CPU. A few spare workers (spares.ts) wait started
// ahead of need, so a cold call need not wait for Deno to boot.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { EgressProxy } from './egress-proxy.ts';
import { WorkerPool } from './pool.ts';
import { DEFAULT_NICE } from './priority.ts';
import type { OutputBudget } from './output-limit.ts';
import { type CtxCall, type CtxResult, HEADER_BYTES, type LogEntry, MAX_FRAME_BYTES } from './protocol.ts';
import { Spares } from './spares.ts';
import {
  DenoWorker,
  type WorkerBinding,
  type WorkerProcessOptions,
  type WorkerRequest,
  type WorkerResponse,
} from './worker.ts';

export interface RuntimeOptions {
  denoPath: string;
  /** Disposable working files: generated entries, sockets, Deno's cache. */
  runtimeDir: string;
  heapMb: number;
  /** A worker whose resident memory passes this is stopped. */
  rssLimitBytes: number;
  /**
   * What all workers together may hold of their own memory (resident less shared pages): past it, the
   * least recently used idle workers stop until they are under it again.
   */
  memoryBudgetBytes: number;
  timeoutMs: number;
  idleMs: number;
  /** Deno processes alive at most: workers, draining ones and spares. */
  maxWorkers: number;
  /** Spare workers kept started and not yet given a function (default 0: none). */
  spareWorkers?: number;
  startupTimeoutMs: number;
  /** The host's own log, for workers that break the protocol. */
  logger: RuntimeLogger;
  /** How much lower than the host's a worker's CPU priority is, as a nice increment (default 10; 0 keeps it equal). */
  workerNice?: number;
  /** What each worker may write to its site's logs (default DEFAULT_OUTPUT_BUDGET). */
  output?: OutputBudget;
  /** Told of every worker started (with how long it took to be ready) and of every exit, for metrics. */
  observer?: WorkerObserver;
  /** Where workers' fetches go; each bound worker gets a grant there for its site. */
  egress: Pick<EgressProxy, 'url' | 'address' | 'grant' | 'revoke'>;
}

export interface WorkerObserver {
  /** A worker started for `version` (a cold start), taking `seconds`. */
  started(seconds: number, version: FunctionVersion): void;
  exited(reason: string): void;
}

export interface RuntimeLogger {
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
}

/** A function version, what a worker runs and for whom: the channel carries this binding, not the function's word. */
export interface FunctionVersion {
  functionId: string;
  versionId: string;
  siteId: string;
  path: string;
  kind: 'api' | 'cron';
  /** The function's module on disk. */
  modulePath: string;
  /**
   * The branch of the site's database its ctx.db calls use (a preview's, database-branches/); none: the
   * site's database. Workers of one version on two branches are two workers.
   */
  branch?: string;
}

/** Who serves what workers ask of the host: given once the server's services exist (RuntimeHost.serve). */
export interface RuntimeHooks {
  ctx: (version: FunctionVersion, call: CtxCall) => Promise<CtxResult>;
  /** A worker's line to its site's database: `link` is the worker's own path for it. */
  dbLine: (version: FunctionVersion, link: string, args: unknown[]) => Promise<CtxResult>;
  log: (version: FunctionVersion, entry: LogEntry) => void;
}

const keyOf = (d: Pick<FunctionVersion, 'functionId' | 'versionId' | 'branch'>) =>
  `${d.functionId}:${d.versionId}${d.branch ? `@${d.branch}` : ''}`;

/** A source a spare can be sent in its Load frame (the shim reads host frames up to MAX_FRAME_BYTES); a larger one starts a worker of its own. */
const MAX_SPARE_SOURCE_BYTES = MAX_FRAME_BYTES - HEADER_BYTES - 64 * 1024;

const SHED_LOG_MS = 10_000;

/** Unix socket paths are limited to about 100 bytes; fall back to the temp dir for deep data dirs. */
export function socketDirFor(runtimeDir: string): string {
  const preferred = path.join(runtimeDir, 'sockets');
  if (preferred.length + 30 < 100) return preferred;
  return path.join(os.tmpdir(), `berth-${crypto.createHash('sha256').update(runtimeDir).digest('hex').slice(0, 12)}`);
}

export class RuntimeHost {
  readonly #options: RuntimeOptions;
  #hooks: RuntimeHooks | null = null;
  readonly #pool: WorkerPool<DenoWorker>;
  readonly #spares: Spares<DenoWorker>;
  #closing = false;
  readonly #versions = new Map<string, FunctionVersion>();
  readonly #socketDir: string;
  readonly #memoryWatch: NodeJS.Timeout;
  /** Workers stopped for the memory budget since the last line logged about it, and when that was. */
  #shed = 0;
  #shedLoggedAt = 0;

  /**
   * Names who serves workers' ctx calls and stores their log lines: the services, which need the runtime
   * themselves, so they come after it. Functions run only once this is given.
   */
  serve(hooks: RuntimeHooks): void {
    this.#hooks = hooks;
  }

  constructor(options: RuntimeOptions) {
    this.#options = options;
    this.#socketDir = socketDirFor(options.runtimeDir);
    fs.rmSync(this.#socketDir, { recursive: true, force: true });
    fs.mkdirSync(this.#socketDir, { recursive: true, mode: 0o700 });
    this.#pool = new WorkerPool({
      maxWorkers: options.maxWorkers,
      idleMs: options.idleMs,
      start: (key) => this.#startWorker(this.#versions.get(key)!),
      adopt: (key) => {
        const spare = this.#spares.take(
          this.#pool.size + this.#pool.starting + this.#spares.count < options.maxWorkers,
        );
        return spare && this.#startWorker(this.#versions.get(key)!, spare);
      },
    });
    // Spares count against the worker cap and use only free slots: a spare never evicts a worker. In
    // the background they start only while no worker is being started for a request; a call that finds
    // none left starts one of its own, one boot per CPU at a time.
    this.#spares = new Spares({
      count: options.spareWorkers ?? 0,
      parallel: os.availableParallelism(),
      start: () => this.#startSpare(),
      mayStart: () => this.#pool.starting === 0 && this.#pool.size + this.#spares.count < options.maxWorkers,
      onFailure: (err) => options.logger.warn({ err }, 'a spare function worker could not start'),
    });
    this.#spares.fill();
    this.#memoryWatch = setInterval(() => this.#checkMemory(), 500);
    this.#memoryWatch.unref();
  }

  /** Live workers, for tests and diagnostics (spares not included). */
  get workerCount(): number {
    return this.#pool.size;
  }

  /** Spares started and not yet given a function, for tests and diagnostics. */
  get spareCount(): number {
    return this.#spares.count;
  }

  /** Whether workers can start: the Deno executable is there and may be run. */
  async denoAvailable(): Promise<void> {
    await fs.promises.access(this.#options.denoPath, fs.constants.X_OK);
  }

  /** Process ids of the live workers, for tests and diagnostics. */
  workerPids(): number[] {
    return this.#pool.workers().flatMap((worker) => (worker.pid ? [worker.pid] : []));
  }

  /** Process ids of the spares on standby, for tests and diagnostics. */
  sparePids(): number[] {
    return this.#spares.workers().flatMap((worker) => (worker.pid ? [worker.pid] : []));
  }

  /**
   * Runs a request through the version's worker. Resolves with the response head; the body
   * streams. Throws WorkerError when the function cannot answer, PoolFullError at capacity.
   * `onCancel` receives, once the request is on its way, what cancels it (the caller hung up).
   */
  async invoke(
    version: FunctionVersion,
    request: WorkerRequest,
    onCancel?: (cancel: () => void) => void,
  ): Promise<WorkerResponse> {
    const key = keyOf(version);
    this.#versions.set(key, version);
    const worker = this.#pool.live(key) ?? (await this.#pool.acquire(key));
    const call = worker.invoke(request);
    onCancel?.(call.cancel);
    const timer = setTimeout(() => worker.kill('timeout'), this.#options.timeoutMs);
    try {
      const response = await call.response;
      // The limit covers the whole answer, body included.
      if (Buffer.isBuffer(response.body)) this.#callOver(worker, timer);
      else response.body.once('close', () => this.#callOver(worker, timer));
      return response;
    } catch (err) {
      this.#callOver(worker, timer);
      throw err;
    }
  }

  #callOver(worker: DenoWorker, timer: NodeJS.Timeout): void {
    clearTimeout(timer);
    this.#pool.release(worker);
  }

  /**
   * New requests for this function will start a worker of its current version; old ones drain. The
   * version now served (`keepVersionId`) is left alone: a request may have started its worker already,
   * before this node heard of the change.
   */
  retire(functionId: string, keepVersionId?: string): void {
    const retired = (key: string) => key.startsWith(`${functionId}:`) && key !== `${functionId}:${keepVersionId}`;
    this.#pool.retire(retired);
    for (const key of this.#versions.keys()) if (retired(key)) this.#versions.delete(key);
  }

  async close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#memoryWatch);
    await Promise.all([this.#pool.close(), this.#spares.close()]);
  }

  /** A worker for `version`: the spare given, or a process of its own. */
  async #startWorker(version: FunctionVersion, spare?: Promise<DenoWorker>): Promise<DenoWorker> {
    const started = performance.now();
    // Spares may refill once the pool has counted this start as over (a worker, or a free slot).
    const worker = await (spare ? this.#bindSpare(spare, version) : this.#spawn(version)).finally(() =>
      setImmediate(() => this.#spares.fill()),
    );
    const { observer } = this.#options;
    if (observer) {
      observer.started((performance.now() - started) / 1000, version);
      void worker.exited.then((reason) => observer.exited(reason));
    }
    void worker.exited.then(() => setImmediate(() => this.#spares.fill()));
    return worker;
  }

  /**
   * Gives a spare the version's function. A spare that failed to boot or stopped before it was
   * given the function, or a source too large to send, leaves its slot under the cap to a process of
   * the version's own.
   */
  async #bindSpare(spare: Promise<DenoWorker>, version: FunctionVersion): Promise<DenoWorker> {
    const worker = await spare.catch(() => undefined);
    if (!worker?.alive) {
      if (this.#closing) throw new Error('the runtime is stopping');
      return this.#spawn(version);
    }
    try {
      const source = await fs.promises.readFile(version.modulePath);
      if (source.length > MAX_SPARE_SOURCE_BYTES) {
        worker.kill('disposed');
        return this.#spawn(version);
      }
      // A spare that stopped while the source was read failed on Berth's code alone (it has run no
      // tenant code yet): the call gets a worker of its own rather than the spare's failure.
      if (!worker.alive) return this.#spawn(version);
      await worker.bind(this.#binding(version), source);
      return worker;
    } catch (err) {
      // A spare that broke the protocol while given its function failed on Berth's side too: no tenant
      // code reaches a worker's channel. The call gets a worker of its own.
      if (worker.stoppedFor === 'protocol' && !this.#closing) return this.#spawn(version);
      worker.kill('crashed');
      throw err;
    }
  }

  #spawn(version: FunctionVersion): Promise<DenoWorker> {
    return DenoWorker.start({ ...this.#processOptions(), ...this.#binding(version) });
  }

  #startSpare(): Promise<DenoWorker> {
    const { logger } = this.#options;
    return DenoWorker.startSpare(this.#processOptions(), {
      onProtocolError: (violation) =>
        logger.warn({ violation }, 'a spare function worker broke the runtime protocol; stopped it'),
      onError: (err, message) => logger.error({ err }, message),
    });
  }

  /** How every worker's process starts, spare or not: only the socket differs. */
  #processOptions(): WorkerProcessOptions {
    return {
      denoPath: this.#options.denoPath,
      socketPath: path.join(this.#socketDir, `${crypto.randomBytes(8).toString('hex')}.sock`),
      denoDir: path.join(this.#options.runtimeDir, 'deno-dir'),
      heapMb: this.#options.heapMb,
      egressAddress: this.#options.egress.address,
      startupTimeoutMs: this.#options.startupTimeoutMs,
      nice: this.#options.workerNice ?? DEFAULT_NICE,
      ...(this.#options.output ? { output: this.#options.output } : {}),
    };
  }

  /** The version a worker serves: its ctx calls and logs are this site's, whatever the worker says. */
  #binding(version: FunctionVersion): WorkerBinding {
    const { logger } = this.#options;
    const about = { siteId: version.siteId, functionId: version.functionId, path: version.path };
    const { egress } = this.#options;
    const hooks = this.#hooks;
    if (!hooks) throw new Error('the runtime serves no function before RuntimeHost.serve names who serves its calls');
    const token = egress.grant({ siteId: version.siteId, path: version.path });
    return {
      modulePath: version.modulePath,
      sourcePath: version.path,
      siteId: version.siteId,
      kind: version.kind,
      egress: { url: egress.url, token },
      releaseEgress: () => egress.revoke(token),
      onCtxCall: (call) => hooks.ctx(version, call),
      onDbLine: (link, args) => hooks.dbLine(version, link, args),
      onLog: (entry) => hooks.log(version, entry),
      onProtocolError: (violation) =>
        logger.warn({ ...about, violation }, 'function worker broke the runtime protocol; stopped it'),
      onError: (err, message) => logger.error({ ...about, err }, message),
    };
  }

  /**
   * Stops any worker past its own limit, then, when the workers together hold more than their budget,
   * the least recently used idle ones: many warm sites share the machine's memory instead of a count.
   */
  #checkMemory(): void {
    const own = new Map<DenoWorker, number>();
    let total = 0;
    for (const worker of [...this.#pool.workers(), ...this.#spares.workers()]) {
      const memory = worker.memory();
      if (memory === null) continue;
      if (memory.resident > this.#options.rssLimitBytes) {
        worker.kill('memory');
        continue;
      }
      own.set(worker, memory.own);
      total += memory.own;
    }
    const over = total - this.#options.memoryBudgetBytes;
    if (over <= 0) return;
    this.#shed += this.#pool.shed(over, (worker) => own.get(worker) ?? 0);
    // One line at most every SHED_LOG_MS, however long the pressure lasts.
    const now = Date.now();
    if (this.#shed === 0 || now - this.#shedLoggedAt < SHED_LOG_MS) return;
    this.#options.logger.warn(
      { workersMemoryBytes: total, budgetBytes: this.#options.memoryBudgetBytes, stopped: this.#shed },
      'function workers held more memory than their budget (BERTH_WORKER_MEMORY_MB): stopped the least recently used idle ones',
    );
    this.#shed = 0;
    this.#shedLoggedAt = now;
  }
}
