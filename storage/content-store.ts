// The blob store over any blob driver (blob-driver.ts): what services, hosting, ctx.data, exports and
// backups use, written once for the directory and the object store.
// Blobs are content-addressed under `blobs/<sha256>`: the bytes are hashed as they arrive and stored
// under their digest, so the same bytes are stored once and a retried write is harmless. A body that
// ends within SMALL_BLOB_BYTES is read whole and put at once; a longer one is streamed to the driver,
// which names it by its digest once the last byte is written. Every write makes its blob new (written
// again, or touched where the driver keeps it), which is the age the sweeper goes by.
//
// A write pins its blob from the moment its digest is known until its version commits (or never will);
// the sweeper's removal checks pins and age again just before it removes (BlobSweeper). Just before the
// commit's transaction, `stillStored`: without a safe age (one server owns the directory, and its pin
// keeps its own sweeper off) the store is asked; with one, a write younger than it is trusted and an
// older one touches its blob, which confirms it and starts its age again. In the transaction `keeps`
// checks that age again without asking the store. With a safe age the store is shared, and another
// node's write can land between a removal's last check and the removal itself: each removal keeps a
// copy (`removed-blobs/`) for two sweep intervals, and every sweep puts back those referenced again.
//
// Besides blobs: finished exports (`exports/<id>.sql`), each replaced whole.
import crypto from 'node:crypto';
import type { Readable } from 'node:stream';
import { type BlobDriver, type ByteRange, ObjectNotFoundError } from './blob-driver.ts';
import {
  assertDigest,
  BlobNotFoundError,
  type BlobStore,
  BlobTooLargeError,
  isDigest,
  type ListedBlob,
  type PinnedBlob,
  Pins,
  readWhole,
  SMALL_BLOB_BYTES,
} from './blob-store.ts';

export interface ContentStoreOptions {
  /**
   * How long after a write the sweeper leaves its blob alone for certain (its minimum age): a commit
   * within it trusts the write without asking the store. Unset: every commit asks.
   */
  safeAgeMs?: number;
}

const blobKey = (sha256: string): string => {
  assertDigest(sha256);
  return `blobs/${sha256}`;
};

const exportKey = (id: string): string => `exports/${id}.sql`;

/** Copies of blobs removed from a shared store, kept until no write can still commit trusting them. */
const REMOVED = 'removed-blobs';
const removedKey = (sha256: string): string => `${REMOVED}/${sha256}`;

/** Null for an object the store does not have. */
async function unlessMissing<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof ObjectNotFoundError) return null;
    throw err;
  }
}

/** A blob's read, with a missing blob named by its digest. */
async function blobRead<T>(sha256: string, read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof ObjectNotFoundError) throw new BlobNotFoundError(sha256);
    throw err;
  }
}

export class ContentStore implements BlobStore {
  readonly #driver: BlobDriver;
  readonly #pins = new Pins();
  readonly #safeAgeMs: number | undefined;

  constructor(driver: BlobDriver, options: ContentStoreOptions = {}) {
    this.#driver = driver;
    this.#safeAgeMs = options.safeAgeMs;
  }

  get location(): string {
    return this.#driver.location;
  }

  get requests(): number {
    return this.#driver.requests;
  }

  init(): Promise<void> {
    return this.#driver.init();
  }

  writable(): Promise<void> {
    return this.#driver.writable();
  }

  /**
   * A body declared small is read whole; an undeclared one is read up to SMALL_BLOB_BYTES first, and
   * stored whole if it ends within them; the rest is streamed. Whatever fails, nothing is kept, and the
   * source is never destroyed: an oversized request's socket stays open for its 413.
   */
  async put(source: Readable, maxBytes: number, declaredBytes?: number): Promise<PinnedBlob> {
    if (declaredBytes !== undefined && declaredBytes <= SMALL_BLOB_BYTES)
      return this.#putWhole(await readWhole(source, Math.min(maxBytes, SMALL_BLOB_BYTES)));
    const rest = source.iterator({ destroyOnReturn: false })[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const head: Buffer[] = [];
    let headBytes = 0;
    while (declaredBytes === undefined && headBytes <= SMALL_BLOB_BYTES) {
      const next = await rest.next();
      if (next.done) return this.#putWhole(Buffer.concat(head, headBytes));
      headBytes += next.value.length;
      if (headBytes > maxBytes) throw new BlobTooLargeError(maxBytes);
      head.push(next.value);
    }
    return this.#putStreamed(head, rest, maxBytes);
  }

  async #putWhole(data: Buffer): Promise<PinnedBlob> {
    const sha256 = crypto.createHash('sha256').update(data).digest('hex');
    const unpin = this.#pins.pin(sha256);
    const sent = Date.now();
    try {
      await this.#driver.put(blobKey(sha256), data, { immutable: true });
    } catch (err) {
      unpin();
      throw err;
    }
    return { sha256, bytes: data.length, unpin, storedAt: sent };
  }

