// The blob store on an S3-compatible bucket (AWS S3, R2, Ceph, MinIO, Garage…), through the AWS SDK.
// Keys under the configured prefix: blobs/<sha256>, exports/<id>.sql, and tmp/<uuid> for a streamed
// upload whose digest is not known until its last byte.
//
// A small body is hashed in memory and put under its digest at once. A larger one is streamed to a
// temp key (multipart, by lib-storage) while it is hashed, then copied to its digest's key by the
// store and the temp key deleted. Either way the blob's key is written by every put, even when the
// bytes were there already: its LastModified is then the time of the latest write, which is the age
// the sweeper goes by (as a local file's mtime). touch() rewrites an object's metadata in place for
// the same reason. Credentials come from the SDK's default chain, never from a Berth setting.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  assertDigest,
  BlobNotFoundError,
  BlobTooLargeError,
  type BlobStore,
  type ByteRange,
  isDigest,
  type ListedBlob,
  type PinnedBlob,
  Pins,
  SMALL_BLOB_BYTES,
  StorageUnavailableError,
} from './blob-store.ts';
import type { ObjectStoreLocation } from './drivers/s3-driver.ts';

/** How long a request may go without an answer before it counts as a failure. */
const CONNECT_TIMEOUT_MS = 3000;
const SOCKET_TIMEOUT_MS = 30_000;
/** The smallest part S3 takes: a streamed upload holds at most three of them in memory. */
const PART_BYTES = 5 * 1024 * 1024;

const notFound = (err: unknown): boolean => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
};

/** Counts and hashes what passes, and fails the stream past `maxBytes`. */
class Measure extends PassThrough {
  readonly hash = crypto.createHash('sha256');
  bytes = 0;
  constructor(readonly maxBytes: number) {
    super();
  }
  override _transform(
    chunk: Buffer,
    _encoding: BufferEncoding,
    done: (err?: Error | null, data?: Buffer) => void,
  ): void {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) return done(new BlobTooLargeError(this.maxBytes));
    this.hash.update(chunk);
    done(null, chunk);
  }
}

export class S3BlobStore implements BlobStore {
  readonly #client: S3Client;
  readonly #at: ObjectStoreLocation;
  readonly #pins = new Pins();
  /** How long after a write the sweeper may remove an unreferenced blob; a commit later than that fails. */
  readonly #safeAgeMs: number;

