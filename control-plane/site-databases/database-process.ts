// One site database's Deno process (deno/sqlite-host.ts): spawned with permission to open its
// site's folder and nothing else, spoken to over stdin/stdout, answered in order. Only the operation
// at the head of the line runs, so only it is timed; past its limit the process is killed, which
// SQLite's journal makes safe: an interrupted write is rolled back by the next process to open the file.
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { DENO_RUN, denoEnv } from '../../runtime-host/deno-args.ts';
import { DEFAULT_NICE, lowerPriority } from '../../runtime-host/priority.ts';
import { FrameReader, decodeJson, encodeFrame, encodeJson } from '../../runtime-host/protocol.ts';
import { corkForTurn } from '../../runtime-host/turn-cork.ts';
import { type LineStats, type DbRequest, type DbResult, DbFrame, MAX_DB_FRAME_BYTES } from './protocol.ts';

const HOST = path.resolve(import.meta.dirname, 'deno/sqlite-host.ts');

export interface DatabaseProcessOptions {
  denoPath: string;
  /** Deno's module cache, shared with function workers. */
  denoDir: string;
  /** The site's folder: the only place the process may read or write. */
  siteDir: string;
  /** SQLite's own allocations (page cache, sorts, temporary tables) stop at this many bytes. */
  sqliteHeapBytes: number;
  /** The database file may grow to this many bytes (SQLite's max_page_count). */
  maxBytes: number;
  /** The replicator follows the database: SQLite leaves checkpoints to it. */
  replicated?: boolean;
  /**
   * The one socket path the process may use: the host links it to each worker it tells the process to
   * connect to for a line (deno/db-lines.ts). None: it serves the host alone.
   */
  linePath?: string;
  /** What the lines did, as the process reports it (DbFrame.Stats). */
  onStats?: (stats: LineStats) => void;
  startupTimeoutMs: number;
}

/** The sandbox of a database process, as a pure function. */
export function sqliteHostArgs(
  options: Pick<DatabaseProcessOptions, 'siteDir' | 'sqliteHeapBytes' | 'maxBytes' | 'replicated' | 'linePath'>,
): string[] {
  const line = options.linePath;
  return [
    ...DENO_RUN,
    // Deno grants a unix socket by its exact path, as net, read and write permission.
    ...(line ? [`--allow-net=unix:${line}`] : []),
    `--allow-read=${options.siteDir}${line ? `,${line}` : ''}`,
    `--allow-write=${options.siteDir}${line ? `,${line}` : ''}`,
    '--v8-flags=--max-old-space-size=128',
    HOST,
    path.join(options.siteDir, 'db.sqlite'),
    String(options.sqliteHeapBytes),
    String(options.maxBytes),
    options.replicated ? 'replicated' : 'alone',
    line ?? 'none',
  ];
}

export type StopReason = 'disposed' | 'timeout' | 'crashed';

/** The process stopped before answering. */
export class DatabaseProcessError extends Error {
  constructor(readonly reason: StopReason) {
    super(
      {
        disposed: 'the database was closed',
        timeout: 'the statement ran past its time limit and was stopped',
        crashed: 'the database process stopped unexpectedly',
      }[reason],
    );
  }
}

interface Pending {
  stream: number;
  timeoutMs: number;
  resolve: (result: DbResult) => void;
  reject: (error: DatabaseProcessError) => void;
  onChunk?: ((chunk: Buffer) => void) | undefined;
}

export class DatabaseProcess {
  readonly #process: ResultPromise;
  readonly #queue: Pending[] = [];
  #nextStream = 1;
  #timer: NodeJS.Timeout | undefined;
  #stopReason: StopReason | undefined;
  readonly exited: Promise<StopReason>;

  readonly #onStats: ((stats: LineStats) => void) | undefined;

  private constructor(child: ResultPromise, onStats?: (stats: LineStats) => void) {
    this.#process = child;
    this.#onStats = onStats;
    this.exited = child.then(() => {
      this.#fail(this.#stopReason ?? 'crashed');
      return this.#stopReason ?? 'crashed';
    });
  }