  async #putStreamed(head: Buffer[], rest: AsyncIterator<Buffer>, maxBytes: number): Promise<PinnedBlob> {
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    // The source's iterator is stepped by hand, never returned: returning it would end the request.
    const measured = async function* (): AsyncIterable<Buffer> {
      for (const chunk of head) {
        bytes += chunk.length;
        hash.update(chunk);
        yield chunk;
      }
      for (let next = await rest.next(); !next.done; next = await rest.next()) {
        bytes += next.value.length;
        if (bytes > maxBytes) throw new BlobTooLargeError(maxBytes);
        hash.update(next.value);
        yield next.value;
      }
    };
    let sha256 = '';
    let unpin: (() => void) | undefined;
    const sent = Date.now();
    try {
      await this.#driver.putStream(
        () => {
          sha256 = hash.digest('hex');
          unpin = this.#pins.pin(sha256);
          return blobKey(sha256);
        },
        measured(),
        { immutable: true },
      );
    } catch (err) {
      unpin?.();
      throw err;
    }
    return { sha256, bytes, unpin: unpin as () => void, storedAt: sent };
  }

  isPinned(sha256: string): boolean {
    return this.#pins.has(sha256);
  }

  async stillStored(blob: PinnedBlob): Promise<boolean> {
    if (this.#safeAgeMs === undefined) return this.#driver.exists(blobKey(blob.sha256));
    if (this.keeps(blob)) return true;
    const sent = Date.now();
    if (!(await this.#driver.touch(blobKey(blob.sha256)))) return false;
    blob.storedAt = sent;
    return true;
  }

  keeps(blob: PinnedBlob): boolean {
    return this.#safeAgeMs === undefined || Date.now() - blob.storedAt < this.#safeAgeMs;
  }

  async touch(sha256: string): Promise<boolean> {
    return this.#driver.touch(blobKey(sha256));
  }

  async has(sha256: string): Promise<boolean> {
    return this.#driver.exists(blobKey(sha256));
  }

  /** The stored blob's size, or null when the store does not have it. */
  async sizeOf(sha256: string): Promise<number | null> {
    return (await this.#driver.stat(blobKey(sha256)))?.bytes ?? null;
  }

  async read(sha256: string): Promise<Buffer> {
    return blobRead(sha256, this.#driver.getBytes(blobKey(sha256)));
  }

  async stream(sha256: string, range?: ByteRange): Promise<Readable> {
    const key = blobKey(sha256);
    return blobRead(sha256, range ? this.#driver.getRange(key, range) : this.#driver.get(key));
  }

  async *list(): AsyncIterable<ListedBlob> {
    for await (const object of this.#driver.list('blobs')) {
      const sha256 = object.key.slice('blobs/'.length);
      if (isDigest(sha256)) yield { sha256, bytes: object.bytes, modifiedMs: object.modifiedMs };
    }
  }

  /**
   * Kept when younger than `minAgeMs` or pinned, both checked by the driver just before it removes. On
   * a shared store (a safe age) another node's write of the same bytes can land between that check and
   * the removal, and commit trusting them: a copy made first is kept, which restoreRemoved puts back.
   */
  async remove(sha256: string, minAgeMs: number): Promise<boolean> {
    const key = blobKey(sha256);
    const conditions = { minAgeMs, keep: () => this.#pins.has(sha256) };
    if (this.#safeAgeMs === undefined) return this.#driver.delete(key, conditions);
    if (!(await this.#driver.copy(key, removedKey(sha256)))) return false;
    if (await this.#driver.delete(key, conditions)) return true;
    await this.#driver.delete(removedKey(sha256));
    return false;
  }

  async restoreRemoved(isReferenced: (sha256: string) => Promise<boolean>, keptMs: number): Promise<number> {
    if (this.#safeAgeMs === undefined) return 0;
    let restored = 0;
    for await (const copy of this.#driver.list(REMOVED)) {
      const sha256 = copy.key.slice(REMOVED.length + 1);
      if (!isDigest(sha256)) continue;
      // A blob stored again since is whole already; a missing one comes back as new, so its age starts again.
      if ((await isReferenced(sha256)) && !(await this.#driver.exists(blobKey(sha256))))
        if (await this.#driver.copy(copy.key, blobKey(sha256))) restored++;
      if (Date.now() - copy.modifiedMs >= keptMs) await this.#driver.delete(copy.key);
    }
    return restored;
  }

  async sweepLeftovers(minAgeMs: number): Promise<number> {
    return this.#driver.removeLeftovers(minAgeMs);
  }

  /** The dump is moved into place where the driver can (it was written beside it). */
  async putExport(id: string, file: string): Promise<number> {
    return this.#driver.putFile(exportKey(id), file, { move: true, contentType: 'application/sql' });
  }

  async openExport(id: string): Promise<Readable | null> {
    return unlessMissing(this.#driver.get(exportKey(id)));
  }

  /** Whether the store has the export. */
  async hasExport(id: string): Promise<boolean> {
    return this.#driver.exists(exportKey(id));
  }

  close(): Promise<void> {
    return this.#driver.close();
  }
}
