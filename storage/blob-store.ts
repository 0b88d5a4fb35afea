// Content-addressed file bytes. A blob is streamed to a temporary file while it is hashed, fsynced,
// then renamed to blobs/<aa>/<sha256>: a reader sees a whole blob or none, never a partial one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { BlobWriter } from './blob-writer.ts';
import { syncPath } from './durable.ts';

export interface StoredBlob {
  sha256: string;
  bytes: number;
}

/** A blob just stored, kept from the sweeper until `unpin` (once the version that references it is committed, or not). */
export interface PinnedBlob extends StoredBlob {
  unpin(): void;
}

/** Thrown when a stream grows past the allowed size; nothing is kept. */
export class BlobTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`blob exceeds ${limit} bytes`);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Bodies declared at most this long are read whole and written by a writer thread in one job. */
export const SMALL_BLOB_BYTES = 256 * 1024;

export class BlobStore {
  readonly #root: string;
  readonly #tmp: string;
  /** Shard folders known to exist; there are at most 256, and nothing removes them. */
  readonly #shards = new Set<string>();
  readonly #writer = new BlobWriter(2);
  /** Blobs stored by writes that have not committed yet, with how many such writes each has. */
  readonly #pins = new Map<string, number>();

  constructor(root: string) {
    this.#root = root;
    this.#tmp = path.join(root, '.tmp');
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

  pathOf(sha256: string): string {
    if (!SHA256_HEX.test(sha256)) throw new Error(`not a sha256 digest: ${sha256}`);
    return path.join(this.#root, sha256.slice(0, 2), sha256);
  }

  /**
   * Stores `source`, at most `maxBytes`; returns its digest and size. A body declared small
   * (`declaredBytes`) is read whole, hashed, and written by a writer thread unless the store has it
   * already; any other is streamed to a temp file while it is hashed. Whatever fails (the source, the
   * size limit, the disk), no temp file is left when this returns or throws. The blob is pinned from
   * the moment its digest is known: the caller unpins it once it is referenced, or will not be.
   */
  async put(source: Readable, maxBytes: number, declaredBytes?: number): Promise<PinnedBlob> {
    if (declaredBytes !== undefined && declaredBytes <= SMALL_BLOB_BYTES) return this.#putSmall(source, Math.min(maxBytes, SMALL_BLOB_BYTES));
    return this.#putStream(source, maxBytes);
  }

  #pin(sha256: string): () => void {
    this.#pins.set(sha256, (this.#pins.get(sha256) ?? 0) + 1);
    let pinned = true;
    return () => {
      if (!pinned) return;
      pinned = false;
      const left = this.#pins.get(sha256)! - 1;
      if (left > 0) this.#pins.set(sha256, left);
      else this.#pins.delete(sha256);
    };
  }

  /** Whether a write of this process has stored the blob and not committed yet (see BlobSweeper). */
  isPinned(sha256: string): boolean {
    return this.#pins.has(sha256);
  }

  async #putSmall(source: Readable, maxBytes: number): Promise<PinnedBlob> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > maxBytes) throw new BlobTooLargeError(maxBytes);
      chunks.push(chunk);
    }
    const data = Buffer.concat(chunks, bytes);
    const sha256 = crypto.createHash('sha256').update(data).digest('hex');
    const final = this.pathOf(sha256);
    const unpin = this.#pin(sha256);
    try {
      if (!(await this.touch(sha256))) {
        await this.#writer.write({ data, tmp: path.join(this.#tmp, crypto.randomUUID()), final, root: this.#root });
      }
    } catch (err) {
      unpin();
      throw err;
    }
    return { sha256, bytes, unpin };
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
      const finalPath = this.pathOf(sha256);
      unpin = this.#pin(sha256);
      if (!(await this.touch(sha256))) {
        const dir = path.dirname(finalPath);
        await this.#shard(dir);
        await fsp.rename(tmpPath, finalPath);
        placed = true;
        await syncPath(dir);
      }
      return { sha256, bytes, unpin };
    } catch (err) {
      unpin?.();
      throw err;
    } finally {
      if (!closed) await handle.close().catch(() => {});
      // After the rename there is nothing left to remove; otherwise the temp file goes, whatever failed.
      if (!placed) await fsp.rm(tmpPath, { force: true });
    }
  }

  /** Makes a blob's folder (blobs/<aa>) once, durably: after a crash its blobs are still found in it. */
  async #shard(dir: string): Promise<void> {
    if (this.#shards.has(dir)) return;
    if (!fs.existsSync(dir)) {
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      await syncPath(this.#root);
    }
    this.#shards.add(dir);
  }

  /**
   * Marks a blob as just used (its mtime is now), so the sweeper leaves it alone for a while; false
   * when the store does not have it. Written, reused and released blobs are all touched.
   */
  async touch(sha256: string): Promise<boolean> {
    const now = new Date();
    try {
      await fsp.utimes(this.pathOf(sha256), now, now);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  /** Whether the store has the blob, checked on the spot (see BlobSweeper for why that matters). */
  has(sha256: string): boolean {
    return fs.existsSync(this.pathOf(sha256));
  }

  async read(sha256: string): Promise<Buffer> {
    return fsp.readFile(this.pathOf(sha256));
  }

  /** Stops the writer threads. */
  async close(): Promise<void> {
    await this.#writer.close();
  }

  /** A stream of the blob's bytes, optionally a byte range (inclusive `end`, as in HTTP). */
  stream(sha256: string, range?: { start: number; end: number }): Readable {
    return fs.createReadStream(this.pathOf(sha256), range ?? {});
  }
}
