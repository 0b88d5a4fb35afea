// The blob driver on a local directory, the embedded default. A write goes to a temp file, is fsynced,
// renamed into place and its folder fsynced (a folder made for it is synced into the one above): a
// reader sees a whole object or none, and after a crash what was answered as written is there. An
// object's age is its file's mtime. Small objects are written by writer threads, one job each
// (blob-writer.ts).
//
// Key folders are folders of the root unless `folders` keeps them elsewhere (the root itself, or
// another path). Temp files are in `<root>/.tmp`, which init empties: nothing of a killed write
// survives a start. A folder outside the root may be on another file system, so its writes are made
// beside it instead (`.<uuid>.tmp`, removed by init too).
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  assertFolder,
  type BlobDriver,
  type ByteRange,
  type DeleteConditions,
  isKeyName,
  type ListedObject,
  ObjectNotFoundError,
  type ObjectStat,
  type PutOptions,
  splitKey,
} from '../blob-driver.ts';
import { BlobWriter } from '../blob-writer.ts';
import { errnoCode, syncPath } from '../durable.ts';

export interface LocalDriverOptions {
  /** The driver's folder: key folders are its subfolders, and writes in progress are in its `.tmp`. */
  root: string;
  /** Key folders kept in a folder of their own: the root itself, or a path outside it. */
  folders?: Record<string, string>;
  /**
   * Key folders fanned out into subfolders named after the first two characters of each name, so that
   * no folder holds millions of entries. A fanned-out folder takes every short subfolder as its own.
   */
  fanOut?: string[];
}

const isInside = (child: string, parent: string): boolean => {
  const relative = path.relative(parent, child);
  return !relative.startsWith('..') && !path.isAbsolute(relative);
};

export class LocalDriver implements BlobDriver {
  readonly #root: string;
  readonly #tmp: string;
  readonly #folders: Map<string, string>;
  readonly #fanOut: Set<string>;
  /** Folders outside the root: their temp files are made in them. */
  readonly #elsewhere: Set<string>;
  /** Folders known to exist; nothing removes them. */
  readonly #made = new Set<string>();
  readonly #writer = new BlobWriter(2);
  readonly requests = 0;

  constructor(options: LocalDriverOptions) {
    this.#root = path.resolve(options.root);
    this.#tmp = path.join(this.#root, '.tmp');
    this.#folders = new Map(Object.entries(options.folders ?? {}).map(([folder, dir]) => [folder, path.resolve(dir)]));
    this.#fanOut = new Set(options.fanOut ?? []);
    this.#elsewhere = new Set([...this.#folders.values()].filter((dir) => !isInside(dir, this.#root)));
  }

  get location(): string {
    return `the blob directory ${this.#root}`;
  }