  /** Spawns the process and resolves once its database is open and confined. */
  static async start(options: DatabaseProcessOptions): Promise<DatabaseProcess> {
    const child = execa(options.denoPath, sqliteHostArgs(options), {
      cwd: options.siteDir,
      env: denoEnv(options.denoDir),
      extendEnv: false,
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
      // Out of the server's process group, so Ctrl-C at the terminal does not cut a statement short;
      // the process ends by itself when its stdin closes, with the server or without it.
      detached: true,
      cleanup: false,
    });
    lowerPriority(child.pid, DEFAULT_NICE);
    const process = new DatabaseProcess(child, options.onStats);
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2000);
    });
    const ready = new Promise<void>((resolve, reject) => {
      process.#listen(resolve, reject);
      void process.exited.then(() =>
        reject(new Error(`the database process exited before it was ready: ${stderr.trim()}`)),
      );
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`the database process was not ready within ${options.startupTimeoutMs} ms`)),
            options.startupTimeoutMs,
          );
        }),
      ]);
    } catch (err) {
      process.kill('crashed');
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return process;
  }

  /** Why the process stopped, once it has. */
  get stopReason(): StopReason | undefined {
    return this.#stopReason;
  }

  get alive(): boolean {
    return this.#stopReason === undefined;
  }

  /** Operations sent and not yet answered. */
  get inflight(): number {
    return this.#queue.length;
  }

  get pid(): number | undefined {
    return this.#process.pid;
  }

  /** Sends one operation; `onChunk` receives a dump's pieces as they come. */
  call(request: DbRequest, timeoutMs: number, onChunk?: (chunk: Buffer) => void): Promise<DbResult> {
    return new Promise((resolve, reject) => {
      if (!this.alive) return reject(new DatabaseProcessError(this.#stopReason ?? 'crashed'));
      const stream = this.#nextStream++;
      this.#queue.push({ stream, timeoutMs, resolve, reject, onChunk });
      this.#send(encodeFrame(DbFrame.Request, stream, encodeJson(request)));
      if (this.#queue.length === 1) this.#startClock();
    });
  }

  /** Writes a frame; the frames of one event-loop turn reach the process in one write. */
  #send(frame: Uint8Array): void {
    const stdin = this.#process.stdin!;
    corkForTurn(stdin);
    stdin.write(frame);
  }

  /**
   * Stops the process. `disposed` closes its stdin so it closes the database (checkpointing the WAL)
   * and exits; any other reason kills it at once. Operations still waiting fail with `reason`.
   */
  kill(reason: StopReason): void {
    if (this.#stopReason) return;
    this.#stopReason = reason;
    clearTimeout(this.#timer);
    this.#fail(reason);
    if (reason === 'disposed') {
      this.#process.stdin!.end();
      const force = setTimeout(() => this.#process.kill('SIGKILL'), 5000);
      force.unref();
      void this.exited.then(() => clearTimeout(force));
    } else {
      this.#process.kill('SIGKILL');
    }
  }

  #listen(ready: () => void, broken: (err: Error) => void): void {
    const reader = new FrameReader(() => MAX_DB_FRAME_BYTES);
    let started = false;
    this.#process.stdout!.on('data', (chunk: Buffer) => {
      try {
        for (const frame of reader.push(chunk)) {
          if (!started) {
            if (frame.type !== DbFrame.Ready) throw new Error(`expected Ready, got frame type ${frame.type}`);
            started = true;
            ready();
            continue;
          }
          if (frame.type === DbFrame.Stats && frame.stream === 0) {
            this.#onStats?.(decodeJson<LineStats>(frame.payload));
            continue;
          }
          const head = this.#queue[0];
          if (!head || frame.stream !== head.stream) throw new Error(`frame for stream ${frame.stream} out of turn`);
          if (frame.type === DbFrame.DumpChunk && head.onChunk) {
            head.onChunk(Buffer.from(frame.payload));
          } else if (frame.type === DbFrame.Result) {
            this.#queue.shift();
            clearTimeout(this.#timer);
            if (this.#queue.length > 0) this.#startClock();
            head.resolve(decodeJson<DbResult>(frame.payload));
          } else {
            throw new Error(`unexpected frame type ${frame.type}`);
          }
        }
      } catch (err) {
        broken(err as Error);
        this.kill('crashed');
      }
    });
    // A closed pipe is reported through `exited`; the write error itself needs no handling.
    this.#process.stdin!.on('error', () => this.kill('crashed'));
  }

  #startClock(): void {
    const head = this.#queue[0]!;
    this.#timer = setTimeout(() => this.kill('timeout'), head.timeoutMs);
  }

  #fail(reason: StopReason): void {
    for (const pending of this.#queue.splice(0)) pending.reject(new DatabaseProcessError(reason));
  }
}
