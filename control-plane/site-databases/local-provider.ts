// The local site database provider: one SQLite file per site at <data dir>/sites/<siteId>/db.sqlite,
// each opened by a Deno process of its own (database-process.ts) that SQLite and Deno confine to that
// file. Processes start on first use, stay warm while used, and are capped and evicted like function
// workers. It implements the provider interface (provider.ts) that a networked SQL provider would
// implement too; nothing outside this folder knows the databases are local files.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { PoolFullError, WorkerPool } from '../../runtime-host/pool.ts';
import { DatabaseProcess, DatabaseProcessError } from './database-process.ts';
import { compactSqlite } from './sqlite-compact.ts';
import { syncPath } from '../../storage/durable.ts';
import {
  type Access,
  CHANNEL_TOKEN_CHARS,
  type Census,
  type ChannelStats,
  type Compaction,
  type DbRequest,
  type RowValue,
  type Statement,
  type StatementOutcome,
} from './protocol.ts';
import {
  type FrozenDatabase,
  type Restore,
  type RestorePoints,
  type RunOptions,
  type SiteDatabaseProvider,
  StatementError,
  type StatementResult,
} from './provider.ts';
import { OutsideRestoreRange, type SiteReplicas } from './replication/site-replicas.ts';
import type { RestoreRange } from './replication/timeline.ts';

export interface SiteDatabaseOptions {
  dataDir: string;
  denoPath: string;
  denoDir: string;
  /** Time limit of one statement or batch. */
  statementTimeoutMs: number;
  /** Live database processes at most; the least recently used idle one makes room. */
  maxProcesses: number;
  /** An idle database process is stopped after this long. */
  idleMs: number;
  /** A database may grow to this many bytes. */
  maxBytes: number;
  /** Told how long each statement or batch took, by whom it was run and whether it succeeded, for metrics. */
  onStatement?: (access: Access, ok: boolean, seconds: number) => void;
  /** The databases' replicas; null: not replicated (BERTH_DATABASE_REPLICATION=false). */
  replicas?: SiteReplicas | null;
  /**
   * Where database processes listen for their workers' channels (openChannel) and workers' links to
   * them are made: the runtime's socket folder. None: workers' calls all come through the host.
   */
  channelDir?: string;
  /** Channel tokens kept at most, the oldest going first (MAX_TOKENS when not given). */
  maxChannelTokens?: number;
}

/** Migrations may rebuild large tables and dumps read everything: both get more time than a statement. */
const MIGRATION_TIMEOUT_MS = 5 * 60_000;
const DUMP_TIMEOUT_MS = 10 * 60_000;
const SQLITE_HEAP_BYTES = 256 * 1024 * 1024;
/** A process with channels is pinged this often: an unanswered ping is a channel's statement running. */
const PING_MS = 1000;
/** How long a stopped process's tokens are kept, so a worker whose channel broke can learn why. */
const TOKENS_KEPT_MS = 60_000;
/**
 * Tokens kept at most: a long-lived process gives one to every channel its workers open, and a channel
 * its worker ended is never heard of again. The oldest go first (a channel lost then is told only that
 * it closed).
 */
const MAX_TOKENS = 10_000;

const TOKEN = new RegExp(`^[0-9a-f]{${CHANNEL_TOKEN_CHARS}}$`);

type SiteProcess = DatabaseProcess & { siteId: string; channelPath: string | undefined };

const timedOut = (timeoutMs: number) =>
  new StatementError(
    'timeout',
    `the statement ran longer than ${timeoutMs} ms and was stopped; nothing it wrote was kept`,
  );

const noReplication = () =>
  new StatementError('unavailable', 'database replication is off on this node (BERTH_DATABASE_REPLICATION)');

/** Restores are asked for and answered to the second. */
const nextSecond = (ms: number): number => Math.floor(ms / 1000) * 1000 + 1000;

const fencedOff = () =>
  new StatementError(
    'unavailable',
    'the node that holds the database lost touch with the metadata: it serves it again once it is back',
  );

const movedAway = () => new StatementError('moved', 'the site\u2019s database was moved to another node');