  constructor(at: ObjectStoreLocation, safeAgeMs: number) {
    this.#at = at;
    this.#safeAgeMs = safeAgeMs;
    this.#client = new S3Client({
      region: at.region,
      forcePathStyle: at.forcePathStyle,
      ...(at.endpoint ? { endpoint: at.endpoint } : {}),
      // Checksums only where the API requires them: servers other than AWS's refuse the SDK's
      // default trailing checksums, and every blob is checked by its SHA-256 where it matters.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, requestTimeout: SOCKET_TIMEOUT_MS },
    });
    // Counted where each attempt is sent (retries included), for the node's metrics.
    this.#client.middlewareStack.add(
      (next) => async (args) => {
        this.requests++;
        return next(args);
      },
      { step: 'finalizeRequest', name: 'berthCountRequests', priority: 'low' },
    );
  }

  /** Requests sent to the store, each attempt once. */
  requests = 0;

  get location(): string {
    return `the object store bucket ${this.#at.bucket}${this.#at.prefix ? ` (prefix ${this.#at.prefix})` : ''} at ${this.#at.endpoint ?? `AWS S3 in ${this.#at.region}`}`;
  }

  /** Runs one request; anything but a missing key becomes StorageUnavailableError naming the store. */
  async #send<T>(what: string, request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (err) {
      if (notFound(err) || err instanceof BlobTooLargeError || err instanceof StorageUnavailableError) throw err;
      const e = err as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
      const status = e.$metadata?.httpStatusCode;
      // An answer without a body (to a HEAD) has no error name: its status says what it was.
      const reason =
        status === 403 && (!e.name || e.name === 'Unknown' || e.name === '403')
          ? 'AccessDenied (HTTP 403)'
          : e.name && e.name !== 'Error' && e.name !== 'Unknown'
            ? e.name
            : status
              ? `HTTP ${status}`
              : (e.code ?? e.message ?? 'no answer');
      throw new StorageUnavailableError(`${this.location} failed to ${what}: ${reason}`, reason, { cause: err });
    }
  }

  #key(kind: 'blobs' | 'exports' | 'tmp' | 'database-copies', name: string): string {
    return `${this.#at.prefix}${kind}/${name}`;
  }

  #blobKey(sha256: string): string {
    assertDigest(sha256);
    return this.#key('blobs', sha256);
  }

  async init(): Promise<void> {
    await this.writable();
  }

  /** The bucket answers with these credentials. */
  async writable(): Promise<void> {
    try {
      await this.#send('answer for the bucket', () =>
        this.#client.send(new HeadBucketCommand({ Bucket: this.#at.bucket })),
      );
    } catch (err) {
      if (notFound(err))
        throw new StorageUnavailableError(`${this.location} does not exist: create the bucket first`, 'NoSuchBucket');
      throw err;
    }
  }

  async put(source: Readable, maxBytes: number): Promise<PinnedBlob> {
    // The first SMALL_BLOB_BYTES are read whole: a body that ends within them is put at once.
    const head: Buffer[] = [];
    let headBytes = 0;
    const iterator = source.iterator({ destroyOnReturn: false })[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    let ended = false;
    while (headBytes <= SMALL_BLOB_BYTES) {
      const next = await iterator.next();
      if (next.done) {
        ended = true;
        break;
      }
      headBytes += next.value.length;
      if (headBytes > maxBytes) throw new BlobTooLargeError(maxBytes);
      head.push(next.value);
    }
    if (ended) return this.#putWhole(Buffer.concat(head, headBytes));
    const rest = (async function* () {
      yield* head;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    })();
    return this.#putStreamed(Readable.from(rest), maxBytes);
  }

  async #putWhole(data: Buffer): Promise<PinnedBlob> {
    const sha256 = crypto.createHash('sha256').update(data).digest('hex');
    const unpin = this.#pins.pin(sha256);
    try {
      await this.#send('store a blob', () =>
        this.#client.send(
          new PutObjectCommand({
            Bucket: this.#at.bucket,
            Key: this.#blobKey(sha256),
            Body: data,
            ContentLength: data.length,
          }),
        ),
      );
    } catch (err) {
      unpin();
      throw err;
    }
    return { sha256, bytes: data.length, unpin, storedAt: Date.now() };
  }

  async #putStreamed(source: Readable, maxBytes: number): Promise<PinnedBlob> {
    const tmp = this.#key('tmp', crypto.randomUUID());
    const measure = new Measure(maxBytes);
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.#at.bucket, Key: tmp, Body: measure },
      partSize: PART_BYTES,
      queueSize: 2,
      // A failed upload aborts its multipart upload: no part is left behind.
      leavePartsOnError: false,
    });
    let unpin: (() => void) | undefined;
    try {
      const feeding = pipeline(source, measure);
      await Promise.all([this.#send('store a blob', () => upload.done()), feeding]);
      const sha256 = measure.hash.digest('hex');
      unpin = this.#pins.pin(sha256);
      await this.#send('store a blob', () =>
        this.#client.send(
          new CopyObjectCommand({
            Bucket: this.#at.bucket,
            Key: this.#blobKey(sha256),
            CopySource: encodeURIComponent(`${this.#at.bucket}/${tmp}`),
            MetadataDirective: 'COPY',
          }),
        ),
      );
      return { sha256, bytes: measure.bytes, unpin, storedAt: Date.now() };
    } catch (err) {
      unpin?.();
      // The body stops being read: a store that failed mid-upload leaves nothing waiting on it.
      measure.destroy();
      await upload.abort().catch(() => {});
      throw err instanceof BlobTooLargeError || measure.errored instanceof BlobTooLargeError
        ? new BlobTooLargeError(maxBytes)
        : err;
    } finally {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: tmp })).catch(() => {});
    }
  }

  isPinned(sha256: string): boolean {
    return this.#pins.has(sha256);
  }

  /**
   * Every put wrote the blob's key: the sweeper leaves it alone for its safe age from then, so only a
   * write slower than that asks the store.
   */
  async stillStored(blob: PinnedBlob): Promise<boolean> {
    return Date.now() - blob.storedAt < this.#safeAgeMs || this.has(blob.sha256);
  }

  /** Rewrites the object's metadata in place, which makes its LastModified now. */
  async touch(sha256: string): Promise<boolean> {
    try {
      await this.#send('touch a blob', () =>
        this.#client.send(
          new CopyObjectCommand({
            Bucket: this.#at.bucket,
            Key: this.#blobKey(sha256),
            CopySource: encodeURIComponent(`${this.#at.bucket}/${this.#blobKey(sha256)}`),
            MetadataDirective: 'REPLACE',
            Metadata: { touched: new Date().toISOString() },
          }),
        ),
      );
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
  }

  async has(sha256: string): Promise<boolean> {
    return (await this.sizeOf(sha256)) !== null;
  }

  /** The stored blob's size, or null when the store does not have it. */
  async sizeOf(sha256: string): Promise<number | null> {
    try {
      const head = await this.#send('look up a blob', () =>
        this.#client.send(new HeadObjectCommand({ Bucket: this.#at.bucket, Key: this.#blobKey(sha256) })),
      );
      return head.ContentLength ?? 0;
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  /** Whether the store has the export. */
  async hasExport(id: string): Promise<boolean> {
    try {
      await this.#send('look up an export', () =>
        this.#client.send(new HeadObjectCommand({ Bucket: this.#at.bucket, Key: this.#key('exports', `${id}.sql`) })),
      );
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
  }

  async read(sha256: string): Promise<Buffer> {
    const body = await this.stream(sha256);
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /** A GET of the object, or of its range, streamed as the store sends it. */
  async stream(sha256: string, range?: ByteRange): Promise<Readable> {
    try {
      const answer = await this.#send('read a blob', () =>
        this.#client.send(
          new GetObjectCommand({
            Bucket: this.#at.bucket,
            Key: this.#blobKey(sha256),
            ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
          }),
        ),
      );
      return answer.Body as Readable;
    } catch (err) {
      if (notFound(err)) throw new BlobNotFoundError(sha256);
      throw err;
    }
  }

  async *#listKeys(kind: 'blobs' | 'tmp'): AsyncIterable<{ name: string; bytes: number; modifiedMs: number }> {
    const prefix = this.#key(kind, '');
    let token: string | undefined;
    do {
      const page = await this.#send('list objects', () =>
        this.#client.send(
          new ListObjectsV2Command({
            Bucket: this.#at.bucket,
            Prefix: prefix,
            ...(token ? { ContinuationToken: token } : {}),
          }),
        ),
      );
      for (const object of page.Contents ?? []) {
        yield {
          name: object.Key!.slice(prefix.length),
          bytes: object.Size ?? 0,
          modifiedMs: object.LastModified?.getTime() ?? 0,
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async *list(): AsyncIterable<ListedBlob> {
    for await (const object of this.#listKeys('blobs')) {
      if (isDigest(object.name)) yield { sha256: object.name, bytes: object.bytes, modifiedMs: object.modifiedMs };
    }
  }

  /**
   * The object's age is read again just before it is deleted. A put by another server in the moment
   * between is the one window this leaves; a write of this process is kept off by its pin.
   */
  async remove(sha256: string, minAgeMs: number): Promise<boolean> {
    let modifiedMs: number;
    try {
      const head = await this.#send('look up a blob', () =>
        this.#client.send(new HeadObjectCommand({ Bucket: this.#at.bucket, Key: this.#blobKey(sha256) })),
      );
      modifiedMs = head.LastModified?.getTime() ?? Date.now();
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
    if (Date.now() - modifiedMs < minAgeMs || this.#pins.has(sha256)) return false;
    await this.#send('remove a blob', () =>
      this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: this.#blobKey(sha256) })),
    );
    return true;
  }

  /** Temp objects and unfinished multipart uploads of writes that were killed. */
  async sweepLeftovers(minAgeMs: number): Promise<number> {
    const now = Date.now();
    let removed = 0;
    for await (const object of this.#listKeys('tmp')) {
      if (now - object.modifiedMs < minAgeMs) continue;
      await this.#send('remove a temp object', () =>
        this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: this.#key('tmp', object.name) })),
      );
      removed++;
    }
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      const page = await this.#send('list multipart uploads', () =>
        this.#client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.#at.bucket,
            Prefix: this.#key('tmp', ''),
            ...(keyMarker ? { KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker } : {}),
          }),
        ),
      );
      for (const upload of page.Uploads ?? []) {
        if (now - (upload.Initiated?.getTime() ?? now) < minAgeMs) continue;
        await this.#send('abort a multipart upload', () =>
          this.#client.send(
            new AbortMultipartUploadCommand({ Bucket: this.#at.bucket, Key: upload.Key!, UploadId: upload.UploadId! }),
          ),
        );
        removed++;
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.NextUploadIdMarker;
    } while (keyMarker);
    return removed;
  }

  putExport(id: string, file: string): Promise<number> {
    return this.#putFile(this.#key('exports', `${id}.sql`), file, 'application/sql', 'store an export');
  }

  openExport(id: string): Promise<Readable | null> {
    return this.#openObject(this.#key('exports', `${id}.sql`), 'read an export');
  }

  /** One object per site, replaced whole by each copy: a PUT (or a multipart upload's completion) is atomic. */
  putDatabaseCopy(siteId: string, file: string): Promise<number> {
    return this.#putFile(
      this.#key('database-copies', `${siteId}.sqlite`),
      file,
      'application/vnd.sqlite3',
      'store a copy of a site database',
    );
  }

  openDatabaseCopy(siteId: string): Promise<Readable | null> {
    return this.#openObject(this.#key('database-copies', `${siteId}.sqlite`), 'read a copy of a site database');
  }

  /** Uploads a local file under `key` (in parts when large); returns its size. */
  async #putFile(key: string, file: string, contentType: string, what: string): Promise<number> {
    const bytes = fs.statSync(file).size;
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.#at.bucket, Key: key, Body: fs.createReadStream(file), ContentType: contentType },
      partSize: PART_BYTES,
      queueSize: 2,
      leavePartsOnError: false,
    });
    await this.#send(what, () => upload.done());
    return bytes;
  }

  /** A stream of the object at `key`, or null when there is none. */
  async #openObject(key: string, what: string): Promise<Readable | null> {
    try {
      const answer = await this.#send(what, () =>
        this.#client.send(new GetObjectCommand({ Bucket: this.#at.bucket, Key: key })),
      );
      return answer.Body as Readable;
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  async removeDatabaseCopy(siteId: string): Promise<void> {
    await this.#send('remove a copy of a site database', () =>
      this.#client.send(
        new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: this.#key('database-copies', `${siteId}.sqlite`) }),
      ),
    );
  }

  async close(): Promise<void> {
    this.#client.destroy();
  }
}
