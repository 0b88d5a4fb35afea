// One Deno worker process serving one deployed function version. It owns the process and the Unix
// socket that is its only channel: requests go out as frames, responses, ctx calls and logs come back.
// Nothing that comes back is trusted: every frame is checked (inbound.ts) before use, and what a worker
// can make the host hold in memory is bounded (ctx calls in flight, unread body chunks, output).
// A worker starts either with its function (start) or as a spare bound to none (startSpare), which the
// host later gives one function version for the rest of its life (bind).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { denoArgs, denoEnv } from './deno-args.ts';
import { entryProgram, spareProgram } from './function-files.ts';
import { type ChannelView, ProtocolViolation, inboundFrameBytes, readInbound } from './inbound.ts';
import { DEFAULT_OUTPUT_BUDGET, type OutputBudget, OutputLimit, readOutput } from './output-limit.ts';
import { lowerPriority } from './priority.ts';
import { corkForTurn } from './turn-cork.ts';
import {
  type CtxCall,
  CtxErrorCode,
  DB_LINE_METHOD,
  type CtxResult,
  type EgressRoute,
  type Frame,
  FrameReader,
  FrameType,
  type FrameTypeValue,
  type HandlerFailure,
  type LogEntry,
  type ResponseHead,
  encodeFrame,
  encodeJson,
  encodeLoad,
  dbLinePath,
  encodeRequest,
  pathRedactor,
} from './protocol.ts';

/** How a worker's process starts: the same for every worker, spare or not. */
export interface WorkerProcessOptions {
  denoPath: string;
  socketPath: string;
  denoDir: string;
  heapMb: number;
  /** host:port of the egress proxy, the one address the worker may connect to. */
  egressAddress: string;
  /** How long the process may take to be ready, and a spare to load the function it is given. */
  startupTimeoutMs: number;
  /** How much lower than the host's the worker's CPU priority is (a nice increment; 0 keeps it equal). */
  nice: number;
  output?: OutputBudget;
}

/** Where a worker's faults are reported. */
export interface WorkerFaults {
  /** The worker broke the channel protocol; it is being stopped. */
  onProtocolError: (message: string) => void;
  /** A fault of the host's own while serving the worker. */
  onError: (err: unknown, message: string) => void;
}

/** The one function version a worker serves, and the hooks of the site it serves it for. */
export interface WorkerBinding extends WorkerFaults {
  /** The deployed function's module. */
  modulePath: string;
  /** The function's path in its site, e.g. api/hello.ts. */
  sourcePath: string;
  siteId: string;
  kind: 'api' | 'cron';
  /** The worker's grant at the egress proxy, given back once the worker is gone. */
  egress: EgressRoute;
  releaseEgress: () => void;
  onCtxCall: (call: CtxCall) => Promise<CtxResult>;
  /** The shim's call about its line to the site's database (DB_LINE_METHOD), with the worker's path for it. */
  onDbLine: (link: string, args: unknown[]) => Promise<CtxResult>;
  onLog: (entry: LogEntry) => void;
}

export type WorkerOptions = WorkerProcessOptions & WorkerBinding;

export interface WorkerRequest {
  method: string;
  url: string;
  headers: Array<[string, string]>;
  body: Buffer;
  requestId: string;
}

export interface WorkerResponse {
  status: number;
  headers: Array<[string, string]>;
  /** The whole body when it arrived with the head, else a stream of it. */
  body: Buffer | Readable;
}

/** Why a worker stopped; decides what its in-flight callers are told. */
export type ExitReason = 'disposed' | 'timeout' | 'memory' | 'crashed' | 'protocol';

/** Raised to callers whose request could not be answered by the function. */
export class WorkerError extends Error {
  constructor(
    readonly reason: ExitReason | 'handler',
    message: string,
    readonly failure?: HandlerFailure,
  ) {
    super(message);
  }
}

const BERTH_URL = pathToFileURL(path.resolve(import.meta.dirname, '..') + path.sep).href;
/**
 * A spare imports the function it is given from a data: URL of its source, which Deno's own reports
 * on stderr (an uncaught error) shorten to its first and last 20 characters of base64: in a bound
 * spare's raw output any such URL is shown as the function's path, as the module file's URL is for a
 * worker started with its function.
 */
const MODULE_DATA_URL = /data:application\/(?:typescript|javascript);base64,[A-Za-z0-9+/=]*(?:\.{6}[A-Za-z0-9+/=]*)?/g;

