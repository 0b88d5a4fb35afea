// Copies of site databases in the object store, so that a database survives the loss of the node that
// holds it: `berth admin recover-database` brings it back on another node from its latest copy. Every
// database node copies the databases it holds that changed since their last copy, every
// BERTH_DATABASE_COPY_MS, one at a time; a move copies the file it moved. A copy is a consistent
// snapshot taken by SQLite (VACUUM INTO, on a thread of its own: ../sqlite-copy.ts) while the
// database goes on serving, and replaces the site's previous copy whole. The metadata
// records when each copy was taken (`database_copies`), which is how old a recovery would be.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from '../../log.ts';
import type { BlobStore } from '../../../storage/blob-store.ts';
import { copySqlite } from '../sqlite-copy.ts';
import { logJobFailure } from '../../db/errors.ts';

export interface DatabaseCopierOptions {
  db: Knex;
  nodeId: string;
  blobs: BlobStore;
  dataDir: string;
  /** Where snapshots are made before they are stored: a folder whose name ends in `.tmp`, which a start sweeps. */
  tmpDir: string;
  log: Logger;
}

/** The last time the database's file or its write-ahead log was written. */
function lastWritten(dir: string): number {
  return Math.max(
    ...['db.sqlite', 'db.sqlite-wal'].map((name) => {
      try {
        return fs.statSync(path.join(dir, name)).mtimeMs;
      } catch {
        return 0;
      }
    }),
  );
}

export class DatabaseCopier {
  readonly #options: DatabaseCopierOptions;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(options: DatabaseCopierOptions) {
    this.#options = options;
  }

  start(intervalMs: number): void {
    this.#timer = setInterval(() => {
      this.#round = this.#round
        .then(async () => void (await this.copyChanged()))
        .catch((err) => logJobFailure(this.#options.log, err, 'copying site databases to the object store failed'));
    }, intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#round;
  }

  /** Copies each database this node holds that was written since its last copy; returns how many it copied. */
  async copyChanged(): Promise<number> {
    const { db, nodeId, dataDir } = this.#options;
    const rows = (await db('databases')
      .leftJoin('database_copies', 'database_copies.site_id', 'databases.site_id')
      .where({ 'databases.node_id': nodeId, 'databases.status': 'READY' })
      .orderBy('databases.site_id')
      .select('databases.site_id as site_id', 'database_copies.copied_at as copied_at')) as Array<{
      site_id: string;
      copied_at: string | null;
    }>;
    let copied = 0;
    for (const row of rows) {
      if (this.#stopped) break;
      const dir = path.join(dataDir, 'sites', row.site_id);
      const written = lastWritten(dir);
      if (written === 0 || (row.copied_at !== null && written < Date.parse(row.copied_at))) continue;
      try {
        await this.copy(row.site_id);
        copied++;
      } catch (err) {
        logJobFailure(this.#options.log, err, 'a site database could not be copied to the object store', {
          siteId: row.site_id,
        });
      }
    }
    return copied;
  }

  /** Takes a snapshot of the site's database as it is now and stores it as its latest copy. */
  async copy(siteId: string): Promise<void> {
    const { tmpDir, dataDir } = this.#options;
    await fsp.mkdir(tmpDir, { recursive: true, mode: 0o700 });
    const snapshot = path.join(tmpDir, `copy-${crypto.randomUUID()}.sqlite.tmp`);
    try {
      const takenAt = new Date();
      await copySqlite(path.join(dataDir, 'sites', siteId, 'db.sqlite'), snapshot);
      await this.#store(siteId, snapshot, takenAt);
    } finally {
      await fsp.rm(snapshot, { force: true });
    }
  }

  /** Stores a file that is already a whole, unchanging database (one just moved) as the site's latest copy. */
  async copyFile(siteId: string, file: string): Promise<void> {
    await this.#store(siteId, file, new Date());
  }

  async #store(siteId: string, file: string, takenAt: Date): Promise<void> {
    const bytes = await this.#options.blobs.putDatabaseCopy(siteId, file);
    const copiedAt = takenAt.toISOString();
    // Recorded only if no later copy was recorded meanwhile (by the node the database moved to).
    await this.#options
      .db('database_copies')
      .insert({ site_id: siteId, copied_at: copiedAt, bytes })
      .onConflict('site_id')
      .merge()
      .where('database_copies.copied_at', '<', copiedAt);
  }
}
