// The object store for the suite. `test/run-suite.ts` starts one S3-compatible server for the run
// (test/helpers/object-store-server.ts) and hands every test process its endpoint and credentials, the
// latter as AWS_* variables, where Berth's SDK finds them as it would on a real host. In the pass on
// the shared backends (BERTH_TEST_BACKEND=postgres) each data dir a test makes is one instance with a
// bucket of its own, and every server or admin command started on it is given that bucket.
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import type { ObjectStoreLocation } from '../../storage/drivers/s3-driver.ts';
import { onPostgres } from './postgres.ts';

/** The test server's endpoint, when the run started one. */
export const objectStoreEndpoint = process.env.BERTH_TEST_S3_ENDPOINT || undefined;

/** Whether this test process keeps Berth's blobs in the object store. */
export const onObjectStore = onPostgres && objectStoreEndpoint !== undefined;

let client: S3Client | undefined;

/** A client of the test server with the run's credentials. */
export function testS3(endpoint = objectStoreEndpoint): S3Client {
  if (!endpoint) throw new Error('no object store for the tests: run the suite with `make test` (test/run-suite.ts)');
  if (endpoint !== objectStoreEndpoint) {
    return new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }
  client ??= new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return client;
}

/** The bucket of a data dir: named after its path, so a restart on the same dir finds it again. */
export function bucketOf(dataDir: string): string {
  return `berth-test-${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 24)}`;
}

/** Creates a bucket unless it exists. */
export async function ensureBucket(bucket: string, s3 = testS3()): Promise<void> {
  try {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (err) {
    const name = (err as { name?: string }).name;
    if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw err;
  }
}

/** The data dir's bucket (made if needed), as Berth's configuration. */
export async function objectStoreFor(dataDir: string, prefix = ''): Promise<ObjectStoreLocation> {
  const bucket = bucketOf(dataDir);
  await ensureBucket(bucket);
  return { bucket, prefix, endpoint: objectStoreEndpoint!, region: 'us-east-1', forcePathStyle: true };
}

/** The environment that gives a server or admin command on `dataDir` its bucket, in the object-store pass. */
export async function objectStoreEnv(dataDir: string): Promise<Record<string, string>> {
  if (!onObjectStore) return {};
  const store = await objectStoreFor(dataDir);
  return {
    BERTH_OBJECT_STORE: `s3://${store.bucket}`,
    BERTH_S3_ENDPOINT: store.endpoint!,
    BERTH_S3_FORCE_PATH_STYLE: 'true',
  };
}

/** Keys under a prefix of the data dir's bucket. */
export function keysIn(dataDir: string, prefix: string): Promise<string[]> {
  return keysUnder(bucketOf(dataDir), prefix);
}

/** Keys under a prefix of a bucket. */
export async function keysUnder(bucket: string, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await testS3().send(
      new ListObjectsV2Command({
        Bucket: bucket,
        Prefix: prefix,
        ...(token ? { ContinuationToken: token } : {}),
      }),
    );
    keys.push(...(page.Contents ?? []).map((object) => object.Key!));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

/**
 * What interrupted or refused writes left in the instance's blob store: files in blobs/.tmp of the data
 * dir, or temp objects and unfinished multipart uploads in its bucket (`inBucket`: by default in the
 * object-store pass).
 */
export async function blobLeftovers(dataDir: string, inBucket = onObjectStore): Promise<string[]> {
  if (!inBucket) return fs.readdir(path.join(dataDir, 'blobs', '.tmp')).catch(() => []);
  const uploads = await testS3().send(new ListMultipartUploadsCommand({ Bucket: bucketOf(dataDir) }));
  return [...(await keysIn(dataDir, 'tmp/')), ...(uploads.Uploads ?? []).map((upload) => `multipart ${upload.Key}`)];
}

/** Whether the instance's blob store holds the blob. */
export async function blobStored(dataDir: string, sha256: string): Promise<boolean> {
  if (!onObjectStore) {
    return fs.access(path.join(dataDir, 'blobs', sha256.slice(0, 2), sha256)).then(
      () => true,
      () => false,
    );
  }
  return (await keysIn(dataDir, `blobs/${sha256}`)).length > 0;
}

/** Removes a finished export's file from the instance's store, as a damaged store would lose it. */
export async function removeExport(dataDir: string, id: string): Promise<void> {
  if (!onObjectStore) return fs.rm(path.join(dataDir, 'exports', `${id}.sql`));
  await testS3().send(new DeleteObjectCommand({ Bucket: bucketOf(dataDir), Key: `exports/${id}.sql` }));
}
