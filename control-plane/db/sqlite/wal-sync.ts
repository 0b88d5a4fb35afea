// Group commit for the metadata database. In WAL mode a transaction is durable once its frames in the
// -wal file are on disk. With synchronous=FULL, SQLite fsyncs that file inside COMMIT, on the calling
// thread: with better-sqlite3 that is the event loop, once per write. A hot write instead commits with
// synchronous=NORMAL (the frames are written, not yet synced; a crash cannot corrupt the database, it
// can only lose the newest commits) and then waits here for an fdatasync of the -wal file on libuv's
// threadpool before it answers. Writers that commit while a sync is running share the next one.
import fs from 'node:fs';
import { promisify } from 'node:util';

const fdatasync = promisify(fs.fdatasync);

export class WalSync {
  readonly #walPath: string;
  #fd: number | undefined;
  #running: Promise<void> | undefined;
  #next: Promise<void> | undefined;

  constructor(databasePath: string) {
    this.#walPath = `${databasePath}-wal`;
  }

  /** Resolves once everything committed before the call is on disk. */
  durable(): Promise<void> {
    if (!this.#running) {
      this.#running = this.#sync().finally(() => {
        this.#running = undefined;
      });
      return this.#running;
    }
    // The running sync may have started before this caller's commit: it needs the next one, whether
    // the running one succeeds or fails.
    this.#next ??= this.#running
      .catch(() => {})
      .then(() => {
        this.#next = undefined;
        return this.durable();
      });
    return this.#next;
  }

  async #sync(): Promise<void> {
    await fdatasync(this.#walFd());
  }

  /** The -wal file, opened once; opened again should SQLite ever have replaced it. */
  #walFd(): number {
    if (this.#fd !== undefined && fs.fstatSync(this.#fd).nlink > 0) return this.#fd;
    if (this.#fd !== undefined) fs.closeSync(this.#fd);
    this.#fd = fs.openSync(this.#walPath, 'r');
    return this.#fd;
  }

  close(): void {
    if (this.#fd !== undefined) fs.closeSync(this.#fd);
    this.#fd = undefined;
  }
}
