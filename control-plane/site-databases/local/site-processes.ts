// The local provider's database processes: one per database (a site's, or a branch of it), started on
// first use, pooled and capped like function workers, stopped on demand, and where each database's files
// are in the data dir.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { PoolFullError, WorkerPool } from '../../../runtime-host/pool.ts';
import { DatabaseProcess } from '../database-process.ts';
import type { LineStats } from '../protocol.ts';
import { BRANCH_NOT_HERE, StatementError } from '../provider.ts';
import type { SiteDatabaseOptions } from './options.ts';
import { isBranchName, parseDatabaseName } from '../branch-names.ts';

const SQLITE_HEAP_BYTES = 256 * 1024 * 1024;

export type SiteProcess = DatabaseProcess & { siteId: string; linePath: string | undefined };

export interface SiteProcessHooks {
  /** What a process's lines did (DbFrame.Stats). */
  onStats(siteId: string, stats: LineStats): void;
  /** The process has exited. */
  onExit(process: SiteProcess): void;
}

export class SiteProcesses {
  readonly #options: SiteDatabaseOptions;
  /** Where the sites' folders are: <data dir>/sites. */
  readonly root: string;
  /** Where the branches' folders are: <data dir>/branches. */
  readonly branchRoot: string;
  readonly #pool: WorkerPool<SiteProcess>;
  /** Every process not yet exited, evicted ones included, so close() can wait for them all. */
  readonly #started = new Set<SiteProcess>();

  constructor(options: SiteDatabaseOptions, hooks: SiteProcessHooks) {
    this.#options = options;
    this.root = path.join(options.dataDir, 'sites');
    this.branchRoot = path.join(options.dataDir, 'branches');
    this.#pool = new WorkerPool({
      maxWorkers: options.maxProcesses,
      idleMs: options.idleMs,
      start: async (siteId) => {
        // The folder is made by create() and removed with the database: without it there is no
        // database, and a process would make an empty one. Checked here, when a process starts, not
        // on every statement.
        if (!fs.existsSync(this.dir(siteId)))
          throw new StatementError('unavailable', isBranchName(siteId) ? BRANCH_NOT_HERE : 'the site has no database');
        // A branch is a preview's copy, with no history of its own.
        const replicator = isBranchName(siteId) ? undefined : options.replicas?.replicator;
        const file = this.fileOf(siteId);
        // The replicator follows the database before its first statement, so its history has no gap;
        // a new database only once its process has made it (its first page decides its auto-vacuum).
        const fresh = !fs.existsSync(file);
        if (replicator && !fresh) await replicator.watch(siteId, file);
        // The one socket path the process may use: linked by the host to each worker it connects to.
        const linePath =
          options.lineDir && !isBranchName(siteId)
            ? path.join(options.lineDir, `${crypto.randomBytes(8).toString('hex')}.dbs`)
            : undefined;
        if (linePath) await fsp.mkdir(options.lineDir!, { recursive: true, mode: 0o700 });
        const process = Object.assign(
          await DatabaseProcess.start({
            denoPath: options.denoPath,
            denoDir: options.denoDir,
            siteDir: this.dir(siteId),
            sqliteHeapBytes: SQLITE_HEAP_BYTES,
            maxBytes: options.maxBytes,
            startupTimeoutMs: 10_000,
            replicated: Boolean(replicator),
            ...(linePath ? { linePath, onStats: (stats: LineStats) => hooks.onStats(siteId, stats) } : {}),
          }),
          { siteId, linePath },
        );
        this.#started.add(process);
        void process.exited.then(() => {
          this.#started.delete(process);
          hooks.onExit(process);
          if (linePath) for (const file of [linePath, `${linePath}.tmp`]) fs.rmSync(file, { force: true });
          replicator?.idle(siteId);
        });
        if (replicator && fresh) await replicator.watch(siteId, file);
        return process;
      },
    });
  }

  /** The database's folder (a site's id, or a branch's name: branch-names.ts). */
  dir(name: string): string {
    const { branch } = parseDatabaseName(name);
    return path.join(branch === null ? this.root : this.branchRoot, name);
  }

  /** The database's file. */
  fileOf(siteId: string): string {
    return path.join(this.dir(siteId), 'db.sqlite');
  }

  /** The site's process, started if needed; the caller must release it. */
  async acquire(siteId: string): Promise<SiteProcess> {
    try {
      return await this.#pool.acquire(siteId);
    } catch (err) {
      if (err instanceof PoolFullError)
        throw new StatementError('busy', 'every database process is busy; try again shortly');
      throw err;
    }
  }

  release(process: SiteProcess): void {
    this.#pool.release(process);
  }

  /** The site's live process, if it has one. */
  live(siteId: string): SiteProcess | undefined {
    return this.#pool.live(siteId);
  }

  /**
   * A process of its own on the database in `dir`, outside the pool (an arriving copy checked before
   * it takes a site's place); the caller kills it.
   */
  startApart(dir: string): Promise<DatabaseProcess> {
    return DatabaseProcess.start({
      denoPath: this.#options.denoPath,
      denoDir: this.#options.denoDir,
      siteDir: dir,
      sqliteHeapBytes: SQLITE_HEAP_BYTES,
      maxBytes: this.#options.maxBytes,
      startupTimeoutMs: 10_000,
    });
  }

  /** Ends the site's processes; the next call starts a new one. */
  async stop(siteId: string): Promise<void> {
    this.#pool.retire((key) => key === siteId);
    const stopping = [...this.#started].filter((p) => p.siteId === siteId);
    for (const process of stopping) process.kill('disposed');
    await Promise.all(stopping.map((p) => p.exited));
  }

  /** Ends every process; the pool may start new ones (the provider decides whether it asks). */
  async stopAll(): Promise<void> {
    this.#pool.retire(() => true);
    for (const process of this.#started) process.kill('disposed');
    await Promise.all([...this.#started].map((p) => p.exited));
  }

  async close(): Promise<void> {
    await this.#pool.close();
    for (const process of this.#started) process.kill('disposed');
    await Promise.all([...this.#started].map((p) => p.exited));
  }
}
