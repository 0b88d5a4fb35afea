// Small blobs kept in memory in front of any blob store, bounded in bytes (BERTH_BLOB_CACHE_BYTES),
// least recently used out first. Blobs are immutable (the key is their digest), so nothing is ever
// invalidated: a popular page costs the store one read, and reads the cache can answer still work
// while the store does not. Of a larger blob, ranges are read in aligned blocks of BLOCK_BYTES, kept
// in the same cache: a popular part of a large file (a range a viewer or player asks for again) costs
// the store one read of its blocks. A block is kept only once all the bytes of its read have arrived.
import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { ByteRange } from './blob-driver.ts';
import type { BlobStore, CachingBlobStore, ListedBlob, PinnedBlob } from './blob-store.ts';

/** Blobs up to this size are cached whole; of larger ones, short ranges are cached by block. */
export const CACHEABLE_BLOB_BYTES = 256 * 1024;
/** A larger blob's block: block n holds bytes n × BLOCK_BYTES up to the next block or the blob's end. */
export const BLOCK_BYTES = 64 * 1024;

/** The bytes of a stream, which must be exactly `bytes` of them. */
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
    const held = await Promise.all(this.#blocks(sha256, bytes, first, last));
    const joined = held.length === 1 ? held[0]! : Buffer.concat(held);
    const from = range.start - first * BLOCK_BYTES;
    return joined.subarray(from, from + range.end - range.start + 1);
  }

  /**
   * Blocks `first` to `last` of a larger blob: from memory, or waiting for a read of them already under
   * way; the others are read from the store in one ranged read, from the first of them to the last.
   */
  #blocks(sha256: string, bytes: number, first: number, last: number): Array<Buffer | Promise<Buffer>> {
    const key = (block: number) => `${sha256}/${block}`;
    const found = new Map<number, Buffer | Promise<Buffer>>();
    const missing: number[] = [];
    for (let block = first; block <= last; block++) {
      const held = this.#cache!.get(key(block)) ?? this.#reading.get(key(block));
      if (held) found.set(block, held);
      else missing.push(block);
    }
    if (missing.length > 0) {
      const from = missing[0]!;
      const start = from * BLOCK_BYTES;
      const end = Math.min((missing.at(-1)! + 1) * BLOCK_BYTES, bytes) - 1;
      const read = this.#store.stream(sha256, { start, end }).then((stream) => readExactly(stream, end - start + 1));
      for (const block of missing) {
        const at = (block - from) * BLOCK_BYTES;
        const reading = read
          .then((span) => {
            // Copied out of a span of several, so that evicting one block frees its memory.
            const bytesOf = missing.length === 1 ? span : Buffer.from(span.subarray(at, at + BLOCK_BYTES));
            this.#cache!.set(key(block), bytesOf);
            return bytesOf;
          })
          .finally(() => this.#reading.delete(key(block)));
        this.#reading.set(key(block), reading);
        found.set(block, reading);
      }
    }
    const blocks: Array<Buffer | Promise<Buffer>> = [];
    for (let block = first; block <= last; block++) blocks.push(found.get(block)!);
    return blocks;
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
  restoreRemoved(isReferenced: (sha256: string) => Promise<boolean>, keptMs: number): Promise<number> {
    return this.#store.restoreRemoved(isReferenced, keptMs);
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