const revive = (outcome: StatementOutcome): StatementResult => ({
  ...outcome,
  rows: outcome.rows.map((row) => {
    const out: Record<string, unknown> = {};
    for (const [column, value] of Object.entries(row) as Array<[string, RowValue]>) {
      out[column] = value !== null && typeof value === 'object' ? Buffer.from(value.$blob, 'base64') : value;
    }
    return out;
  }),
});

export class SiteDatabases implements SiteDatabaseProvider {
  readonly #options: SiteDatabaseOptions;
  readonly #root: string;
  readonly #pool: WorkerPool<SiteProcess>;
  /** Every process not yet exited, evicted ones included, so close() can wait for them all. */
  readonly #started = new Set<SiteProcess>();
  /** Processes whose workers may have channels open, and the ping that times their statements. */
  readonly #channelled = new Map<SiteProcess, NodeJS.Timeout>();
  /** Channel tokens given, by the process that lets them in. */
  readonly #tokens = new Map<string, SiteProcess>();
  /** Who hears each site's channel calls. */
  readonly #onCalls = new Map<string, (calls: Record<string, number>) => void>();
  /** The connect under way of each process, which the next waits for. */
  readonly #connecting = new WeakMap<SiteProcess, Promise<unknown>>();
  /** Channels opening now: a close of their site's channels meanwhile marks them, and they close too. */
  readonly #opening = new Set<{ siteId: string; closed: boolean }>();
  #channelCalls = 0;
  /** Calls sent and not yet answered, per site, and who waits for a site's to be answered. */
  readonly #inflight = new Map<string, number>();
  readonly #drained = new Map<string, () => void>();
  /** Sites being compacted: their new calls wait for this. */
  readonly #paused = new Map<string, Promise<void>>();
  /** Sites whose writes are paused while their file is copied, and what they wait for. */
  readonly #frozen = new Map<string, Promise<'moved' | 'kept'>>();
  /** Sites whose database was moved to another node: a call that still arrives here is told so. */
  readonly #movedAway = new Set<string>();
  /** Fenced (cluster/fence.ts): this node lost touch with the metadata, and serves none of its databases. */
  #fenced = false;