  #dirOf(folder: string): string {
    return this.#folders.get(folder) ?? path.join(this.#root, folder);
  }

  #locate(key: string): { folder: string; file: string } {
    const { folder, name } = splitKey(key);
    const dir = this.#dirOf(folder);
    return { folder, file: this.#fanOut.has(folder) ? path.join(dir, name.slice(0, 2), name) : path.join(dir, name) };
  }

  #pathOf(key: string): string {
    return this.#locate(key).file;
  }

  /** A new temp file's path for a write into `folder`, on that folder's file system. */
  #tempFor(folder: string): string {
    const dir = this.#dirOf(folder);
    return this.#elsewhere.has(dir)
      ? path.join(dir, `.${crypto.randomUUID()}.tmp`)
      : path.join(this.#tmp, crypto.randomUUID());
  }

  /** Creates the folders and removes what writes killed with a previous process left. */
  async init(): Promise<void> {
    await fsp.mkdir(this.#root, { recursive: true, mode: 0o700 });
    await fsp.rm(this.#tmp, { recursive: true, force: true });
    await fsp.mkdir(this.#tmp, { recursive: true, mode: 0o700 });
    for (const dir of this.#elsewhere) {
      for (const name of await fsp.readdir(dir).catch(() => [])) {
        if (name.startsWith('.') && name.endsWith('.tmp')) await fsp.rm(path.join(dir, name), { force: true });
      }
    }
  }

  /** Whether a write can be made now: the temp folder accepts a file. */
  async writable(): Promise<void> {
    const probe = path.join(this.#tmp, `ready-${crypto.randomUUID()}`);
    await fsp.writeFile(probe, '', { mode: 0o600 });
    await fsp.rm(probe, { force: true });
  }

  /** Checked on the spot, without a trip to the threadpool: a commit asks it while it holds the write lock. */
  async exists(key: string): Promise<boolean> {
    return fs.existsSync(this.#pathOf(key));
  }

  async stat(key: string): Promise<ObjectStat | null> {
    try {
      const stat = await fsp.stat(this.#pathOf(key));
      return { bytes: stat.size, modifiedMs: stat.mtimeMs };
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return null;
      throw err;
    }
  }

  get(key: string): Promise<Readable> {
    return this.#open(key, {});
  }

  getRange(key: string, range: ByteRange): Promise<Readable> {
    return this.#open(key, range);
  }

  /** Opened before it is returned, so a missing object fails here rather than mid-response. */
  async #open(key: string, range: { start?: number; end?: number }): Promise<Readable> {
    try {
      const handle = await fsp.open(this.#pathOf(key), 'r');
      return handle.createReadStream(range);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async getBytes(key: string): Promise<Buffer> {
    try {
      return await fsp.readFile(this.#pathOf(key));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  /** Written whole by a writer thread; an immutable object that is there already is only touched. */
  async put(key: string, bytes: Uint8Array, options: PutOptions = {}): Promise<void> {
    const { folder, file } = this.#locate(key);
    if (options.immutable && (await this.#touchFile(file))) return;
    await this.#writer.write({
      data: bytes,
      tmp: this.#tempFor(folder),
      final: file,
      keepExisting: options.immutable === true,
    });
  }

  async putStream(
    key: string | (() => string),
    source: AsyncIterable<Uint8Array>,
    options: PutOptions = {},
  ): Promise<void> {
    const known = typeof key === 'string' ? this.#locate(key) : undefined;
    // A key known only at the end is written in the temp folder and moved across file systems if it must.
    const tmp = known ? this.#tempFor(known.folder) : path.join(this.#tmp, crypto.randomUUID());
    if (known) await this.#makeFolder(path.dirname(known.file));
    const handle = await fsp.open(tmp, 'wx', 0o600);
    let closed = false;
    let placed = false;
    try {
      for await (const chunk of source) await handle.write(chunk);
      await handle.sync();
      closed = true;
      await handle.close();

      const { folder, file } = known ?? this.#locate((key as () => string)());
      if (options.immutable && (await this.#touchFile(file))) return;
      const dir = path.dirname(file);
      await this.#makeFolder(dir);
      await this.#moveInto(tmp, file, folder);
      placed = true;
      await syncPath(dir);
    } finally {
      if (!closed) await handle.close().catch(() => {});
      // Once placed there is nothing left to remove; otherwise the temp file goes, whatever failed.
      if (!placed) await fsp.rm(tmp, { force: true });
    }
  }

  /** Moved by a rename when it may be (flushed first), else copied to a temp file, flushed and renamed. */
  async putFile(key: string, file: string, options: PutOptions & { move?: boolean } = {}): Promise<number> {
    const { folder, file: final } = this.#locate(key);
    const dir = path.dirname(final);
    await this.#makeFolder(dir);
    if (options.move) {
      await syncPath(file);
      await this.#moveInto(file, final, folder);
    } else {
      const tmp = this.#tempFor(folder);
      try {
        await fsp.copyFile(file, tmp);
        await syncPath(tmp);
        await fsp.rename(tmp, final);
      } finally {
        await fsp.rm(tmp, { force: true });
      }
    }
    await syncPath(dir);
    return (await fsp.stat(final)).size;
  }

  async copy(from: string, to: string): Promise<boolean> {
    try {
      await this.putFile(to, this.#pathOf(from));
      return true;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return false;
      throw err;
    }
  }

  /** Renames `from` to `final`; from another file system, it is copied beside `final` first so the placing rename stays atomic. */
  async #moveInto(from: string, final: string, folder: string): Promise<void> {
    try {
      await fsp.rename(from, final);
    } catch (err) {
      if (errnoCode(err) !== 'EXDEV') throw err;
      const tmp = this.#tempFor(folder);
      try {
        await fsp.copyFile(from, tmp);
        await syncPath(tmp);
        await fsp.rename(tmp, final);
      } finally {
        await fsp.rm(tmp, { force: true });
      }
      await fsp.rm(from, { force: true });
    }
  }

  /** Makes a folder once, durably: each new folder is synced into the one above it. */
  async #makeFolder(dir: string): Promise<void> {
    if (this.#made.has(dir)) return;
    if (!fs.existsSync(dir)) {
      const created = (await fsp.mkdir(dir, { recursive: true, mode: 0o700 })) ?? dir;
      for (let made = dir; ; made = path.dirname(made)) {
        await syncPath(path.dirname(made));
        if (made === created) break;
      }
    }
    this.#made.add(dir);
  }

  async touch(key: string): Promise<boolean> {
    return this.#touchFile(this.#pathOf(key));
  }

  /** Sets the file's mtime to now. */
  async #touchFile(file: string): Promise<boolean> {
    const now = new Date();
    try {
      await fsp.utimes(file, now, now);
      return true;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return false;
      throw err;
    }
  }

  /** With conditions, the age and `keep` are checked and the file removed in one synchronous step: no write of this process comes between. */
  async delete(key: string, conditions?: DeleteConditions): Promise<boolean> {
    const file = this.#pathOf(key);
    if (!conditions) {
      await fsp.rm(file, { force: true });
      return true;
    }
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (!stat || Date.now() - stat.mtimeMs < conditions.minAgeMs || conditions.keep?.()) return false;
    fs.unlinkSync(file);
    return true;
  }

  async *list(folder: string): AsyncIterable<ListedObject> {
    assertFolder(folder);
    const dir = this.#dirOf(folder);
    const fanned = this.#fanOut.has(folder);
    const subfolders = fanned
      ? (await fsp.readdir(dir, { withFileTypes: true }).catch(() => []))
          .filter((entry) => entry.isDirectory() && entry.name.length <= 2 && !entry.name.startsWith('.'))
          .map((entry) => entry.name)
          .sort()
      : [''];
    for (const sub of subfolders) {
      const at = path.join(dir, sub);
      for (const name of await fsp.readdir(at).catch(() => [])) {
        if (!isKeyName(name) || (fanned && name.slice(0, 2) !== sub)) continue;
        const stat = await fsp.stat(path.join(at, name)).catch(() => undefined);
        if (stat?.isFile()) yield { key: `${folder}/${name}`, bytes: stat.size, modifiedMs: stat.mtimeMs };
      }
    }
  }

  /** The temp files are removed at start-up, when no write of this driver can be in them. */
  async removeLeftovers(): Promise<number> {
    return 0;
  }

  /** Stops the writer threads. */
  async close(): Promise<void> {
    await this.#writer.close();
  }
}
