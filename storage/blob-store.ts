// The blob store port: content-addressed file bytes (the key is the SHA-256 of the bytes, so the same
// bytes are stored once and a retried write is harmless) and the files of database exports. ContentStore
// (content-store.ts) implements it once over either blob driver, the directory or the object store;
// CachedBlobStore keeps small blobs in memory in front of it. Services, hosting, ctx.data, exports and
// backups use these interfaces and never know which store.
import type { Readable } from 'node:stream';
import type { ByteRange } from './blob-driver.ts';

export interface StoredBlob {
  sha256: string;
  bytes: number;
}

/** A blob just stored, kept from the sweeper until `unpin` (once the version that references it is committed, or not). */
export interface PinnedBlob extends StoredBlob {
  unpin(): void;
  /**
   * When the write or touch that last made it new was sent: the store's own time for it is no earlier,
   * and every sweeper leaves it alone for its minimum age from then. stillStored moves it on when it
   * touches the blob.
   */
  storedAt: number;
}

/** A blob as the sweeper sees it in a listing. */
export interface ListedBlob {
  sha256: string;
  bytes: number;
  /** When it was last written or touched, in ms since the epoch. */
  modifiedMs: number;
}

export interface BlobStore {
  /** Where the bytes live, for start-up errors and logs: no credential is ever in it. */
  readonly location: string;
  /** Requests sent to the store so far, each attempt once: what an object store is asked; 0 for a directory. */
  readonly requests: number;
  /** Prepares the store and checks it answers; a store that cannot be used fails the start. */
  init(): Promise<void>;
  /** Whether a blob can be written now (readiness). */
  writable(): Promise<void>;
  /**
   * Stores `source`, at most `maxBytes` (BlobTooLargeError past it); nothing partial is kept whatever
   * fails. The blob is pinned from the moment its digest is known: the caller unpins it once a version
   * references it, or never will. A blob the store had already is touched (its age starts again).
   */
  put(source: Readable, maxBytes: number, declaredBytes?: number): Promise<PinnedBlob>;
  /** Whether a write of this process has stored the blob and not committed yet. */
  isPinned(sha256: string): boolean;
  /**
   * Asked just before the transaction that commits the version referencing a stored blob, never in it
   * (on an object store it may be a request): false when a sweeper may have removed the blob since it
   * was stored (the write then fails with storage_unavailable). A blob `keeps` no longer holds for is
   * touched, which starts its age again.
   */
  stillStored(blob: PinnedBlob): Promise<boolean>;
  /**
   * Checked in that transaction, without asking the store: whether every sweeper stays off the blob
   * until the commit (this process's for its pin, another server's for its age). False: the write
   * commits nothing and asks stillStored again.
   */
  keeps(blob: PinnedBlob): boolean;
  /** Marks a blob as just used, so the sweeper leaves it alone for a while; false when the store does not have it. */
  touch(sha256: string): Promise<boolean>;
  has(sha256: string): Promise<boolean>;
  read(sha256: string): Promise<Buffer>;
  /** A stream of the blob's bytes, or of a range of them, never the whole object in memory. */
  stream(sha256: string, range?: ByteRange): Promise<Readable>;
  /** Every blob, in no particular order. */
  list(): AsyncIterable<ListedBlob>;
  /**
   * Removes a blob unless it was touched within `minAgeMs` (checked again just before the removal);
   * false when it was kept.
   */
  remove(sha256: string, minAgeMs: number): Promise<boolean>;
  /**
   * Puts back the blobs removed from a shared store that are referenced again (a write of another node
   * that stored the same bytes just before the removal, and committed); forgets the copies kept of
   * removed blobs once older than `keptMs`. Returns how many it put back.
   */
  restoreRemoved(isReferenced: (sha256: string) => Promise<boolean>, keptMs: number): Promise<number>;
  /** Removes what interrupted writes left (temp objects, unfinished multipart uploads) older than `minAgeMs`. */
  sweepLeftovers(minAgeMs: number): Promise<number>;

  /** Stores a finished export's file, read from a local path, under its id; returns its size. The file may be moved. */
  putExport(id: string, file: string): Promise<number>;
  /** A stream of an export's bytes, or null when the store does not have it. */
  openExport(id: string): Promise<Readable | null>;

  close(): Promise<void>;
}

/** A blob store with small blobs kept in memory (CachedBlobStore): what services and hosting are given. */
export interface CachingBlobStore extends BlobStore {
  /** Whether a blob of this size is kept in memory once read. */
  cacheable(bytes: number): boolean;
  /** The blob's bytes when memory holds them, without waiting on anything. */
  cached(sha256: string): Buffer | undefined;
  /**
   * A range of a blob of `bytes` bytes that is too large to be kept whole, read in aligned blocks that
   * are then kept as small blobs are; null when the blob is small, the cache is off, or the range's
   * blocks hold more than a small blob (such a range is streamed).
   */
  readRange(sha256: string, bytes: number, range: ByteRange): Promise<Buffer | null>;
}

/** Thrown when a stream grows past the allowed size; nothing is kept. */
export class BlobTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`blob exceeds ${limit} bytes`);
  }
}

/** A blob the store does not have. */
export class BlobNotFoundError extends Error {
  readonly code = 'ENOENT';
  constructor(sha256: string) {
    super(`blob ${sha256} is not in the store`);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function assertDigest(sha256: string): void {
  if (!SHA256_HEX.test(sha256)) throw new Error(`not a sha256 digest: ${sha256}`);
}

export const isDigest = (name: string): boolean => SHA256_HEX.test(name);

/** A body that ends within this many bytes (declared so, or found so) is read whole before it is stored. */
export const SMALL_BLOB_BYTES = 256 * 1024;

/** Blobs stored by writes of this process that have not committed yet, with how many such writes each has. */
export class Pins {
  readonly #pins = new Map<string, number>();

  pin(sha256: string): () => void {
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

  has(sha256: string): boolean {
    return this.#pins.has(sha256);
  }
}

/** Reads a body declared small whole, refusing it past `maxBytes`. */
export async function readWhole(source: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  // destroyOnReturn: false leaves an oversized request's socket open, so a 413 can still be sent.
  for await (const chunk of source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > maxBytes) throw new BlobTooLargeError(maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, bytes);
}
