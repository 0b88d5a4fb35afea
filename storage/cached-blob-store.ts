// Small blobs kept in memory in front of any blob store, bounded in bytes (BERTH_BLOB_CACHE_BYTES),
// least recently used out first. Blobs are immutable (the key is their digest), so nothing is ever
// invalidated: a popular page costs the store one read, and reads the cache can answer still work
// while the store does not.
import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { ByteRange } from './blob-driver.ts';
import type { BlobStore, CachingBlobStore, ListedBlob, PinnedBlob } from './blob-store.ts';

/** Blobs up to this size are cached; larger ones are always streamed from the store. */
export const CACHEABLE_BLOB_BYTES = 256 * 1024;

export class CachedBlobStore implements CachingBlobStore {
  readonly #store: BlobStore;
  readonly #cache: LRUCache<string, Buffer> | undefined;

  /** `maxBytes` 0 turns the cache off. */
  constructor(store: BlobStore, maxBytes: number) {
    this.#store = store;
    this.#cache =
      maxBytes > 0
        ? new LRUCache<string, Buffer>({ maxSize: maxBytes, sizeCalculation: (bytes) => Math.max(1, bytes.length) })
        : undefined;
  }

  get location(): string {
    return this.#store.location;
  }

  get requests(): number {
    return this.#store.requests;
  }

  /** Whether a blob of this size is kept in memory once read. */
  cacheable(bytes: number): boolean {
    return this.#cache !== undefined && bytes <= CACHEABLE_BLOB_BYTES;
  }

  /** The blob's bytes when the cache holds them, without waiting on anything. */
  cached(sha256: string): Buffer | undefined {
    return this.#cache?.get(sha256);
  }

  async read(sha256: string): Promise<Buffer> {
    const cached = this.#cache?.get(sha256);
    if (cached) return cached;
    const bytes = await this.#store.read(sha256);
    if (bytes.length <= CACHEABLE_BLOB_BYTES) this.#cache?.set(sha256, bytes);
    return bytes;
  }

  async stream(sha256: string, range?: ByteRange): Promise<Readable> {
    const cached = this.#cache?.get(sha256);
    if (cached) return Readable.from([range ? cached.subarray(range.start, range.end + 1) : cached]);
    return this.#store.stream(sha256, range);
  }

  init(): Promise<void> {
    return this.#store.init();
  }
  writable(): Promise<void> {
    return this.#store.writable();
  }
  put(source: Readable, maxBytes: number, declaredBytes?: number): Promise<PinnedBlob> {
    return this.#store.put(source, maxBytes, declaredBytes);
  }
  isPinned(sha256: string): boolean {
    return this.#store.isPinned(sha256);
  }
  stillStored(blob: PinnedBlob): Promise<boolean> {
    return this.#store.stillStored(blob);
  }
  keeps(blob: PinnedBlob): boolean {
    return this.#store.keeps(blob);
  }
  touch(sha256: string): Promise<boolean> {
    return this.#store.touch(sha256);
  }
  has(sha256: string): Promise<boolean> {
    return this.#store.has(sha256);
  }
  list(): AsyncIterable<ListedBlob> {
    return this.#store.list();
  }
  async remove(sha256: string, minAgeMs: number): Promise<boolean> {
    const removed = await this.#store.remove(sha256, minAgeMs);
    if (removed) this.#cache?.delete(sha256);
    return removed;
  }
  sweepLeftovers(minAgeMs: number): Promise<number> {
    return this.#store.sweepLeftovers(minAgeMs);
  }
  putExport(id: string, file: string): Promise<number> {
    return this.#store.putExport(id, file);
  }
  openExport(id: string): Promise<Readable | null> {
    return this.#store.openExport(id);
  }
  close(): Promise<void> {
    return this.#store.close();
  }
}
