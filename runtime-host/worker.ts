// One Deno worker process serving one deployed function version. It owns the process and the Unix
// socket that is its only channel: requests go out as frames, responses, ctx calls and logs come back.
import fs from 'node:fs';
import net from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import { execa, type ResultPromise } from 'execa';
import { denoArgs, denoEnv } from './deno-args.ts';
import {
  type CtxCall,
  type CtxResult,
  type Frame,
  FrameReader,
  FrameType,
  type FrameTypeValue,
  type HandlerFailure,
  type LogEntry,
  type ResponseHead,
  decodeJson,
  encodeFrame,
  encodeJson,
  encodeRequest,
} from './protocol.ts';

export interface WorkerOptions {
  denoPath: string;
  entryPath: string;
  socketPath: string;
  /** An empty directory to run in. */
  cwd: string;
  denoDir: string;
  siteId: string;
  kind: 'api' | 'cron';
  heapMb: number;
  extraDenied: string[];
  startupTimeoutMs: number;
  onCtxCall: (call: CtxCall) => Promise<CtxResult>;
  onLog: (entry: LogEntry) => void;
}

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
export type ExitReason = 'disposed' | 'timeout' | 'memory' | 'crashed';

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

interface Pending {
  resolve: (response: WorkerResponse) => void;
  reject: (error: WorkerError) => void;
  head?: ResponseHead;
  /** Body bytes received before it was decided whether the body streams. */
  chunks: Buffer[];
  body?: PassThrough;
}

export class DenoWorker {
  readonly #options: WorkerOptions;
  readonly #process: ResultPromise;
  readonly #socket: net.Socket;
  readonly #pending = new Map<number, Pending>();
  #nextStream = 1;
  #corked = false;
  #exitReason: ExitReason | undefined;
  readonly exited: Promise<ExitReason>;

  private constructor(options: WorkerOptions, process: ResultPromise, socket: net.Socket, exited: Promise<ExitReason>) {
    this.#options = options;
    this.#process = process;
    this.#socket = socket;
    this.exited = exited;
  }