const FAILURES: Record<ExitReason, string> = {
  disposed: 'the worker was stopped',
  timeout: 'the function did not answer in time',
  memory: 'the function exceeded its memory limit',
  crashed: 'the function’s worker crashed',
  protocol: 'the function’s worker broke the runtime protocol and was stopped',
};

/** While this many ctx calls, or this many bytes of them, are being served, the channel is not read. */
const MAX_CTX_CALLS = 64;
const MAX_CTX_BYTES = 16 * 1024 * 1024;
/** How long a worker that closed its channel may take to exit by itself. */
const EXIT_GRACE_MS = 1000;
/** Body bytes held for a slow client before the channel stops being read. */
const BODY_BUFFER_BYTES = 1024 * 1024;

interface Pending {
  resolve: (response: WorkerResponse) => void;
  reject: (error: WorkerError) => void;
  head?: ResponseHead;
  /** Body bytes received before it was decided whether the body streams. */
  chunks: Buffer[];
  body?: PassThrough;
}

/** /proc/<pid>/statm counts pages; Linux on the machines Berth runs on uses 4 KiB ones. */
const PAGE_BYTES = 4096;
/** Where memory() reads /proc/<pid>/statm (seven numbers), synchronously. */
const STATM = Buffer.alloc(256);

export class DenoWorker {
  readonly #options: WorkerProcessOptions;
  /** Set from the start, or when a spare is given its function; never changed afterwards. */
  #binding: WorkerBinding | undefined;
  /** Where faults go before the worker is bound. */
  readonly #spareFaults: WorkerFaults | undefined;
  readonly #process: ResultPromise;
  readonly #server: net.Server;
  #socket: net.Socket | undefined;
  readonly #reader = new FrameReader(inboundFrameBytes);
  readonly #output: OutputLimit;
  /** Rewrites host locations in the process's raw output. */
  #rewrite: (line: string) => string;
  readonly #pending = new Map<number, Pending>();
  readonly #view: ChannelView;
  /** Frames read but not handled yet, while the channel is held. */
  #queue: Frame[] = [];
  #queueHead = 0;
  #ctxCalls = 0;
  #ctxBytes = 0;
  /** Streamed bodies waiting for their client to read. */
  #drains = 0;
  /** Set while a Log flood holds the channel until the output window turns. */
  #floodHold: NodeJS.Timeout | undefined;
  #nextStream = 1;
  #exitReason: ExitReason | undefined;
  /** Bounds the start step under way: the process's start, then a spare's loading of its function. */
  #startTimer: NodeJS.Timeout | undefined;
  #killTimer: NodeJS.Timeout | undefined;
  /** /proc/<pid>/statm, open once memory() is first asked. */
  #statm: number | undefined;
  #settleStep: (error?: Error) => void = () => {};
  readonly exited: Promise<ExitReason>;

  private constructor(
    options: WorkerProcessOptions,
    server: net.Server,
    binding: WorkerBinding | undefined,
    spareFaults?: WorkerFaults,
  ) {
    this.#options = options;
    this.#binding = binding;
    this.#spareFaults = spareFaults;
    this.#server = server;
    // A spare has no site to log for; it runs no tenant code, so it has nothing worth keeping to say.
    this.#output = new OutputLimit(options.output ?? DEFAULT_OUTPUT_BUDGET, (entry) => this.#binding?.onLog(entry));
    this.#view = {
      ready: false,
      spare: binding ? undefined : 'announce',
      lastCall: 0,
      response: (stream) => {
        const pending = this.#pending.get(stream);
        return pending ? (pending.head ? 'body' : 'head') : null;
      },
    };
    server.once('connection', (socket) => {
      // One connection only, and the path goes away with it: nobody else may attach to this channel.
      server.close();
      fs.rmSync(options.socketPath, { force: true });
      if (this.alive) this.#attach(socket);
      else socket.destroy();
    });

