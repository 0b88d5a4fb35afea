// Small blobs kept in memory in front of any blob store, bounded in bytes (BERTH_BLOB_CACHE_BYTES),
// least recently used out first. Blobs are immutable (the key is their digest), so nothing is ever
// invalidated: a popular page costs the store one read, and reads the cache can answer still work
// while the store does not. Of a larger blob, ranges are read in aligned blocks of BLOCK_BYTES, kept
// in the same cache: a popular part of a large file (a range a viewer or player asks for again) costs
// the store one read of its blocks. A block is kept only once all of its bytes have arrived.
import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { ByteRange } from './blob-driver.ts';
import type { BlobStore, CachingBlobStore, ListedBlob, PinnedBlob } from './blob-store.ts';

/** Blobs up to this size are cached whole; of larger ones, short ranges are cached by block. */
export const CACHEABLE_BLOB_BYTES = 256 * 1024;
/** A larger blob's block: block n holds bytes n × BLOCK_BYTES up to the next block or the blob's end. */
export const BLOCK_BYTES = 64 * 1024;

/**
 * The bytes of a stream, which must be exactly `bytes` of them, copied into a buffer of their own: a
 * chunk kept as it came could hold a larger buffer than the cache counts.
 */
async function readExactly(stream: Readable, bytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let read = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    read += chunk.length;
    chunks.push(chunk);
  }
  if (read !== bytes) throw new Error(`the store answered ${read} bytes of a block of ${bytes}`);
  return Buffer.concat(chunks, read);
}

export class CachedBlobStore implements CachingBlobStore {
  readonly #store: BlobStore;
  readonly #cache: LRUCache<string, Buffer> | undefined;
  /** Blocks being read from the store: a request for one of them waits for that read. */
  readonly #reading = new Map<string, Promise<Buffer>>();

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

  async readRange(sha256: string, bytes: number, range: ByteRange): Promise<Buffer | null> {
    if (!this.#cache || bytes <= CACHEABLE_BLOB_BYTES || range.end >= bytes) return null;
    const first = Math.floor(range.start / BLOCK_BYTES);
    const last = Math.floor(range.end / BLOCK_BYTES);
    if ((last - first + 1) * BLOCK_BYTES > CACHEABLE_BLOB_BYTES) return null;
    const blocks: Array<Buffer | Promise<Buffer>> = [];
    for (let block = first; block <= last; block++) blocks.push(this.#block(sha256, bytes, block));
    const held = await Promise.all(blocks);
    const joined = held.length === 1 ? held[0]! : Buffer.concat(held);
    const from = range.start - first * BLOCK_BYTES;
    return joined.subarray(from, from + range.end - range.start + 1);
  }

  /** A block of a larger blob: from memory, or read from the store once however many ask for it at once. */
  #block(sha256: string, bytes: number, block: number): Buffer | Promise<Buffer> {
    const key = `${sha256}/${block}`;
    const cached = this.#cache!.get(key);
    if (cached) return cached;
    let reading = this.#reading.get(key);
    if (!reading) {
      const start = block * BLOCK_BYTES;
      const end = Math.min(start + BLOCK_BYTES, bytes) - 1;
      reading = this.#store
        .stream(sha256, { start, end })
        .then((stream) => readExactly(stream, end - start + 1))
        .then((read) => {
          this.#cache!.set(key, read);
          return read;
        })
        .finally(() => this.#reading.delete(key));
      this.#reading.set(key, reading);
    }
    return reading;
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
