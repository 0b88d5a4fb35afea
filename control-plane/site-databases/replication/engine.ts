// One engine process: Litestream replicating a fixed set of databases, read from its configuration at
// its start (the 0.3 line has no reload). Its metrics are served on a loopback port of its own; its log
// goes to a file, not to a pipe: a pipe whose reader died with a killed server would kill it on its
// next line, before it ships what it has.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { writeFileDurably } from '../../../storage/durable.ts';
import { loopbackPort } from '../../loopback-port.ts';
import {
  litestreamBinary,
  litestreamConfig,
  type ReplicaTarget,
  type ReplicatedDatabase,
  type ReplicationTiming,
} from './litestream.ts';

/** The engine polls each database and ships what changed at most this often (see litestream.ts). */
export const CYCLE_MS = 1000;
const STOP_GRACE_MS = 15_000;

export interface EngineOptions {
  /** Its configuration file (its log beside it). */
  config: string;
  target: ReplicaTarget;
  timing: ReplicationTiming;
}

export class Engine {
  readonly #options: EngineOptions;
  readonly #binary = litestreamBinary();
  #child: ResultPromise | null = null;
  #startedAt = 0;
  /** Where its metrics are served, once it runs. */
  metricsUrl = '';
  /** The databases it replicates, by site. */
  readonly siteIds: ReadonlySet<string>;

  constructor(options: EngineOptions, siteIds: Iterable<string>) {
    this.#options = options;
    this.siteIds = new Set(siteIds);
  }

  get running(): boolean {
    return this.#child !== null;
  }

  /**
   * Starts it on `databases`; resolves once it serves its metrics (it has opened every database), and
   * calls `exited` if it ends by itself later.
   */
  async start(databases: ReplicatedDatabase[], exited: (result: { exitCode?: number; signal?: string }) => void) {
    const config = this.#options.config;
    await fsp.mkdir(path.dirname(config), { recursive: true, mode: 0o700 });
    const port = await loopbackPort();
    await writeFileDurably(
      config,
      litestreamConfig(databases, this.#options.target, this.#options.timing, `127.0.0.1:${port}`),
    );
    // Its log (warnings and errors) starts afresh at each start, so it stays small.
    const log = fs.openSync(config.replace(/\.json$/, '.log'), 'w', 0o600);
    // It stops (gracefully, shipping what it has) once this server has ended, however it ended: one
    // left behind by a server killed outright would go on writing to replicas another node now owns.
    const untilServerEnds = `tail --pid=${process.pid} -f /dev/null`;
    const args = ['replicate', '-config', config, '-no-expand-env', '-exec', untilServerEnds];
    const child = execa(this.#binary, args, {
      cwd: path.dirname(config),
      // A descriptor number goes to the process as it is (execa's types list only 0 to 9).
      stdio: ['ignore', log as unknown as 'ignore', log as unknown as 'ignore'],
      buffer: false,
      reject: false,
      // Out of the server's process group: Ctrl-C reaches the server, which stops the engine gracefully.
      detached: true,
      cleanup: true,
    });
    fs.closeSync(log);
    this.metricsUrl = `http://127.0.0.1:${port}/metrics`;
    this.#child = child;
    this.#startedAt = Date.now();
    void child.then((result) => {
      if (this.#child !== child) return;
      this.#child = null;
      exited({ exitCode: result.exitCode, signal: result.signal ?? undefined });
    });
    const early = child.then(() => {
      throw new Error('the replicator exited as it started');
    });
    const deadline = Date.now() + 30_000;
    try {
      for (;;) {
        const answered = await fetch(this.metricsUrl, { signal: AbortSignal.timeout(1000) }).then(
          (res) => res.ok,
          () => false,
        );
        if (answered) break;
        if (Date.now() > deadline) throw new Error('the replicator did not take its databases within 30 s');
        await Promise.race([early, new Promise((resolve) => setTimeout(resolve, 50))]);
      }
    } catch (err) {
      await this.stop();
      throw err;
    } finally {
      early.catch(() => undefined);
    }
  }

  /**
   * Stops it gracefully: it ships what it has read of each database before it exits. Resolves with the
   * time it was told to stop when it exited cleanly (every write acknowledged before then is in the
   * replica), else null (it was not running, or had to be killed).
   */
  async stop(): Promise<number | null> {
    const child = this.#child;
    if (!child) return null;
    this.#child = null;
    // It reads a database for the first time a cycle after it starts, and ships on its stop only what
    // it has read before: stopped sooner, it would leave the newest writes unshipped.
    const young = this.#startedAt + CYCLE_MS + 300 - Date.now();
    if (young > 0) await new Promise((resolve) => setTimeout(resolve, young));
    const toldAt = Date.now();
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    const result = await child;
    clearTimeout(killer);
    return result.exitCode === 0 ? toldAt : null;
  }
}