    this.#process = execa(options.denoPath, denoArgs(options), {
      argv0: 'deno',
      cwd: '/',
      env: denoEnv(options.denoDir),
      extendEnv: false,
      input: binding
        ? entryProgram(binding.modulePath, {
            socketPath: options.socketPath,
            siteId: binding.siteId,
            kind: binding.kind,
            sourcePath: binding.sourcePath,
            egress: binding.egress,
          })
        : spareProgram(options.socketPath),
      buffer: false,
      reject: false,
      // A session of its own: Ctrl-C at the terminal signals the server's process group, and the server,
      // not the signal, decides when a worker with requests in flight stops. A worker also ends with
      // its channel, and the next start stops any a killed server left.
      detached: true,
      cleanup: false,
    });
    lowerPriority(this.#process.pid, options.nice);
    // Output that bypasses console.* (Deno's own messages, Deno.stdout) still reaches the site's logs.
    this.#rewrite = binding
      ? pathRedactor(pathToFileURL(binding.modulePath).href, binding.sourcePath, BERTH_URL)
      : (line) => line;
    if (this.#process.stdout) readOutput(this.#process.stdout, 'info', this.#output, (line) => this.#rewrite(line));
    if (this.#process.stderr) readOutput(this.#process.stderr, 'error', this.#output, (line) => this.#rewrite(line));
    const ended = (): ExitReason => {
      clearTimeout(this.#killTimer);
      // The link to the site's database goes with the worker, and so does its line.
      fs.rmSync(dbLinePath(options.socketPath), { force: true });
      this.#closeStatm();
      this.#binding?.releaseEgress();
      this.#stop('crashed', new Error('the worker exited before it was ready'));
      this.#output.close();
      return this.#exitReason!;
    };
    this.exited = this.#process.then(ended, ended);
  }

  /** Spawns Deno with its function and resolves once the shim has connected and said it is ready. */
  static start(options: WorkerOptions): Promise<DenoWorker> {
    return DenoWorker.#spawn(options, options);
  }

  /**
   * Spawns a spare: Deno with the same command line as any worker, no function and no site. Resolves
   * once the shim has connected and said it is on standby; bind() then gives it its function.
   */
  static startSpare(options: WorkerProcessOptions, faults: WorkerFaults): Promise<DenoWorker> {
    return DenoWorker.#spawn(options, undefined, faults);
  }

  static async #spawn(
    options: WorkerProcessOptions,
    binding: WorkerBinding | undefined,
    spareFaults?: WorkerFaults,
  ): Promise<DenoWorker> {
    fs.rmSync(options.socketPath, { force: true });
    const server = net.createServer();
    server.maxConnections = 1;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.socketPath, () => resolve());
    });
    const worker = new DenoWorker(options, server, binding, spareFaults);
    await worker.#step();
    // Threads Deno started before the first call took its priority from the main thread's old one.
    lowerPriority(worker.pid, options.nice);
    return worker;
  }

  /**
   * Gives a spare on standby the one function version it will serve for the rest of its life, and
   * resolves once the function is loaded and the worker is ready. The binding is the host's: the
   * worker's ctx calls and logs go to this site's hooks, whatever the worker says.
   */
  async bind(binding: WorkerBinding, source: Uint8Array): Promise<void> {
    if (this.#binding || this.#view.spare !== 'waiting')
      throw new Error('only a spare on standby may be given a function');
    this.#binding = binding;
    this.#view.spare = undefined;
    const rewrite = pathRedactor(pathToFileURL(binding.modulePath).href, binding.sourcePath, BERTH_URL);
    this.#rewrite = (line) => rewrite(line).replace(MODULE_DATA_URL, binding.sourcePath);
    const loaded = this.#step();
    this.#send(
      FrameType.Load,
      0,
      encodeLoad(
        {
          siteId: binding.siteId,
          kind: binding.kind,
          sourcePath: binding.sourcePath,
          egress: binding.egress,
          language: binding.modulePath.endsWith('.js') ? 'js' : 'ts',
        },
        source,
      ),
    );
    await loaded;
  }

  /** A start step: settled by the next Ready or Standby, or failed by the worker's end or the time limit. */
  #step(): Promise<void> {
    const step = new Promise<void>((resolve, reject) => {
      this.#settleStep = (error) => (error ? reject(error) : resolve());
    });
    if (!this.alive) this.#settleStep(new Error('the worker has stopped'));
    else {
      this.#startTimer = setTimeout(
        () => this.#stop('crashed', new Error(`the worker was not ready within ${this.#options.startupTimeoutMs} ms`)),
        this.#options.startupTimeoutMs,
      );
    }
    return step;
  }

  get pid(): number | undefined {
    return this.#process.pid;
  }

  /** Requests sent and not yet fully answered. */
  get inflight(): number {
    return this.#pending.size;
  }

  get alive(): boolean {
    return this.#exitReason === undefined;
  }

  /** Why the worker was stopped, once it was. */
  get stoppedFor(): ExitReason | undefined {
    return this.#exitReason;
  }

  /** Sends a request; resolves when the response head arrives, its body streams afterwards. */
  invoke(request: WorkerRequest): { response: Promise<WorkerResponse>; cancel: () => void } {
    const stream = this.#nextStream++;
    const response = new Promise<WorkerResponse>((resolve, reject) => {
      if (!this.alive) return reject(new WorkerError('crashed', 'the worker has stopped'));
      this.#pending.set(stream, { resolve, reject, chunks: [] });
      const { body, ...head } = request;
      this.#send(FrameType.Request, stream, encodeRequest(head, body));
    });
    return {
      response,
      cancel: () => {
        if (this.#pending.has(stream)) this.#send(FrameType.Cancel, stream);
      },
    };
  }

  /** Stops the process; callers still waiting get a WorkerError for `reason`. */
  kill(reason: ExitReason): void {
    this.#stop(
      reason,
      reason === 'protocol'
        ? new WorkerError('protocol', FAILURES.protocol)
        : new Error(`the worker was stopped (${reason}) before it was ready`),
    );
  }

  /**
   * Memory of the process, from /proc (null where that is not available): resident, and its own part
   * (resident less the pages it shares, most of them Deno's executable, mapped by every worker).
   */
  memory(): { resident: number; own: number } | null {
    if (!this.pid || !this.alive) return null;
    try {
      // The file is kept open and read again from its start: a quarter of the cost of opening it each
      // time, which counts with a thousand workers read twice a second. The open file is this process's
      // for good: its id, once reused, never shows another's memory.
      this.#statm ??= fs.openSync(`/proc/${this.pid}/statm`, 'r');
      const read = fs.readSync(this.#statm, STATM, 0, STATM.length, 0);
      const [, resident, shared] = STATM.toString('latin1', 0, read).split(' ').map(Number);
      return { resident: resident! * PAGE_BYTES, own: (resident! - shared!) * PAGE_BYTES };
    } catch {
      return null;
    }
  }

  #closeStatm(): void {
    if (this.#statm === undefined) return;
    fs.closeSync(this.#statm);
    this.#statm = undefined;
  }

  /** `graceMs`: the process is ending by itself; let it finish writing its last words to stderr first. */
  #stop(reason: ExitReason, startError: Error, graceMs = 0): void {
    if (this.#exitReason) return;
    this.#exitReason = reason;
    clearTimeout(this.#startTimer);
    clearTimeout(this.#floodHold);
    this.#settleStep(startError);
    this.#failAll(reason);
    this.#queue = [];
    this.#server.close();
    this.#socket?.destroy();
    // A stopped worker is watched no more: its /proc file goes now, not when its process is reaped.
    this.#closeStatm();
    if (graceMs > 0) this.#killTimer = setTimeout(() => this.#process.kill('SIGKILL'), graceMs);
    else this.#process.kill('SIGKILL');
    fs.rmSync(this.#options.socketPath, { force: true });
  }

  /** Where faults go: the site's hooks once bound. */
  get #faults(): WorkerFaults {
    return (this.#binding ?? this.#spareFaults)!;
  }

  #violation(message: string): void {
    if (!this.alive) return;
    this.#faults.onProtocolError(message);
    this.kill('protocol');
  }

  #attach(socket: net.Socket): void {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = this.#reader.push(chunk);
      } catch (err) {
        return this.#violation((err as Error).message);
      }
      for (const frame of frames) this.#queue.push(frame);
      this.#pump();
    });
    // Deno closes the channel before it reports an uncaught error on stderr.
    socket.on('close', () =>
      this.#stop('crashed', new Error('the worker closed its channel before it was ready'), EXIT_GRACE_MS),
    );
    socket.on('error', () => this.kill('crashed'));
  }

  /** Queues a frame; `written` runs once it has left for the worker (never, if the channel is gone). */
  #send(type: FrameTypeValue, stream: number, payload?: Uint8Array, written?: () => void): void {
    const socket = this.#socket;
    if (!socket || socket.destroyed) return;
    // One write per turn, as the shim batches its own frames.
    corkForTurn(socket);
    const frame = encodeFrame(type, stream, payload);
    if (!written) socket.write(frame);
    else
      socket.write(frame, (err) => {
        if (!err) written();
      });
  }

  /** The channel is not read while the worker has too much of the host's attention outstanding. */
  #held(): boolean {
    return (
      this.#ctxCalls >= MAX_CTX_CALLS ||
      this.#ctxBytes >= MAX_CTX_BYTES ||
      this.#drains > 0 ||
      this.#floodHold !== undefined
    );
  }

  /** Handles queued frames until the queue is empty or the channel is held, then pauses or resumes reading. */
  #pump(): void {
    while (this.alive && this.#queueHead < this.#queue.length && !this.#held()) {
      const frame = this.#queue[this.#queueHead++]!;
      try {
        this.#handle(frame);
      } catch (err) {
        if (err instanceof ProtocolViolation) {
          this.#violation(err.message);
        } else {
          this.#faults.onError(err, 'a worker frame could not be handled');
          this.kill('crashed');
        }
      }
    }
    if (!this.alive) return;
    if (this.#queueHead === this.#queue.length) {
      this.#queue = [];
      this.#queueHead = 0;
    }
    this.#startStreams();
    if (this.#queue.length > 0 || this.#held()) this.#socket?.pause();
    else this.#socket?.resume();
  }

  #handle(frame: Frame): void {
    const message = readInbound(frame, this.#view);
    switch (message.type) {
      case 'standby':
        this.#view.spare = 'waiting';
        clearTimeout(this.#startTimer);
        this.#settleStep();
        return;
      case 'ready':
        this.#view.ready = true;
        clearTimeout(this.#startTimer);
        this.#settleStep();
        return;
      case 'head':
        this.#pending.get(message.stream)!.head = message.head;
        return;
      case 'chunk': {
        const pending = this.#pending.get(message.stream)!;
        const bytes = Buffer.from(message.bytes.buffer, message.bytes.byteOffset, message.bytes.byteLength);
        if (!pending.body) pending.chunks.push(bytes);
        else if (!pending.body.destroyed && !pending.body.write(bytes)) this.#awaitDrain(pending.body);
        return;
      }
      case 'end': {
        const pending = this.#pending.get(message.stream)!;
        if (pending.body) pending.body.end();
        else
          pending.resolve({
            status: pending.head!.status,
            headers: pending.head!.headers,
            body: Buffer.concat(pending.chunks),
          });
        this.#pending.delete(message.stream);
        return;
      }
      case 'error': {
        const pending = this.#pending.get(message.stream)!;
        const error = new WorkerError('handler', 'the function failed', message.failure);
        if (pending.body) pending.body.destroy(error);
        else pending.reject(error);
        this.#pending.delete(message.stream);
        return;
      }
      case 'ctx':
        this.#view.lastCall = message.stream;
        void this.#serveCtx(message.stream, message.call, frame.payload.length);
        return;
      case 'log':
        this.#output.accept(message.entry);
        if (this.#output.flooded && !this.#floodHold) {
          this.#floodHold = setTimeout(() => {
            this.#floodHold = undefined;
            this.#pump();
          }, this.#output.msToNextWindow());
        }
        return;
    }
  }

  /**
   * Serves one ctx call; never rejects, whatever the call or the host does. The call counts as in
   * flight until its result has left for the worker, so a worker that stops reading cannot make the
   * host pile up results.
   */
  async #serveCtx(stream: number, call: CtxCall, bytes: number): Promise<void> {
    // A ctx call passes the checks only once the worker is ready, so only once it is bound.
    const binding = this.#binding!;
    this.#ctxCalls++;
    this.#ctxBytes += bytes;
    const failed: CtxResult = { ok: false, error: { code: CtxErrorCode.Failed, message: `ctx.${call.method} failed` } };
    let payload: Uint8Array;
    try {
      payload = encodeJson(
        await (call.method === DB_LINE_METHOD
          ? binding.onDbLine(dbLinePath(this.#options.socketPath), call.args)
          : binding.onCtxCall(call)),
      );
    } catch (err) {
      binding.onError(err, 'a ctx call could not be served');
      payload = encodeJson(failed);
    }
    this.#ctxBytes += payload.length - bytes;
    this.#send(FrameType.CtxResult, stream, payload, () => {
      this.#ctxCalls--;
      this.#ctxBytes -= payload.length;
      this.#pump();
    });
  }

  #awaitDrain(body: PassThrough): void {
    this.#drains++;
    const resume = () => {
      body.off('drain', resume);
      body.off('close', resume);
      this.#drains--;
      this.#pump();
    };
    body.on('drain', resume);
    body.on('close', resume);
  }

  /**
   * Responses whose head came without their end in the same read are streamed from here on;
   * the others were answered whole, with one buffer and a Content-Length.
   */
  #startStreams(): void {
    for (const pending of this.#pending.values()) {
      if (!pending.head || pending.body) continue;
      pending.body = new PassThrough({ highWaterMark: BODY_BUFFER_BYTES });
      for (const chunk of pending.chunks.splice(0)) pending.body.write(chunk);
      pending.resolve({ status: pending.head.status, headers: pending.head.headers, body: pending.body });
    }
  }

  #failAll(reason: ExitReason): void {
    for (const pending of this.#pending.values()) {
      const error = new WorkerError(reason, FAILURES[reason]);
      if (pending.body) pending.body.destroy(error);
      else pending.reject(error);
    }
    this.#pending.clear();
  }
}
