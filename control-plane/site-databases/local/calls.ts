// The local provider's calls as the host runs them: each waits out a pause of its site, is refused
// while the node is fenced or once the database has moved, runs read-only while the file is copied, is
// counted in flight, and its process's answer becomes a result or a StatementError. Work that needs
// the database to itself (a compaction, a restore, a copy) runs between calls.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { DatabaseProcessError } from '../database-process.ts';
import type { Compaction, DbRequest, RowValue, Statement, StatementOutcome, Access } from '../protocol.ts';
import { type RunOptions, StatementError, type StatementResult } from '../provider.ts';
import { compactSqlite } from '../sqlite-compact.ts';
import type { SiteDatabaseOptions } from './options.ts';
import type { SiteProcesses } from './site-processes.ts';

/** Migrations may rebuild large tables and dumps read everything: both get more time than a statement. */
const MIGRATION_TIMEOUT_MS = 5 * 60_000;
export const DUMP_TIMEOUT_MS = 10 * 60_000;

export const timedOut = (timeoutMs: number) =>
  new StatementError(
    'timeout',
    `the statement ran longer than ${timeoutMs} ms and was stopped; nothing it wrote was kept`,
  );

const fencedOff = () =>
  new StatementError(
    'unavailable',
    'the node that holds the database lost touch with the metadata: it serves it again once it is back',
  );

export const movedAway = () => new StatementError('moved', 'the site\u2019s database was moved to another node');

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

export class SiteCalls {
  readonly #options: SiteDatabaseOptions;
  readonly #processes: SiteProcesses;
  /** Closes a site's lines, once its calls in flight are answered (worker-lines.ts). */
  readonly #closeLines: (siteId: string) => Promise<void>;
  /** Calls sent and not yet answered, per site, and who waits for a site's to be answered. */
  readonly #inflight = new Map<string, number>();
  readonly #drained = new Map<string, () => void>();
  /** Sites being compacted: their new calls wait for this. */
  readonly #paused = new Map<string, Promise<void>>();
  /** Sites whose writes are paused while their file is copied, and what they wait for (moves.ts). */
  readonly frozen = new Map<string, Promise<'moved' | 'kept'>>();
  /** Sites whose database was moved to another node: a call that still arrives here is told so. */
  readonly movedAway = new Set<string>();
  /** Fenced (cluster/fence.ts): this node lost touch with the metadata, and serves none of its databases. */
  fenced = false;

  constructor(options: SiteDatabaseOptions, processes: SiteProcesses, closeLines: (siteId: string) => Promise<void>) {
    this.#options = options;
    this.#processes = processes;
    this.#closeLines = closeLines;
  }

