// The blob driver adapters a contract suite runs against, each a fresh store of its own per test
// (backstage's TestDatabases.eachSupportedId() is the model): the local directory always, the object
// store where the run started one and this is the pass on the shared backends (so that pass runs
// both). An adapter that cannot run here says why, and the suites name it as skipped.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { BlobDriver } from '../../storage/blob-driver.ts';
import { localBlobDriver } from '../../control-plane/blob-stores.ts';
import { S3Driver } from '../../storage/drivers/s3-driver.ts';
import { ensureBucket, keysUnder, objectStoreEndpoint, onObjectStore, testS3 } from './object-store.ts';

/** A driver under test, and what only its own store can show. */
export interface OpenedDriver {
  driver: BlobDriver;
  /** What failed or killed writes left in the store: temp files, temp objects, unfinished uploads. */
  leftovers(): Promise<string[]>;
  /** Leaves in the store what a write killed midway leaves. */
  killWrite(): Promise<void>;
  /** The same store opened again, as the next start opens it. */
  reopen(): Promise<BlobDriver>;
}

export interface DriverAdapter {
  name: string;
  /** Why it does not run here, when it does not. */
  skip?: string;
  /** A new, empty, initialised store; closed and removed when the test ends. */
  open(t: ExecutionContext): Promise<OpenedDriver>;
}

async function tempDir(t: ExecutionContext, parent = os.tmpdir()): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(parent, 'berth-driver-'));
  t.teardown(() => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * The local adapter as Berth lays it out (control-plane/blob-stores.ts): `blobs` fanned out in the root
 * itself, `exports` outside it, here on another file system where the machine has one (/dev/shm), and
 * any other folder a folder of the root.
 */
const local: DriverAdapter = {
  name: 'local',
  async open(t) {
    const root = await tempDir(t);
    const exports = path.join(await tempDir(t, fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()), 'exports');
    const make = () => localBlobDriver(root, exports);
    const opened: BlobDriver[] = [];
    const start = async () => {
      const driver = make();
      opened.push(driver);
      await driver.init();
      return driver;
    };
    t.teardown(async () => {
      for (const driver of opened) await driver.close();
    });
    const driver = await start();
    const temps = async (dir: string, match: (name: string) => boolean) =>
      (await fsp.readdir(dir).catch(() => [])).filter(match).map((name) => path.join(dir, name));
    return {
      driver,
      leftovers: async () => [
        ...(await temps(path.join(root, '.tmp'), () => true)),
        ...(await temps(exports, (name) => name.endsWith('.tmp'))),
      ],
      async killWrite() {
        await fsp.writeFile(path.join(root, '.tmp', 'killed'), 'half');
        await fsp.mkdir(exports, { recursive: true });
        await fsp.writeFile(path.join(exports, '.killed.tmp'), 'half');
      },
      reopen: start,
    };
  },
};

/** One bucket for every contract test, each test under a prefix of its own. */
const CONTRACT_BUCKET = 'berth-test-contracts';

const s3: DriverAdapter = {
  name: 's3',
  ...(onObjectStore
    ? {}
    : {
        skip: objectStoreEndpoint
          ? 'the object store runs only in the pass on the shared backends (BERTH_TEST_BACKEND=postgres)'
          : 'no object store (BERTH_TEST_S3_ENDPOINT is not set; test/run-suite.ts starts one)',
      }),
  async open(t) {
    await ensureBucket(CONTRACT_BUCKET);
    const prefix = `contract-${crypto.randomUUID()}/`;
    const at = {
      bucket: CONTRACT_BUCKET,
      prefix,
      endpoint: objectStoreEndpoint,
      region: 'us-east-1',
      forcePathStyle: true,
    };
    const client = testS3();
    const opened: BlobDriver[] = [];
    const start = async () => {
      const driver = new S3Driver(at);
      opened.push(driver);
      await driver.init();
      return driver;
    };
    const uploads = async () =>
      (await client.send(new ListMultipartUploadsCommand({ Bucket: CONTRACT_BUCKET, Prefix: prefix }))).Uploads ?? [];
    const keys = () => keysUnder(CONTRACT_BUCKET, prefix);
    t.teardown(async () => {
      for (const driver of opened) await driver.close();
      for (const key of await keys()) await client.send(new DeleteObjectCommand({ Bucket: CONTRACT_BUCKET, Key: key }));
      for (const upload of await uploads())
        await client.send(
          new AbortMultipartUploadCommand({ Bucket: CONTRACT_BUCKET, Key: upload.Key, UploadId: upload.UploadId }),
        );
    });
    const driver = await start();
    return {
      driver,
      leftovers: async () => [
        ...(await keys()).filter((key) => key.startsWith(`${prefix}tmp/`)),
        ...(await uploads()).map((upload) => `multipart ${upload.Key}`),
      ],
      async killWrite() {
        await client.send(new PutObjectCommand({ Bucket: CONTRACT_BUCKET, Key: `${prefix}tmp/killed`, Body: 'half' }));
        const started = await client.send(
          new CreateMultipartUploadCommand({ Bucket: CONTRACT_BUCKET, Key: `${prefix}tmp/killed-large` }),
        );
        await client.send(
          new UploadPartCommand({
            Bucket: CONTRACT_BUCKET,
            Key: `${prefix}tmp/killed-large`,
            UploadId: started.UploadId,
            PartNumber: 1,
            Body: Buffer.alloc(1024),
          }),
        );
      },
      reopen: start,
    };
  },
};

/** The adapters, in the order the suites run them; one that cannot run here has `skip` saying why. */
export function eachBlobDriver(): DriverAdapter[] {
  return [local, s3];
}