  constructor(options: SiteDatabaseOptions) {
    this.#options = options;
    this.#root = path.join(options.dataDir, 'sites');
    this.#pool = new WorkerPool({
      maxWorkers: options.maxProcesses,
      idleMs: options.idleMs,
      start: async (siteId) => {
        // The folder is made by create() and removed with the database: without it there is no
        // database, and a process would make an empty one. Checked here, when a process starts, not
        // on every statement.
        if (!fs.existsSync(this.#dir(siteId))) throw new StatementError('unavailable', 'the site has no database');
        const replicator = options.replicas?.replicator;
        const file = this.fileOf(siteId);
        // The replicator follows the database before its first statement, so its history has no gap;
        // a new database only once its process has made it (its first page decides its auto-vacuum).
        const fresh = !fs.existsSync(file);
        if (replicator && !fresh) await replicator.watch(siteId, file);
        // The one socket path the process may use: linked by the host to each worker it connects to.
        const channelPath = options.channelDir
          ? path.join(options.channelDir, `${crypto.randomBytes(8).toString('hex')}.dbs`)
          : undefined;
        if (channelPath) await fsp.mkdir(options.channelDir!, { recursive: true, mode: 0o700 });
        const process = Object.assign(
          await DatabaseProcess.start({
            denoPath: options.denoPath,
            denoDir: options.denoDir,
            siteDir: this.#dir(siteId),
            sqliteHeapBytes: SQLITE_HEAP_BYTES,
            maxBytes: options.maxBytes,
            startupTimeoutMs: 10_000,
            replicated: Boolean(replicator),
            ...(channelPath
              ? { channelPath, onStats: (stats: ChannelStats) => this.#channelStats(siteId, stats) }
              : {}),
          }),
          { siteId, channelPath },
        );
        this.#started.add(process);
        void process.exited.then(() => {
          this.#started.delete(process);
          this.#unchannel(process);
          if (channelPath) for (const file of [channelPath, `${channelPath}.tmp`]) fs.rmSync(file, { force: true });
          replicator?.idle(siteId);
        });
        if (replicator && fresh) await replicator.watch(siteId, file);
        return process;
      },
    });
  }

  #dir(siteId: string): string {
    if (!/^[0-9a-f-]{36}$/.test(siteId)) throw new Error(`not a site id: ${siteId}`);
    return path.join(this.#root, siteId);
  }

  async create(siteId: string): Promise<void> {
    this.#movedAway.delete(siteId);
    await fsp.mkdir(this.#dir(siteId), { recursive: true, mode: 0o700 });
    await this.#call(siteId, null);
  }

  async run(siteId: string, statement: Statement, access: Access, options: RunOptions = {}): Promise<StatementResult> {
    const sentAt = Date.now();
    const request: DbRequest = { op: 'run', access, statement, ...(options.readsOnly ? { readsOnly: true } : {}) };
    const result = revive((await this.#call(siteId, request)) as StatementOutcome);
    if (result.changes > 0) this.#options.replicas?.replicator.wrote(siteId, sentAt);
    return result;
  }

  async batch(siteId: string, statements: Statement[], access: Access): Promise<StatementResult[]> {
    const sentAt = Date.now();
    const results = ((await this.#call(siteId, { op: 'batch', access, statements })) as StatementOutcome[]).map(revive);
    if (results.some((result) => result.changes > 0)) this.#options.replicas?.replicator.wrote(siteId, sentAt);
    return results;
  }

  async migrate(siteId: string, sql: string, receipt: Statement): Promise<void> {
    const sentAt = Date.now();
    await this.#call(siteId, { op: 'migrate', sql, receipt }, MIGRATION_TIMEOUT_MS);
    this.#options.replicas?.replicator.wrote(siteId, sentAt);
  }

  async dump(siteId: string, file: string): Promise<number> {
    const handle = await fsp.open(file, 'w', 0o600);
    try {
      let writing = Promise.resolve();
      const { bytes } = (await this.#call(siteId, { op: 'dump' }, DUMP_TIMEOUT_MS, (chunk) => {
        writing = writing.then(() => handle.write(chunk).then(() => undefined));
      })) as { bytes: number };
      await writing;
      await handle.sync();
      return bytes;
    } finally {
      await handle.close();
    }
  }

  /**
   * Compacts between calls: new calls of the site wait until it is done, and it starts once the
   * site's calls in flight are answered.
   */
  compact(siteId: string): Promise<Compaction> {
    return this.#exclusively(siteId, async (file) => {
      // The engine follows the log a checkpoint truncates: it lets go first, and follows the compacted
      // file from the next process on.
      await this.#options.replicas?.replicator.unwatch(siteId);
      const compaction = await compactSqlite(file, this.#dir(siteId)).catch((err: Error) => {
        throw new StatementError('unavailable', `the database could not be compacted: ${err.message}`);
      });
      // A connection opened before keeps what it read of the file's header (auto-vacuum among it).
      await this.#stop(siteId);
      return compaction;
    });
  }

  /**
   * Stops serving every database: calls answer `unavailable` from now on, the processes stop (a call
   * in flight ends with them, uncommitted), and the replicator ships what it has and stops.
   */
  async fence(): Promise<void> {
    this.#fenced = true;
    this.#pool.retire(() => true);
    for (const process of this.#started) process.kill('disposed');
    await Promise.all([...this.#started].map((p) => p.exited));
    await this.#options.replicas?.replicator.suspend();
  }

  /** Serves again (the caller has set aside what was taken over meanwhile). */
  unfence(): void {
    this.#fenced = false;
    this.#options.replicas?.replicator.resume();
  }

  /**
   * A server stopped outright leaves the log of each database it had open, with writes the replicator
   * may not have shipped: each such database is followed again at the start (and left once idle).
   */
  async resumeReplication(): Promise<number> {
    const replicator = this.#options.replicas?.replicator;
    if (!replicator || !fs.existsSync(this.#root)) return 0;
    const unshipped = (await fsp.readdir(this.#root)).filter(
      (name) =>
        /^[0-9a-f-]{36}$/.test(name) &&
        (fs.statSync(`${this.fileOf(name)}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0,
    );
    await Promise.all(unshipped.map((siteId) => replicator.watch(siteId, this.fileOf(siteId))));
    for (const siteId of unshipped) replicator.idle(siteId);
    return unshipped.length;
  }

  /**
   * Brings the database here from the latest state of its replica, when the node that held it is lost:
   * checked whole and put in place like an arriving copy. Null when the replica holds nothing.
   */
  async recoverFromReplica(siteId: string): Promise<{ census: Census; replicatedAt: Date } | null> {
    const replicas = this.#options.replicas;
    if (!replicas) throw noReplication();
    const dir = await this.incoming(siteId);
    try {
      const replicatedAt = await replicas.restoreLatest(siteId, path.join(dir, 'db.sqlite'));
      if (!replicatedAt) {
        await this.discardIncoming(dir);
        return null;
      }
      return { census: await this.install(siteId, dir), replicatedAt };
    } catch (err) {
      await this.discardIncoming(dir);
      if (err instanceof StatementError) throw err;
      throw new StatementError('unavailable', `the replica could not be restored: ${(err as Error).message}`);
    }
  }

  /** What the database's replica can give back. */
  async restorePoints(siteId: string): Promise<RestorePoints> {
    const replicas = this.#options.replicas;
    if (!replicas) throw noReplication();
    if (this.#movedAway.has(siteId)) throw movedAway();
    const [range, replicaBytes] = await Promise.all([replicas.range(siteId), replicas.bytes(siteId)]);
    const status = replicas.status(siteId);
    return {
      earliest: range?.earliest.toISOString() ?? null,
      latest: range?.latest.toISOString() ?? null,
      replication: status
        ? {
            lagMs: status.lagMs,
            replicatedAt: status.replicatedAt?.toISOString() ?? null,
            replicaBytes,
            replicaMaxBytes: replicas.maxBytes,
          }
        : null,
    };
  }

  /**
   * Puts the database back as it was at `at`, between calls: the calls in flight finish, new ones wait.
   * The replica first receives every write made before, and the restored database starts a new stretch
   * of its history a second later, so the moment before the restore (`restoredFrom`) stays restorable.
   */
  async restore(siteId: string, at: Date): Promise<Restore> {
    const replicas = this.#options.replicas;
    if (!replicas) throw noReplication();
    // A moment outside the range is refused before the database's calls wait or its replication stops.
    const before = await replicas.range(siteId);
    if (!before || at < before.earliest || at > before.latest) return refusedOutside(before);
    return this.#exclusively(siteId, async (file) => {
      await replicas.replicator.unwatch(siteId);
      const restoredFrom = nextSecond(Date.now());
      const dir = await this.incoming(siteId);
      let installed = false;
      try {
        await replicas.restoreTo(siteId, at, path.join(dir, 'db.sqlite'));
        const wait = restoredFrom - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await this.install(siteId, dir);
        installed = true;
      } catch (err) {
        if (err instanceof OutsideRestoreRange) return refusedOutside(err.range);
        throw new StatementError('unavailable', `the database could not be restored: ${(err as Error).message}`);
      } finally {
        if (!installed) {
          await this.discardIncoming(dir);
          // Left as it was: the engine follows it again.
          if (this.#pool.live(siteId)) await replicas.replicator.watch(siteId, file);
        }
      }
      return {
        restored: true,
        restoredTo: at.toISOString(),
        restoredFrom: new Date(restoredFrom).toISOString(),
      } as const;
    });
  }

  /**
   * Runs `work` on the database between calls: new calls of the site wait until it is done, and it
   * starts once the site's calls in flight are answered.
   */
  async #exclusively<T>(siteId: string, work: (file: string) => Promise<T>): Promise<T> {
    if (this.#fenced) throw fencedOff();
    const file = this.fileOf(siteId);
    if (!fs.existsSync(file)) throw new StatementError('unavailable', 'the site has no database');
    while (this.#frozen.has(siteId)) await this.#frozen.get(siteId);
    if (this.#movedAway.has(siteId)) throw movedAway();
    while (this.#paused.has(siteId)) await this.#paused.get(siteId);
    let resume!: () => void;
    this.#paused.set(siteId, new Promise<void>((resolve) => (resume = resolve)));
    try {
      await this.#drain(siteId);
      return await work(file);
    } finally {
      this.#paused.delete(siteId);
      resume();
    }
  }

  /**
   * Waits until the site's calls in flight are answered, then closes its channels: the process answers
   * that once no channel statement runs, and no channel is given while the site is paused.
   */
  async #drain(siteId: string): Promise<void> {
    while ((this.#inflight.get(siteId) ?? 0) > 0)
      await new Promise<void>((resolve) => this.#drained.set(siteId, resolve));
    await this.closeChannels(siteId);
  }

  /**
   * Pauses the database's writes so its file can be copied to another node: the calls in flight are
   * answered first, the write-ahead log is moved into the file, and from then on statements run with
   * SQLite refusing writes (query_only). Reads are served throughout; a write, a migration or a
   * compaction waits for thaw() and then runs here, or learns that the database moved.
   */
  async freeze(siteId: string): Promise<FrozenDatabase> {
    const file = path.join(this.#dir(siteId), 'db.sqlite');
    if (this.#movedAway.has(siteId)) throw movedAway();
    if (!fs.existsSync(file)) throw new StatementError('unavailable', 'the site has no database');
    if (this.#frozen.has(siteId)) throw new StatementError('busy', 'the database is already being copied');
    while (this.#paused.has(siteId)) await this.#paused.get(siteId);
    let resume!: () => void;
    this.#paused.set(siteId, new Promise<void>((resolve) => (resume = resolve)));
    let thawed!: (outcome: 'moved' | 'kept') => void;
    try {
      await this.#drain(siteId);
      // The engine ships the last writes and lets go, so the checkpoint can empty the log; the node
      // that takes the copy replicates it from there.
      await this.#options.replicas?.replicator.unwatch(siteId);
      await this.#sendNow(siteId, { op: 'checkpoint' }, this.#options.statementTimeoutMs);
      this.#frozen.set(siteId, new Promise((resolve) => (thawed = resolve)));
    } finally {
      this.#paused.delete(siteId);
      resume();
    }
    return {
      file,
      census: async () => (await this.#call(siteId, { op: 'census' }, DUMP_TIMEOUT_MS)) as Census,
      thaw: async (outcome) => {
        // Marked moved before the waiting calls wake, so none of them writes to this file.
        if (outcome === 'moved') this.#movedAway.add(siteId);
        this.#frozen.delete(siteId);
        thawed(outcome);
        if (outcome !== 'moved') {
          if (this.#pool.live(siteId)) await this.#options.replicas?.replicator.watch(siteId, file);
          return;
        }
        await this.#stop(siteId);
        await fsp.rm(this.#dir(siteId), { recursive: true, force: true });
      },
    };
  }

  /** The site's database file. */
  fileOf(siteId: string): string {
    return path.join(this.#dir(siteId), 'db.sqlite');
  }

  /**
   * A folder for a copy of a site's database arriving from another node: the file goes in it as
   * `db.sqlite`, then install() puts it in place, or discardIncoming() removes it. Its name ends in
   * `.tmp`, so a start sweeps one a killed server left.
   */
  async incoming(siteId: string): Promise<string> {
    const dir = `${this.#dir(siteId)}.${crypto.randomUUID()}.incoming.tmp`;
    await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  async discardIncoming(dir: string): Promise<void> {
    if (!dir.startsWith(this.#root + path.sep) || !dir.endsWith('.incoming.tmp'))
      throw new Error(`not an incoming folder: ${dir}`);
    await fsp.rm(dir, { recursive: true, force: true });
  }

  /**
   * Puts an arrived copy (from incoming()) in the site's place: the copy is first opened and counted
   * by a database process of its own, so what takes the place is a database SQLite checked whole. Any
   * file the site had here before (an earlier copy left behind) is replaced.
   */
  async install(siteId: string, dir: string): Promise<Census> {
    let census: Census;
    const check = await DatabaseProcess.start({
      denoPath: this.#options.denoPath,
      denoDir: this.#options.denoDir,
      siteDir: dir,
      sqliteHeapBytes: SQLITE_HEAP_BYTES,
      maxBytes: this.#options.maxBytes,
      startupTimeoutMs: 10_000,
    }).catch((err: Error) => {
      throw new StatementError('unavailable', `the copy does not open as a database: ${err.message}`);
    });
    try {
      const result = await check.call({ op: 'census' }, DUMP_TIMEOUT_MS);
      if (!result.ok) throw new StatementError('unavailable', `the copy could not be checked: ${result.error.message}`);
      census = result.value as Census;
    } catch (err) {
      if (err instanceof DatabaseProcessError)
        throw new StatementError('unavailable', `the copy could not be checked: ${err.message}`);
      throw err;
    } finally {
      check.kill('disposed');
      await check.exited;
    }
    await this.#options.replicas?.replicator.unwatch(siteId);
    await this.#stop(siteId);
    await fsp.rm(this.#dir(siteId), { recursive: true, force: true });
    await fsp.rename(dir, this.#dir(siteId));
    await syncPath(this.#root);
    this.#movedAway.delete(siteId);
    return census;
  }

  async size(siteId: string): Promise<number> {
    const sizes = await Promise.all(
      ['db.sqlite', 'db.sqlite-wal'].map((name) =>
        fsp.stat(path.join(this.#dir(siteId), name)).then(
          (s) => s.size,
          () => 0,
        ),
      ),
    );
    return sizes[0]! + sizes[1]!;
  }

  /** The database is deleted: its file goes, and its replica (its history) with it. */
  async remove(siteId: string): Promise<void> {
    await this.dropCopy(siteId);
    await this.#options.replicas?.discard(siteId);
  }

  /**
   * Removes this node's file of the database and nothing else: a copy that did not become the
   * database (a move or a recovery that failed). Its replica belongs to the database, wherever it is.
   */
  async dropCopy(siteId: string): Promise<void> {
    await this.#options.replicas?.replicator.unwatch(siteId);
    await this.#stop(siteId);
    await fsp.rm(this.#dir(siteId), { recursive: true, force: true });
  }

  /** Ends the site's processes; the next call starts a new one. */
  async #stop(siteId: string): Promise<void> {
    this.#pool.retire((key) => key === siteId);
    const stopping = [...this.#started].filter((p) => p.siteId === siteId);
    for (const process of stopping) process.kill('disposed');
    await Promise.all(stopping.map((p) => p.exited));
  }

  async close(): Promise<void> {
    await this.#pool.close();
    for (const process of this.#started) process.kill('disposed');
    await Promise.all([...this.#started].map((p) => p.exited));
  }

  /** Sends `request` (null: only open the database) to the site's process and unwraps the result. */
  async #call(
    siteId: string,
    request: DbRequest | null,
    timeoutMs = this.#options.statementTimeoutMs,
    onChunk?: (chunk: Buffer) => void,
  ): Promise<unknown> {
    const observe = this.#options.onStatement;
    if (!observe || !request || (request.op !== 'run' && request.op !== 'batch'))
      return this.#send(siteId, request, timeoutMs, onChunk);
    const started = performance.now();
    let ok = false;
    try {
      const value = await this.#send(siteId, request, timeoutMs, onChunk);
      ok = true;
      return value;
    } finally {
      observe(request.access, ok, (performance.now() - started) / 1000);
    }
  }

  async #send(
    siteId: string,
    request: DbRequest | null,
    timeoutMs: number,
    onChunk?: (chunk: Buffer) => void,
  ): Promise<unknown> {
    for (;;) {
      while (this.#paused.has(siteId)) await this.#paused.get(siteId);
      if (this.#fenced) throw fencedOff();
      if (this.#movedAway.has(siteId)) throw movedAway();
      const frozen = this.#frozen.get(siteId);
      if (frozen && request?.op === 'migrate') {
        await frozen;
        continue;
      }
      // While the file is copied, statements run read-only; one that turns out to write waits.
      const sent =
        frozen && (request?.op === 'run' || request?.op === 'batch') ? { ...request, readOnly: true } : request;
      try {
        return await this.#counted(siteId, () => this.#sendNow(siteId, sent, timeoutMs, onChunk));
      } catch (err) {
        // Moved while it was in flight: its process was stopped as the file was removed. Sent while
        // writes were paused, it changed nothing, so it may be sent where the database is now.
        if (frozen && this.#movedAway.has(siteId)) throw movedAway();
        if (!(frozen && err instanceof StatementError && err.reason === 'read_only')) throw err;
        await frozen;
      }
    }
  }

  /** Runs `work` as one of the site's calls in flight, which compaction and freezing wait for. */
  async #counted<T>(siteId: string, work: () => Promise<T>): Promise<T> {
    this.#inflight.set(siteId, (this.#inflight.get(siteId) ?? 0) + 1);
    try {
      return await work();
    } finally {
      const left = this.#inflight.get(siteId)! - 1;
      if (left > 0) {
        this.#inflight.set(siteId, left);
      } else {
        this.#inflight.delete(siteId);
        this.#drained.get(siteId)?.();
        this.#drained.delete(siteId);
      }
    }
  }

  async #sendNow(
    siteId: string,
    request: DbRequest | null,
    timeoutMs: number,
    onChunk?: (chunk: Buffer) => void,
  ): Promise<unknown> {
    const process = await this.#acquire(siteId);
    try {
      if (!request) return null;
      const result = await process.call(request, timeoutMs, onChunk);
      if (!result.ok) throw new StatementError(result.error.reason, result.error.message);
      return result.value;
    } catch (err) {
      if (!(err instanceof DatabaseProcessError)) throw err;
      if (err.reason === 'timeout') throw timedOut(timeoutMs);
      throw new StatementError('unavailable', err.message);
    } finally {
      this.#pool.release(process);
    }
  }

  /** The site's process, started if needed; the caller must release it. */
  async #acquire(siteId: string): Promise<SiteProcess> {
    try {
      return await this.#pool.acquire(siteId);
    } catch (err) {
      if (err instanceof PoolFullError)
        throw new StatementError('busy', 'every database process is busy; try again shortly');
      throw err;
    }
  }

  async openChannel(
    siteId: string,
    link: string,
    token: string,
    onCalls: (calls: Record<string, number>) => void,
  ): Promise<boolean> {
    if (!this.#options.channelDir || !TOKEN.test(token) || !this.#normal(siteId)) return false;
    this.#onCalls.set(siteId, onCalls);
    const opening = { siteId, closed: false };
    this.#opening.add(opening);
    const timeoutMs = this.#options.statementTimeoutMs;
    // Counted as a call in flight, so a pause that begins meanwhile closes this channel too.
    return this.#counted(siteId, async () => {
      const process = await this.#acquire(siteId);
      try {
        if (!process.channelPath) return false;
        const connected = await this.#linked(process, link, () => process.call({ op: 'connect', token }, timeoutMs));
        if (!connected.ok || !process.alive) return false;
        this.#tokens.set(token, process);
        if (this.#tokens.size > (this.#options.maxChannelTokens ?? MAX_TOKENS))
          this.#tokens.delete(this.#tokens.keys().next().value!);
        this.#ping(process);
        if (opening.closed || !this.#normal(siteId)) {
          // Channels were closed while this one opened: it closes too.
          await process.call({ op: 'close-channels' }, timeoutMs).catch(() => {});
          return false;
        }
        return true;
      } catch (err) {
        if (err instanceof DatabaseProcessError || (err as NodeJS.ErrnoException).code) return false;
        throw err;
      } finally {
        this.#pool.release(process);
      }
    })
      .catch((err: unknown) => {
        // No process to be had (none free, or no database): the calls come through the host, which says so.
        if (err instanceof StatementError) return false;
        throw err;
      })
      .finally(() => this.#opening.delete(opening));
  }

  /**
   * Runs `work` (a connect) with the process's one channel path linked to the worker's socket `target`:
   * one at a time per process, the link replaced in one step.
   */
  #linked<T>(process: SiteProcess, target: string, work: () => Promise<T>): Promise<T> {
    const path = process.channelPath!;
    const run = (this.#connecting.get(process) ?? Promise.resolve())
      .catch(() => {})
      .then(async () => {
        const temporary = `${path}.tmp`;
        await fsp.rm(temporary, { force: true });
        await fsp.symlink(target, temporary);
        await fsp.rename(temporary, path);
        return work();
      });
    this.#connecting.set(process, run);
    return run;
  }

  /** Nothing keeps the site's database from its workers' channels: no pause, copy, move or fence. */
  #normal(siteId: string): boolean {
    return !this.#fenced && !this.#paused.has(siteId) && !this.#frozen.has(siteId) && !this.#movedAway.has(siteId);
  }

  async channelLost(siteId: string, token: string): Promise<StatementError> {
    const process = this.#tokens.get(token);
    if (!process || process.siteId !== siteId)
      return new StatementError('unavailable', 'the channel to the database closed');
    // The worker may hear its channel close before the host hears the process end.
    const reason =
      process.stopReason ??
      (await Promise.race([
        process.exited,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000)),
      ]));
    if (reason === 'timeout') return timedOut(this.#options.statementTimeoutMs);
    return new StatementError(
      'unavailable',
      reason ? new DatabaseProcessError(reason).message : 'the channel to the database closed',
    );
  }

  async closeChannels(siteId?: string): Promise<void> {
    const closes = (site: string) => siteId === undefined || site === siteId;
    const closing = [...this.#channelled.keys()].filter((process) => closes(process.siteId));
    for (const opening of this.#opening) if (closes(opening.siteId)) opening.closed = true;
    await Promise.all(
      closing.map(async (process) => {
        this.#unchannel(process);
        // Answered once no channel statement runs; a process that stops meanwhile has closed them too.
        await process.call({ op: 'close-channels' }, this.#options.statementTimeoutMs).catch(() => {});
      }),
    );
  }

  /**
   * While a process has channels it is pinged every PING_MS, which brings what they did (Stats) and
   * times their statements: a ping not answered within the statement time limit stops the process as
   * a statement past its limit, as one sent through the host is.
   */
  #ping(process: SiteProcess): void {
    if (this.#channelled.has(process)) return;
    let pinging = false;
    const timer = setInterval(() => {
      if (pinging || !process.alive) return;
      pinging = true;
      process
        .call({ op: 'ping' }, this.#options.statementTimeoutMs)
        .catch(() => {})
        .finally(() => (pinging = false));
    }, PING_MS);
    timer.unref();
    this.#channelled.set(process, timer);
  }

  get channelCalls(): number {
    return this.#channelCalls;
  }

  /** Channel tokens kept, so a worker whose channel broke can learn why (at most maxChannelTokens). */
  get channelTokens(): number {
    return this.#tokens.size;
  }

  #unchannel(process: SiteProcess): void {
    clearInterval(this.#channelled.get(process));
    this.#channelled.delete(process);
    if (process.alive) return;
    setTimeout(() => {
      for (const [token, owner] of this.#tokens) if (owner === process) this.#tokens.delete(token);
    }, TOKENS_KEPT_MS).unref();
  }

  /** What a process's channels did, heard as the host hears its own calls. */
  #channelStats(siteId: string, stats: ChannelStats): void {
    const observe = this.#options.onStatement;
    if (observe) for (const [ok, seconds] of stats.statements) observe('function', ok, seconds);
    if (stats.firstWriteAt !== null) this.#options.replicas?.replicator.wrote(siteId, stats.firstWriteAt);
    this.#onCalls.get(siteId)?.(stats.calls);
    for (const count of Object.values(stats.calls)) this.#channelCalls += count;
    // The channels' calls are the process's use: it is not stopped as idle while they come.
    const live = this.#pool.live(siteId);
    if (live) this.#pool.release(live);
  }
}

/** A restore refused: the moment asked for is outside what the replica holds (`range`, null: nothing yet). */
const refusedOutside = (range: RestoreRange | null): Restore => ({
  restored: false,
  earliest: range?.earliest.toISOString() ?? null,
  latest: range?.latest.toISOString() ?? null,
});