  /** Spawns Deno and resolves once the shim has connected and said it is ready. */
  static async start(options: WorkerOptions): Promise<DenoWorker> {
    fs.rmSync(options.socketPath, { force: true });
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.socketPath, () => resolve());
    });
    const child = execa(options.denoPath, denoArgs(options), {
      cwd: options.cwd,
      env: denoEnv(options.denoDir),
      extendEnv: false,
      stdin: 'ignore',
      buffer: false,
      reject: false,
      cleanup: true,
    });
    // Output that bypasses console.* still reaches the site's logs.
    child.stdout?.on('data', (chunk: Buffer) => options.onLog({ requestId: null, level: 'info', message: chunk.toString('utf8').trimEnd() }));
    child.stderr?.on('data', (chunk: Buffer) => options.onLog({ requestId: null, level: 'error', message: chunk.toString('utf8').trimEnd() }));
    const processEnded = child.then(() => undefined);

    let timer: NodeJS.Timeout | undefined;
    try {
      const { socket, reader, early } = await Promise.race([
        new Promise<{ socket: net.Socket; reader: FrameReader; early: Frame[] }>((resolve, reject) => {
          server.once('connection', (socket) => {
            const reader = new FrameReader();
            const early: Frame[] = [];
            const onData = (chunk: Buffer) => {
              let ready = false;
              try {
                // Frames other than Ready (console output of the module's top level) are kept.
                for (const frame of reader.push(chunk)) {
                  if (frame.type === FrameType.Ready) ready = true;
                  else early.push(frame);
                }
              } catch (err) {
                return reject(err);
              }
              if (!ready) return;
              socket.off('data', onData);
              resolve({ socket, reader, early });
            };
            socket.on('data', onData);
          });
        }),
        processEnded.then(() => {
          throw new Error('the worker exited before it was ready');
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`the worker was not ready within ${options.startupTimeoutMs} ms`)), options.startupTimeoutMs);
        }),
      ]);
      // One connection only: nobody else may attach to this worker's channel.
      server.close();
      const worker: DenoWorker = new DenoWorker(options, child, socket, processEnded.then((): ExitReason => worker.#exitReason ?? 'crashed'));
      worker.#listen(reader);
      for (const frame of early) worker.#dispatch(frame);
      processEnded.then(() => worker.#failAll(worker.#exitReason ?? 'crashed'));
      return worker;
    } catch (err) {
      child.kill('SIGKILL');
      server.close();
      fs.rmSync(options.socketPath, { force: true });
      throw err;
    } finally {
      clearTimeout(timer);
    }
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
    if (this.#exitReason) return;
    this.#exitReason = reason;
    this.#failAll(reason);
    this.#socket.destroy();
    this.#process.kill('SIGKILL');
    fs.rmSync(this.#options.socketPath, { force: true });
  }

  /** Resident memory of the process, from /proc (null where that is not available). */
  rssBytes(): number | null {
    if (!this.pid) return null;
    try {
      const statm = fs.readFileSync(`/proc/${this.pid}/statm`, 'utf8');
      return Number(statm.split(' ')[1]) * 4096;
    } catch {
      return null;
    }
  }

  #send(type: FrameTypeValue, stream: number, payload?: Uint8Array): void {
    if (this.#socket.destroyed) return;
    // Frames written in the same tick leave in one write, as the shim batches its own.
    if (!this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.#socket.uncork();
      });
    }
    this.#socket.write(encodeFrame(type, stream, payload));
  }

  #listen(reader: FrameReader): void {
    this.#socket.on('data', (chunk: Buffer) => {
      try {
        for (const frame of reader.push(chunk)) this.#dispatch(frame);
      } catch {
        this.kill('crashed');
        return;
      }
      this.#startStreams();
    });
    this.#socket.on('close', () => this.kill(this.#exitReason ?? 'crashed'));
    this.#socket.on('error', () => this.kill(this.#exitReason ?? 'crashed'));
  }

  #dispatch(frame: Frame): void {
    const pending = this.#pending.get(frame.stream);
    switch (frame.type) {
      case FrameType.ResponseHead:
        if (pending) pending.head = decodeJson<ResponseHead>(frame.payload);
        return;
      case FrameType.ResponseChunk:
        if (pending?.body) pending.body.write(Buffer.from(frame.payload));
        else pending?.chunks.push(Buffer.from(frame.payload));
        return;
      case FrameType.ResponseEnd:
        if (!pending?.head) return;
        if (pending.body) pending.body.end();
        else pending.resolve({ status: pending.head.status, headers: pending.head.headers, body: Buffer.concat(pending.chunks) });
        this.#pending.delete(frame.stream);
        return;
      case FrameType.ResponseError: {
        if (!pending) return;
        const failure = decodeJson<HandlerFailure>(frame.payload);
        const error = new WorkerError('handler', 'the function failed', failure);
        if (pending.body) pending.body.destroy(error);
        else pending.reject(error);
        this.#pending.delete(frame.stream);
        return;
      }
      case FrameType.CtxCall: {
        const call = decodeJson<CtxCall>(frame.payload);
        this.#options.onCtxCall(call).then((result) => this.#send(FrameType.CtxResult, frame.stream, encodeJson(result)));
        return;
      }
      case FrameType.Log:
        this.#options.onLog(decodeJson<LogEntry>(frame.payload));
        return;
    }
  }

  /**
   * Responses whose head came without their end in the same read are streamed from here on;
   * the others were answered whole, with one buffer and a Content-Length.
   */
  #startStreams(): void {
    for (const pending of this.#pending.values()) {
      if (!pending.head || pending.body) continue;
      pending.body = new PassThrough();
      for (const chunk of pending.chunks.splice(0)) pending.body.write(chunk);
      pending.resolve({ status: pending.head.status, headers: pending.head.headers, body: pending.body });
    }
  }

  #failAll(reason: ExitReason): void {
    const message = {
      disposed: 'the worker was stopped',
      timeout: 'the function did not answer in time',
      memory: 'the function exceeded its memory limit',
      crashed: 'the function’s worker crashed',
    }[reason];
    for (const pending of this.#pending.values()) {
      const error = new WorkerError(reason, message);
      if (pending.body) pending.body.destroy(error);
      else pending.reject(error);
    }
    this.#pending.clear();
  }
}
