// The blob store on a local directory, the embedded default. A blob is streamed to a temporary file
// while it is hashed, fsynced, then renamed to <root>/<aa>/<sha256>: a reader sees a whole blob or
// none, never a partial one. A blob's age (for the sweeper) is its file's mtime. Exports are files
// <data dir>/exports/<id>.sql; copies of site databases are <root>/database-copies/<siteId>.sqlite.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { BlobWriter } from './blob-writer.ts';
import {
  assertDigest,
  BlobTooLargeError,
  type BlobStore,
  type ByteRange,
  isDigest,
  type ListedBlob,
  type PinnedBlob,
  Pins,
  readWhole,
  SMALL_BLOB_BYTES,
} from './blob-store.ts';
import { errnoCode, syncPath } from './durable.ts';

const SHARD = /^[0-9a-f]{2}$/;

/** A stream of a file's bytes, or null when there is no such file. */
async function openIfThere(file: string): Promise<Readable | null> {
  try {
    const handle = await fsp.open(file, 'r');
    return handle.createReadStream();
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw err;
  }
}

export class LocalBlobStore implements BlobStore {
  readonly #root: string;
  readonly #tmp: string;
  readonly #exports: string;
  /** Shard folders known to exist; there are at most 256, and nothing removes them. */
  readonly #shards = new Set<string>();
  readonly #writer = new BlobWriter(2);
  readonly #pins = new Pins();

  /** `root`: the blob folder; `exportsDir`: where finished exports are kept. */
  constructor(root: string, exportsDir: string) {
    this.#root = root;
    this.#tmp = path.join(root, '.tmp');
    this.#exports = exportsDir;
  }

  readonly requests = 0;

  get location(): string {
    return `the blob directory ${this.#root}`;
  }

