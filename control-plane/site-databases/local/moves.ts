// A database's hand-over between nodes, this node's side of it: its writes paused while its file is
// copied out (freeze, then thaw as moved or kept), and a copy arriving here checked whole and put in
// the site's place, or dropped.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { syncPath } from '../../../storage/durable.ts';
import { DatabaseProcessError } from '../database-process.ts';
import type { Census } from '../protocol.ts';
import { type FrozenDatabase, StatementError } from '../provider.ts';
import { DUMP_TIMEOUT_MS, type SiteCalls, movedAway } from './calls.ts';
import type { SiteDatabaseOptions } from './options.ts';
import type { SiteProcesses } from './site-processes.ts';

export class DatabaseMoves {
  readonly #options: SiteDatabaseOptions;
  readonly #processes: SiteProcesses;
  readonly #calls: SiteCalls;

  constructor(options: SiteDatabaseOptions, processes: SiteProcesses, calls: SiteCalls) {
    this.#options = options;
    this.#processes = processes;
    this.#calls = calls;
  }

  /**
   * Pauses the database's writes so its file can be copied to another node: the calls in flight are
   * answered first, the write-ahead log is moved into the file, and from then on statements run with
   * SQLite refusing writes (query_only). Reads are served throughout; a write, a migration or a
   * compaction waits for thaw() and then runs here, or learns that the database moved.
   */
  async freeze(siteId: string): Promise<FrozenDatabase> {
    const calls = this.#calls;
    const file = this.#processes.fileOf(siteId);
    if (calls.movedAway.has(siteId)) throw movedAway();
    if (!fs.existsSync(file)) throw new StatementError('unavailable', 'the site has no database');
    if (calls.frozen.has(siteId)) throw new StatementError('busy', 'the database is already being copied');
    let thawed!: (outcome: 'moved' | 'kept') => void;
    await calls.betweenCalls(siteId, async () => {
      // The engine ships the last writes and lets go, so the checkpoint can empty the log; the node
      // that takes the copy replicates it from there.
      await this.#options.replicas?.replicator.unwatch(siteId);
      await calls.sendNow(siteId, { op: 'checkpoint' }, this.#options.statementTimeoutMs);
      calls.frozen.set(siteId, new Promise((resolve) => (thawed = resolve)));
    });
    return {
      file,
      census: async () => (await calls.call(siteId, { op: 'census' }, DUMP_TIMEOUT_MS)) as Census,
      thaw: async (outcome) => {
        // Marked moved before the waiting calls wake, so none of them writes to this file.
        if (outcome === 'moved') calls.movedAway.add(siteId);
        calls.frozen.delete(siteId);
        thawed(outcome);
        if (outcome !== 'moved') {
          if (this.#processes.live(siteId)) await this.#options.replicas?.replicator.watch(siteId, file);
          return;
        }
        await this.#processes.stop(siteId);
        await fsp.rm(this.#processes.dir(siteId), { recursive: true, force: true });
      },
    };
  }

  /**
   * A folder for a copy of a site's database arriving from another node: the file goes in it as
   * `db.sqlite`, then install() puts it in place, or discardIncoming() removes it. Its name ends in
   * `.tmp`, so a start sweeps one a killed server left.
   */
  async incoming(siteId: string): Promise<string> {
    const dir = `${this.#processes.dir(siteId)}.${crypto.randomUUID()}.incoming.tmp`;
    await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  async discardIncoming(dir: string): Promise<void> {
    if (!dir.startsWith(this.#processes.root + path.sep) || !dir.endsWith('.incoming.tmp'))
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
    const check = await this.#processes.startApart(dir).catch((err: Error) => {
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
    await this.#processes.stop(siteId);
    await fsp.rm(this.#processes.dir(siteId), { recursive: true, force: true });
    await fsp.rename(dir, this.#processes.dir(siteId));
    await syncPath(this.#processes.root);
    this.#calls.movedAway.delete(siteId);
    return census;
  }

  /**
   * Removes this node's file of the database and nothing else: a copy that did not become the
   * database (a move or a recovery that failed). Its replica belongs to the database, wherever it is.
   */
  async dropCopy(siteId: string): Promise<void> {
    await this.#options.replicas?.replicator.unwatch(siteId);
    await this.#processes.stop(siteId);
    await fsp.rm(this.#processes.dir(siteId), { recursive: true, force: true });
  }
}
