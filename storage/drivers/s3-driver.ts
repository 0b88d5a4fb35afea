// The blob driver on an S3-compatible bucket (AWS S3, R2, Ceph, MinIO, Garage…), through the AWS SDK.
// A key is the object `<prefix><key>`; `<prefix>tmp/` holds the streamed writes whose key is known only
// at their end. A write is confirmed by the store before the driver answers: a PUT, or a multipart
// upload's completion, is atomic, and a failed multipart upload is aborted. A stream named at its end
// goes to a temp object first, which the store then copies to its key. Every write and every touch
// rewrites the object, so its LastModified is the age sweeping goes by (touch() rewrites its metadata
// in place). Credentials come from the SDK's default chain, never from a Berth setting. GETs and the
// PUT of bytes in memory go out as direct requests first (s3-direct.ts), which leave to the SDK any
// answer but the expected one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Readable } from 'node:stream';
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
  assertFolder,
  type BlobDriver,
  type ByteRange,
  type DeleteConditions,
  isKeyName,
  type ListedObject,
  ObjectNotFoundError,
  type ObjectStat,
  type PutOptions,
  StorageUnavailableError,
  splitKey,
} from '../blob-driver.ts';
import { DirectRequests } from './s3-direct.ts';

/** A bucket and where it is (BERTH_OBJECT_STORE and BERTH_S3_*); credentials come from the SDK's default chain. */
export interface ObjectStoreLocation {
  bucket: string;
  /** '' or a prefix ending in '/'. */
  prefix: string;
  /** Any S3-compatible endpoint; unset: AWS S3 itself. */
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  /** How long a request may wait on the store with nothing arriving before it fails (default 30 s). */
  silenceMs?: number;
}

/** How long a connection may take, and a request may go with nothing arriving, before it counts as a failure. */
const CONNECT_TIMEOUT_MS = 3000;
const SILENCE_MS = 30_000;
/** The smallest part S3 takes: a streamed upload holds at most three of them in memory. */
const PART_BYTES = 5 * 1024 * 1024;

/** The object is not there; a 404 that names the bucket missing is the store being unavailable. */
const notFound = (err: unknown): boolean => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  if (e?.name === 'NoSuchBucket') return false;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
};

/** The source as a stream for the SDK, with the source's own failure kept apart from the store's. */
function sourceStream(source: AsyncIterable<Uint8Array>): { body: Readable; failure: () => unknown } {
  let failure: unknown;
  const body = Readable.from(
    (async function* () {
      try {
        yield* source;
      } catch (err) {
        failure = err;
        throw err;
      }
    })(),
  );
  return { body, failure: () => failure };
}

export class S3Driver implements BlobDriver {
  readonly #client: S3Client;
  readonly #at: ObjectStoreLocation;
  #direct: Promise<DirectRequests | null> | undefined;

  constructor(at: ObjectStoreLocation) {
    this.#at = at;
    this.#client = new S3Client({
      region: at.region,
      forcePathStyle: at.forcePathStyle,
      ...(at.endpoint ? { endpoint: at.endpoint } : {}),
      // Checksums only where the API requires them: servers other than AWS's refuse the SDK's
      // default trailing checksums, and every blob is checked by its SHA-256 where it matters.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // A socket timeout, not a request timeout: a long upload or a streamed read of a large file may take
      // any time while bytes move, and a store that stops answering fails the request (and its stream).
      requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, socketTimeout: at.silenceMs ?? SILENCE_MS },
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
      if (notFound(err) || err instanceof StorageUnavailableError) throw err;
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

