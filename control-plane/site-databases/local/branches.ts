// The branches of this node's site databases: a preview's copy of its site's database (branch-names.ts),
// made from the database's replica as it was at a moment, or copied from the database as it is now,
// checked as an arriving copy is and put in place in one rename; dropped with its folder.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { syncPath } from '../../../storage/durable.ts';
import { branchName, parseDatabaseName } from '../branch-names.ts';
import { type BranchMade, StatementError } from '../provider.ts';
import { OutsideRestoreRange } from '../replication/site-replicas.ts';
import { copySqlite } from '../sqlite-copy.ts';
import type { SiteDatabaseOptions } from './options.ts';
import type { SiteProcesses } from './site-processes.ts';

/**
 * A moment this recent, when a copy of now will do, is copied from the database itself: the replicator
 * hears of the writes workers make on their lines up to a second late, so the replica may seem to hold
 * a moment it has not all the writes of yet.
 */
const RECENT_MS = 10_000;

/** A moment is named to the second, as restores are. */
const floorSecond = (date: Date): string => new Date(Math.floor(date.getTime() / 1000) * 1000).toISOString();

export class Branches {
  readonly #options: SiteDatabaseOptions;
  readonly #processes: SiteProcesses;
  /** Branches being made here, so two asks for one make it once. */
  readonly #making = new Map<string, Promise<BranchMade>>();

  constructor(options: SiteDatabaseOptions, processes: SiteProcesses) {
    this.#options = options;
    this.#processes = processes;
  }

  make(name: string, at: Date, orNow: boolean): Promise<BranchMade> {
    const making = this.#making.get(name);
    if (making !== undefined) return making;
    const run = this.#make(name, at, orNow).finally(() => this.#making.delete(name));
    this.#making.set(name, run);
    return run;
  }

  async #make(name: string, at: Date, orNow: boolean): Promise<BranchMade> {
    const { siteId, branch } = parseDatabaseName(name);
    if (branch === null) throw new Error(`not a branch: ${name}`);
    if (!fs.existsSync(this.#processes.fileOf(siteId)))
      throw new StatementError('unavailable', 'the site has no database');
    await fsp.mkdir(this.#processes.branchRoot, { recursive: true, mode: 0o700 });
    const dir = `${this.#processes.dir(name)}.${crypto.randomUUID()}.incoming.tmp`;
    await fsp.mkdir(dir, { mode: 0o700 });
    try {
      const file = path.join(dir, 'db.sqlite');
      const made = (await this.#fromHistory(siteId, at, file, orNow)) ?? (await this.#fromNow(siteId, file));
      await this.drop(name);
      await fsp.rename(dir, this.#processes.dir(name));
      await syncPath(this.#processes.branchRoot);
      return { ...made, bytes: (await fsp.stat(this.#processes.fileOf(name))).size };
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * The database as it was at `at`, from its replica, when the replica holds that moment; null when it
   * does not and a copy of now will do (`orNow`).
   */
  async #fromHistory(
    siteId: string,
    at: Date,
    file: string,
    orNow: boolean,
  ): Promise<Omit<BranchMade, 'bytes'> | null> {
    const replicas = this.#options.replicas;
    if (orNow && at.getTime() > Date.now() - RECENT_MS) return null;
    if (!replicas) {
      if (orNow) return null;
      throw new StatementError(
        'unavailable',
        'the database keeps no history on this node (BERTH_DATABASE_REPLICATION), so it cannot be branched as it was at a past moment',
      );
    }
    try {
      // Everything written before the replica's latest moment is in it: the database itself is not disturbed.
      await replicas.restoreTo(siteId, at, file);
      return { from: 'history', asOf: floorSecond(at) };
    } catch (err) {
      if (!(err instanceof OutsideRestoreRange)) throw err;
      if (orNow) return null;
      throw new StatementError('unavailable', err.message);
    }
  }

  /** A copy of the database as it is now, read in one transaction beside its calls. */
  async #fromNow(siteId: string, file: string): Promise<Omit<BranchMade, 'bytes'>> {
    const asOf = new Date().toISOString();
    await copySqlite(this.#processes.fileOf(siteId), file).catch((err: Error) => {
      throw new StatementError('unavailable', `the database could not be copied: ${err.message}`);
    });
    return { from: 'copy', asOf };
  }

  /** Stops the branch's process and removes its folder; nothing when it has none here. */
  async drop(name: string): Promise<void> {
    await this.#processes.stop(name);
    await fsp.rm(this.#processes.dir(name), { recursive: true, force: true });
  }

  /** Drops every branch of the site here (its database is removed, or now lives on another node). */
  async dropAllOf(siteId: string): Promise<void> {
    for (const name of await this.here()) if (parseDatabaseName(name).siteId === siteId) await this.drop(name);
  }

  /** Removes the folders of makes a stopped server left half done. */
  async dropLeftovers(): Promise<void> {
    const entries = await fsp.readdir(this.#processes.branchRoot).catch(() => [] as string[]);
    for (const entry of entries)
      if (entry.endsWith('.incoming.tmp') && !this.#making.has(entry.slice(0, entry.indexOf('.', 37))))
        await fsp.rm(path.join(this.#processes.branchRoot, entry), { recursive: true, force: true });
  }

  /** The names of the branches this node has. */
  async here(): Promise<string[]> {
    const entries = await fsp.readdir(this.#processes.branchRoot).catch(() => [] as string[]);
    return entries.filter((entry) => {
      try {
        const { siteId, branch } = parseDatabaseName(entry);
        return branch !== null && branchName(siteId, branch) === entry;
      } catch {
        return false;
      }
    });
  }
}