  /** Creates the folders and drops temporaries left by a process that died mid-write. */
  async init(): Promise<void> {
    await fsp.mkdir(this.#root, { recursive: true, mode: 0o700 });
    await fsp.rm(this.#tmp, { recursive: true, force: true });
    await fsp.mkdir(this.#tmp, { recursive: true, mode: 0o700 });
  }

  /** Whether a blob can be written now: its temp folder accepts a file. */
  async writable(): Promise<void> {
    const probe = path.join(this.#tmp, `ready-${crypto.randomUUID()}`);
    await fsp.writeFile(probe, '', { mode: 0o600 });
    await fsp.rm(probe, { force: true });
  }

  #pathOf(sha256: string): string {
    assertDigest(sha256);
    return path.join(this.#root, sha256.slice(0, 2), sha256);
  }

  /**
   * A body declared small (`declaredBytes`) is read whole, hashed, and written by a writer thread
   * unless the store has it already; any other is streamed to a temp file while it is hashed.
   * Whatever fails (the source, the size limit, the disk), no temp file is left.
   */
  async put(source: Readable, maxBytes: number, declaredBytes?: number): Promise<PinnedBlob> {
    if (declaredBytes !== undefined && declaredBytes <= SMALL_BLOB_BYTES)
      return this.#putSmall(source, Math.min(maxBytes, SMALL_BLOB_BYTES));
    return this.#putStream(source, maxBytes);
  }

  isPinned(sha256: string): boolean {
    return this.#pins.has(sha256);
  }

  /** Checked on the spot: the blob's file is still there. */
  async stillStored(blob: PinnedBlob): Promise<boolean> {
    return fs.existsSync(this.#pathOf(blob.sha256));
  }

  async #putSmall(source: Readable, maxBytes: number): Promise<PinnedBlob> {
    const data = await readWhole(source, maxBytes);
    const sha256 = crypto.createHash('sha256').update(data).digest('hex');
    const final = this.#pathOf(sha256);
    const unpin = this.#pins.pin(sha256);
    try {
      if (!(await this.touch(sha256))) {
        await this.#writer.write({ data, tmp: path.join(this.#tmp, crypto.randomUUID()), final, keepExisting: true });
      }
    } catch (err) {
      unpin();
      throw err;
    }
    return { sha256, bytes: data.length, unpin, storedAt: Date.now() };
  }

  async #putStream(source: Readable, maxBytes: number): Promise<PinnedBlob> {
    const tmpPath = path.join(this.#tmp, crypto.randomUUID());
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    const handle = await fsp.open(tmpPath, 'wx', 0o600);
    let closed = false;
    let placed = false;
    let unpin: (() => void) | undefined;
    try {
      // destroyOnReturn: false leaves an oversized request's socket open, so a 413 can still be sent.
      for await (const chunk of source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > maxBytes) throw new BlobTooLargeError(maxBytes);
        hash.update(chunk);
        await handle.write(chunk);
      }
      await handle.sync();
      closed = true;
      await handle.close();

      const sha256 = hash.digest('hex');
      const finalPath = this.#pathOf(sha256);
      unpin = this.#pins.pin(sha256);
      if (!(await this.touch(sha256))) {
        const dir = path.dirname(finalPath);
        await this.#shard(dir);
        await fsp.rename(tmpPath, finalPath);
        placed = true;
        await syncPath(dir);
      }
      return { sha256, bytes, unpin, storedAt: Date.now() };
    } catch (err) {
      unpin?.();
      throw err;
    } finally {
      if (!closed) await handle.close().catch(() => {});
      // After the rename there is nothing left to remove; otherwise the temp file goes, whatever failed.
      if (!placed) await fsp.rm(tmpPath, { force: true });
    }
  }

  /** Makes a blob's folder (<root>/<aa>) once, durably: after a crash its blobs are still found in it. */
  async #shard(dir: string): Promise<void> {
    if (this.#shards.has(dir)) return;
    if (!fs.existsSync(dir)) {
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      await syncPath(this.#root);
    }
    this.#shards.add(dir);
  }

  /** Sets the blob's mtime to now. Written, reused and released blobs are all touched. */
  async touch(sha256: string): Promise<boolean> {
    const now = new Date();
    try {
      await fsp.utimes(this.#pathOf(sha256), now, now);
      return true;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return false;
      throw err;
    }
  }

  async has(sha256: string): Promise<boolean> {
    return fs.existsSync(this.#pathOf(sha256));
  }

  async read(sha256: string): Promise<Buffer> {
    return fsp.readFile(this.#pathOf(sha256));
  }

  async stream(sha256: string, range?: ByteRange): Promise<Readable> {
    // Opened before it is returned, so a missing blob fails here rather than mid-response.
    const handle = await fsp.open(this.#pathOf(sha256), 'r');
    return handle.createReadStream(range ?? {});
  }

  async *list(): AsyncIterable<ListedBlob> {
    for (const shard of (await fsp.readdir(this.#root)).filter((name) => SHARD.test(name)).sort()) {
      const dir = path.join(this.#root, shard);
      for (const name of await fsp.readdir(dir)) {
        if (!isDigest(name)) continue;
        const stat = await fsp.stat(path.join(dir, name)).catch(() => undefined);
        if (stat) yield { sha256: name, bytes: stat.size, modifiedMs: stat.mtimeMs };
      }
    }
  }

  /** The age is checked and the file removed in one synchronous step: a write of this process cannot come between. */
  async remove(sha256: string, minAgeMs: number): Promise<boolean> {
    const file = this.#pathOf(sha256);
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (!stat || Date.now() - stat.mtimeMs < minAgeMs || this.#pins.has(sha256)) return false;
    fs.unlinkSync(file);
    return true;
  }

  /** The temp folder is emptied at start-up, when no write of this store can be in it. */
  async sweepLeftovers(): Promise<number> {
    return 0;
  }

  #exportPath(id: string): string {
    return path.join(this.#exports, `${id}.sql`);
  }

  /** Renames the finished dump into place (it was written beside it). */
  async putExport(id: string, file: string): Promise<number> {
    await fsp.mkdir(this.#exports, { recursive: true, mode: 0o700 });
    const final = this.#exportPath(id);
    await fsp.rename(file, final);
    await syncPath(this.#exports);
    return (await fsp.stat(final)).size;
  }

  openExport(id: string): Promise<Readable | null> {
    return openIfThere(this.#exportPath(id));
  }

  #copyPath(siteId: string): string {
    if (!/^[0-9a-f-]{36}$/.test(siteId)) throw new Error(`not a site id: ${siteId}`);
    return path.join(this.#root, 'database-copies', `${siteId}.sqlite`);
  }

  /** Copied beside the blobs (the root may be another file system than `file`), flushed, then renamed over the last copy. */
  async putDatabaseCopy(siteId: string, file: string): Promise<number> {
    const final = this.#copyPath(siteId);
    await fsp.mkdir(path.dirname(final), { recursive: true, mode: 0o700 });
    const tmp = path.join(this.#tmp, `copy-${crypto.randomUUID()}`);
    try {
      await fsp.copyFile(file, tmp);
      await syncPath(tmp);
      await fsp.rename(tmp, final);
    } finally {
      await fsp.rm(tmp, { force: true });
    }
    await syncPath(path.dirname(final));
    return (await fsp.stat(final)).size;
  }

  openDatabaseCopy(siteId: string): Promise<Readable | null> {
    return openIfThere(this.#copyPath(siteId));
  }

  async removeDatabaseCopy(siteId: string): Promise<void> {
    await fsp.rm(this.#copyPath(siteId), { force: true });
  }

  /** Stops the writer threads. */
  async close(): Promise<void> {
    await this.#writer.close();
  }
}