  /** The direct requests, once the endpoint is resolved; null where every request goes through the SDK. */
  #directRequests(): Promise<DirectRequests | null> {
    this.#direct ??= DirectRequests.open(this.#client, {
      bucket: this.#at.bucket,
      forcePathStyle: this.#at.forcePathStyle,
      connectMs: CONNECT_TIMEOUT_MS,
      silenceMs: this.#at.silenceMs ?? SILENCE_MS,
      ...(this.#at.endpoint ? { endpoint: this.#at.endpoint } : {}),
    }).catch(() => null);
    return this.#direct;
  }

  /** The object's name in the bucket. */
  #object(key: string): string {
    splitKey(key);
    return `${this.#at.prefix}${key}`;
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

  async exists(key: string): Promise<boolean> {
    return (await this.stat(key)) !== null;
  }

  async stat(key: string): Promise<ObjectStat | null> {
    const object = this.#object(key);
    try {
      const head = await this.#send(`look up ${key}`, () =>
        this.#client.send(new HeadObjectCommand({ Bucket: this.#at.bucket, Key: object })),
      );
      return { bytes: head.ContentLength ?? 0, modifiedMs: head.LastModified?.getTime() ?? Date.now() };
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  get(key: string): Promise<Readable> {
    return this.#get(key);
  }

  /** A ranged GET, streamed as the store sends it. */
  getRange(key: string, range: ByteRange): Promise<Readable> {
    return this.#get(key, range);
  }

  async #get(key: string, range?: ByteRange): Promise<Readable> {
    const object = this.#object(key);
    const direct = await this.#directRequests();
    if (direct) {
      this.requests++;
      const read = await direct.get(object, range);
      if (read === 'missing') throw new ObjectNotFoundError(key);
      if (read) return read;
    }
    try {
      const answer = await this.#send(`read ${key}`, () =>
        this.#client.send(
          new GetObjectCommand({
            Bucket: this.#at.bucket,
            Key: object,
            ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
          }),
        ),
      );
      return answer.Body as Readable;
    } catch (err) {
      if (notFound(err)) throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async getBytes(key: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of await this.get(key)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /** One PUT, whether or not the key is there: writing it again costs what touching it would. */
  async put(key: string, bytes: Uint8Array, options: PutOptions = {}): Promise<void> {
    const object = this.#object(key);
    const direct = await this.#directRequests();
    if (direct) {
      this.requests++;
      if (await direct.put(object, bytes, options.contentType)) return;
    }
    await this.#send(`store ${key}`, () =>
      this.#client.send(
        new PutObjectCommand({
          Bucket: this.#at.bucket,
          Key: object,
          Body: bytes,
          ContentLength: bytes.length,
          ...(options.contentType ? { ContentType: options.contentType } : {}),
        }),
      ),
    );
  }

  /** Straight to its key when it is known; otherwise to a temp object, copied to its key once named. */
  async putStream(
    key: string | (() => string),
    source: AsyncIterable<Uint8Array>,
    options: PutOptions = {},
  ): Promise<void> {
    const { body, failure } = sourceStream(source);
    if (typeof key === 'string') {
      try {
        await this.#upload(this.#object(key), body, options.contentType, `store ${key}`);
      } catch (err) {
        throw failure() ?? err;
      }
      return;
    }
    const tmp = `${this.#at.prefix}tmp/${crypto.randomUUID()}`;
    try {
      await this.#upload(tmp, body, options.contentType, 'store a temp object');
      const named = key();
      const object = this.#object(named);
      await this.#send(`store ${named}`, () =>
        this.#client.send(
          new CopyObjectCommand({
            Bucket: this.#at.bucket,
            Key: object,
            CopySource: encodeURIComponent(`${this.#at.bucket}/${tmp}`),
            MetadataDirective: 'COPY',
          }),
        ),
      );
    } catch (err) {
      throw failure() ?? err;
    } finally {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: tmp })).catch(() => {});
    }
  }

  /** Uploaded in parts when large; the file is left where it is. */
  async putFile(key: string, file: string, options: PutOptions = {}): Promise<number> {
    const bytes = fs.statSync(file).size;
    await this.#upload(this.#object(key), fs.createReadStream(file), options.contentType, `store ${key}`);
    return bytes;
  }

  /** A PUT, or a multipart upload (by lib-storage) for a body past one part; a failed one is aborted, leaving no part. */
  async #upload(object: string, body: Readable, contentType: string | undefined, what: string): Promise<void> {
    const upload = new Upload({
      client: this.#client,
      params: {
        Bucket: this.#at.bucket,
        Key: object,
        Body: body,
        ...(contentType ? { ContentType: contentType } : {}),
      },
      partSize: PART_BYTES,
      queueSize: 2,
      leavePartsOnError: false,
    });
    try {
      await this.#send(what, () => upload.done());
    } catch (err) {
      // The body stops being read: a store that failed mid-upload leaves nothing waiting on it.
      body.destroy();
      await upload.abort().catch(() => {});
      throw err;
    }
  }

  /** A copy made by the store itself: the bytes do not pass through Berth. */
  async copy(from: string, to: string): Promise<boolean> {
    const source = this.#object(from);
    try {
      await this.#send(`copy ${from} to ${to}`, () =>
        this.#client.send(
          new CopyObjectCommand({
            Bucket: this.#at.bucket,
            Key: this.#object(to),
            CopySource: encodeURIComponent(`${this.#at.bucket}/${source}`),
            MetadataDirective: 'COPY',
          }),
        ),
      );
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
  }

  /** Rewrites the object's metadata in place, which makes its LastModified now. */
  async touch(key: string): Promise<boolean> {
    const object = this.#object(key);
    try {
      await this.#send(`touch ${key}`, () =>
        this.#client.send(
          new CopyObjectCommand({
            Bucket: this.#at.bucket,
            Key: object,
            CopySource: encodeURIComponent(`${this.#at.bucket}/${object}`),
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

  /**
   * With conditions, the object's age is read again just before it is deleted. A write by another
   * server in the moment between is the one window this leaves; `keep` covers this process's own.
   */
  async delete(key: string, conditions?: DeleteConditions): Promise<boolean> {
    const object = this.#object(key);
    if (conditions) {
      const stat = await this.stat(key);
      if (!stat || Date.now() - stat.modifiedMs < conditions.minAgeMs || conditions.keep?.()) return false;
    }
    await this.#send(`remove ${key}`, () =>
      this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: object })),
    );
    return true;
  }

  /**
   * Each object under `tree/` (relative to the store's prefix), a folder another program writes with
   * keys of its own (the database replicas), outside the folders of the blob store: its name relative
   * to the tree, and its bytes.
   */
  async *treeObjects(tree: string): AsyncIterable<{ name: string; bytes: number }> {
    for await (const { name, bytes } of this.#listObjects(this.#tree(tree))) yield { name, bytes };
  }

  /** Removes everything under `tree/`; returns how many objects it removed. */
  async removeTree(tree: string): Promise<number> {
    const prefix = this.#tree(tree);
    let removed = 0;
    for await (const object of this.#listObjects(prefix)) {
      await this.#send('remove an object of a tree', () =>
        this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: `${prefix}${object.name}` })),
      );
      removed++;
    }
    return removed;
  }

  #tree(tree: string): string {
    if (!/^[a-z][a-z0-9-]*(\/[0-9a-z-]+)*$/.test(tree)) throw new Error(`not a tree: ${tree}`);
    return `${this.#at.prefix}${tree}/`;
  }

  async *#listObjects(prefix: string): AsyncIterable<{ name: string; bytes: number; modifiedMs: number }> {
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
          name: (object.Key ?? prefix).slice(prefix.length),
          bytes: object.Size ?? 0,
          modifiedMs: object.LastModified?.getTime() ?? 0,
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async *list(folder: string): AsyncIterable<ListedObject> {
    assertFolder(folder);
    for await (const object of this.#listObjects(`${this.#at.prefix}${folder}/`)) {
      if (isKeyName(object.name))
        yield { key: `${folder}/${object.name}`, bytes: object.bytes, modifiedMs: object.modifiedMs };
    }
  }

  /** Temp objects and unfinished multipart uploads of writes that were killed. */
  async removeLeftovers(minAgeMs: number): Promise<number> {
    const now = Date.now();
    const tmp = `${this.#at.prefix}tmp/`;
    let removed = 0;
    for await (const object of this.#listObjects(tmp)) {
      if (now - object.modifiedMs < minAgeMs) continue;
      await this.#send('remove a temp object', () =>
        this.#client.send(new DeleteObjectCommand({ Bucket: this.#at.bucket, Key: `${tmp}${object.name}` })),
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
            Prefix: tmp,
            ...(keyMarker ? { KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker } : {}),
          }),
        ),
      );
      for (const upload of page.Uploads ?? []) {
        if (now - (upload.Initiated?.getTime() ?? now) < minAgeMs) continue;
        await this.#send('abort a multipart upload', () =>
          this.#client.send(
            new AbortMultipartUploadCommand({ Bucket: this.#at.bucket, Key: upload.Key, UploadId: upload.UploadId }),
          ),
        );
        removed++;
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.NextUploadIdMarker;
    } while (keyMarker);
    return removed;
  }

  async close(): Promise<void> {
    (await this.#direct)?.close();
    this.#client.destroy();
  }
}