  async create(siteId: string): Promise<void> {
    this.movedAway.delete(siteId);
    await fsp.mkdir(this.#processes.dir(siteId), { recursive: true, mode: 0o700 });
    await this.call(siteId, null);
  }

  async run(siteId: string, statement: Statement, access: Access, options: RunOptions = {}): Promise<StatementResult> {
    const sentAt = Date.now();
    const request: DbRequest = { op: 'run', access, statement, ...(options.readsOnly ? { readsOnly: true } : {}) };
    const result = revive((await this.call(siteId, request)) as StatementOutcome);
    if (result.changes > 0) this.#options.replicas?.replicator.wrote(siteId, sentAt);
    return result;
  }

  async batch(siteId: string, statements: Statement[], access: Access): Promise<StatementResult[]> {
    const sentAt = Date.now();
    const results = ((await this.call(siteId, { op: 'batch', access, statements })) as StatementOutcome[]).map(revive);
    if (results.some((result) => result.changes > 0)) this.#options.replicas?.replicator.wrote(siteId, sentAt);
    return results;
  }

  async migrate(siteId: string, sql: string, receipt: Statement): Promise<void> {
    const sentAt = Date.now();
    await this.call(siteId, { op: 'migrate', sql, receipt }, MIGRATION_TIMEOUT_MS);
    this.#options.replicas?.replicator.wrote(siteId, sentAt);
  }

  async dump(siteId: string, file: string): Promise<number> {
    const handle = await fsp.open(file, 'w', 0o600);
    try {
      let writing = Promise.resolve();
      const { bytes } = (await this.call(siteId, { op: 'dump' }, DUMP_TIMEOUT_MS, (chunk) => {
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
    return this.exclusively(siteId, async (file) => {
      // The engine follows the log a checkpoint truncates: it lets go first, and follows the compacted
      // file from the next process on.
      await this.#options.replicas?.replicator.unwatch(siteId);
      const compaction = await compactSqlite(file, this.#processes.dir(siteId)).catch((err: Error) => {
        throw new StatementError('unavailable', `the database could not be compacted: ${err.message}`);
      });
      // A connection opened before keeps what it read of the file's header (auto-vacuum among it).
      await this.#processes.stop(siteId);
      return compaction;
    });
  }

  /** Sends `request` (null: only open the database) to the site's process and unwraps the result. */
  async call(
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
      if (this.fenced) throw fencedOff();
      if (this.movedAway.has(siteId)) throw movedAway();
      const frozen = this.frozen.get(siteId);
      if (frozen && request?.op === 'migrate') {
        await frozen;
        continue;
      }
      // While the file is copied, statements run read-only; one that turns out to write waits.
      const sent =
        frozen && (request?.op === 'run' || request?.op === 'batch') ? { ...request, readOnly: true } : request;
      try {
        return await this.counted(siteId, () => this.sendNow(siteId, sent, timeoutMs, onChunk));
      } catch (err) {
        // Moved while it was in flight: its process was stopped as the file was removed. Sent while
        // writes were paused, it changed nothing, so it may be sent where the database is now.
        if (frozen && this.movedAway.has(siteId)) throw movedAway();
        if (!(frozen && err instanceof StatementError && err.reason === 'read_only')) throw err;
        await frozen;
      }
    }
  }

  /** Runs `work` as one of the site's calls in flight, which compaction and freezing wait for. */
  async counted<T>(siteId: string, work: () => Promise<T>): Promise<T> {
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

  /** Sends `request` to the site's process now, past every pause and uncounted. */
  async sendNow(
    siteId: string,
    request: DbRequest | null,
    timeoutMs: number,
    onChunk?: (chunk: Buffer) => void,
  ): Promise<unknown> {
    const process = await this.#processes.acquire(siteId);
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
      this.#processes.release(process);
    }
  }

  /**
   * Runs `work` on the database between calls: new calls of the site wait until it is done, and it
   * starts once the site's calls in flight are answered.
   */
  async exclusively<T>(siteId: string, work: (file: string) => Promise<T>): Promise<T> {
    if (this.fenced) throw fencedOff();
    const file = this.#processes.fileOf(siteId);
    if (!fs.existsSync(file)) throw new StatementError('unavailable', 'the site has no database');
    while (this.frozen.has(siteId)) await this.frozen.get(siteId);
    if (this.movedAway.has(siteId)) throw movedAway();
    return this.betweenCalls(siteId, () => work(file));
  }

  /**
   * Pauses the site's calls (new ones wait), waits for those in flight and closes its lines, runs
   * `work`, and lets the calls go on.
   */
  async betweenCalls<T>(siteId: string, work: () => Promise<T>): Promise<T> {
    while (this.#paused.has(siteId)) await this.#paused.get(siteId);
    let resume!: () => void;
    this.#paused.set(siteId, new Promise<void>((resolve) => (resume = resolve)));
    try {
      await this.#drain(siteId);
      return await work();
    } finally {
      this.#paused.delete(siteId);
      resume();
    }
  }

  /**
   * Waits until the site's calls in flight are answered, then closes its lines: the process answers
   * that once no line statement runs, and no line is given while the site is paused.
   */
  async #drain(siteId: string): Promise<void> {
    while ((this.#inflight.get(siteId) ?? 0) > 0)
      await new Promise<void>((resolve) => this.#drained.set(siteId, resolve));
    await this.#closeLines(siteId);
  }

  /** Nothing keeps the site's database from its workers' lines: no pause, copy, move or fence. */
  normal(siteId: string): boolean {
    return !this.fenced && !this.#paused.has(siteId) && !this.frozen.has(siteId) && !this.movedAway.has(siteId);
  }
}
