// The blob driver port: bytes under keys, in a directory (drivers/local-driver.ts) or an S3-compatible
// bucket (drivers/s3-driver.ts). A driver knows nothing of digests, pins or Berth: the blob store
// (content-store.ts) builds content addressing, safe ages and sweeping on top of any driver, once.
//
// A key is `<folder>/<name>`: a folder of lower-case letters, digits and dashes (`tmp` is the drivers'
// own), and a name of letters, digits, `.`, `_` and `-` that starts with neither `.` nor ends in
// `.tmp`. Every write is whole or nothing: a reader sees the old object, the new one or none, never a
// part, and a write that fails leaves nothing behind once the driver has answered.
import type { Readable } from 'node:stream';

/** A byte range, inclusive `end`, as in HTTP. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface ObjectStat {
  bytes: number;
  /** When it was last written or touched, in ms since the epoch: the age sweeping goes by. */
  modifiedMs: number;
}

export interface ListedObject extends ObjectStat {
  key: string;
}

export interface PutOptions {
  /**
   * The key always holds these same bytes (it is named after them): a driver may keep an object that
   * is there already and only make it new (touch it) instead of writing it again.
   */
  immutable?: boolean;
  /** The object's media type, where the store keeps one. */
  contentType?: string;
}

export interface DeleteConditions {
  /** Kept when written or touched within this many ms. */
  minAgeMs: number;
  /** Asked last, just before the removal: true keeps the object. */
  keep?: () => boolean;
}

export interface BlobDriver {
  /** Where the bytes live, for start-up errors and logs: no credential is ever in it. */
  readonly location: string;
  /** Requests sent to the store so far, each attempt once; 0 for a directory. */
  readonly requests: number;
  /** Prepares the store and checks it answers; what killed writes left in a directory goes. */
  init(): Promise<void>;
  /** Resolves when a write could be made now (readiness). */
  writable(): Promise<void>;

  exists(key: string): Promise<boolean>;
  /** The object's size and age, or null when there is none. */
  stat(key: string): Promise<ObjectStat | null>;
  /** A stream of the object's bytes, never the whole object in memory; ObjectNotFoundError when there is none. */
  get(key: string): Promise<Readable>;
  /** A stream of a range of the object's bytes. */
  getRange(key: string, range: ByteRange): Promise<Readable>;
  /** The whole object in memory, for small ones. */
  getBytes(key: string): Promise<Buffer>;

  /** Stores `bytes` under `key`, durably, replacing what was there (unless `immutable` lets it keep it). */
  put(key: string, bytes: Uint8Array, options?: PutOptions): Promise<void>;
  /**
   * Stores what `source` yields. `key` may be a function, called once after the last byte is written
   * and before the object is placed, for callers that know the key only then (a digest of the bytes).
   * Whatever fails (the source, whose error is thrown as it is, the key function or the store),
   * nothing is kept.
   */
  putStream(key: string | (() => string), source: AsyncIterable<Uint8Array>, options?: PutOptions): Promise<void>;
  /**
   * Stores a local file that is whole and no longer written; returns its size. With `move` the driver
   * may take the file rather than copy it (it is gone afterwards); otherwise the file is left.
   */
  putFile(key: string, file: string, options?: PutOptions & { move?: boolean }): Promise<number>;

  /** Stores a copy of the object `from` under `to`, whole and durably; false when there is no `from`. */
  copy(from: string, to: string): Promise<boolean>;
  /** Makes the object new (its modified time now); false when there is none. */
  touch(key: string): Promise<boolean>;
  /**
   * Removes the object. With `conditions`, only if it is old enough and `keep` does not keep it, both
   * checked again just before the removal; false when it was kept or was not there.
   */
  delete(key: string, conditions?: DeleteConditions): Promise<boolean>;
  /** Every object in `folder`, in no particular order. */
  list(folder: string): AsyncIterable<ListedObject>;
  /** Removes what writes that were killed left (temp objects, unfinished uploads) once older than `minAgeMs`. */
  removeLeftovers(minAgeMs: number): Promise<number>;

  close(): Promise<void>;
}

/** A key the store does not have. */
export class ObjectNotFoundError extends Error {
  readonly code = 'ENOENT';
  constructor(readonly key: string) {
    super(`${key} is not in the store`);
    this.name = 'ObjectNotFoundError';
  }
}

/** The store did not answer or refused a request; the message names the store, never a credential. */
export class StorageUnavailableError extends Error {
  /** `reason`: what went wrong in a word or two (ECONNREFUSED, AccessDenied…), for public health checks. */
  constructor(
    message: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StorageUnavailableError';
  }
}

const FOLDER = /^[a-z0-9-]+$/;
const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

/** Whether a name may be the second half of a key. */
export const isKeyName = (name: string): boolean => NAME.test(name) && !name.endsWith('.tmp');

/** A key's folder and name, checked: a key never reaches outside its folder, or into a driver's temp files. */
export function splitKey(key: string): { folder: string; name: string } {
  const slash = key.indexOf('/');
  const folder = key.slice(0, slash);
  const name = key.slice(slash + 1);
  if (slash < 1 || !FOLDER.test(folder) || folder === 'tmp' || !isKeyName(name)) throw new Error(`not a key: ${key}`);
  return { folder, name };
}

/** Checks a folder name given to `list`. */
export function assertFolder(folder: string): void {
  if (!FOLDER.test(folder) || folder === 'tmp') throw new Error(`not a folder: ${folder}`);
}
