// Blobs on an S3-compatible object store (Ceph's radosgw, started by test/run-suite.ts): what the
// operator sees when it is missing or refuses, moving an instance into it, a kill in the middle of
// uploads, an outage while serving, a store that hangs while an upload commits, backups that leave
// the blobs in it, and the driver's direct requests. The rest of the suite runs on it too in the pass
// on the shared backends.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import got from 'got';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { apiClient, createSite, deployFixture, json, makeDataDir, putFile, startTestBerth } from './helpers/berth.ts';
import { StorageUnavailableError } from '../storage/blob-driver.ts';
import { S3Driver } from '../storage/drivers/s3-driver.ts';
import {
  blobLeftovers,
  bucketOf,
  ensureBucket,
  keysIn,
  keysUnder,
  objectStoreEndpoint,
  objectStoreFor,
  testS3,
} from './helpers/object-store.ts';
import { startObjectStoreServer } from './helpers/object-store-server.ts';
import { onPostgres } from './helpers/postgres.ts';
import { type ServeProcess, runBerth, startServe } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';
import { until } from './helpers/until.ts';

const s3test = objectStoreEndpoint ? test : test.skip;
const sha256 = (bytes: Buffer) => crypto.createHash('sha256').update(bytes).digest('hex');

/** The environment that puts a server or command on `dataDir` on its bucket. */
async function storeEnv(dataDir: string, prefix = ''): Promise<Record<string, string>> {
  const store = await objectStoreFor(dataDir);
  return {
    BERTH_OBJECT_STORE: `s3://${store.bucket}${prefix ? `/${prefix}` : ''}`,
    BERTH_S3_ENDPOINT: store.endpoint!,
    BERTH_S3_FORCE_PATH_STYLE: 'true',
  };
}

async function serve(t: ExecutionContext, env: Record<string, string>): Promise<ServeProcess> {
  const server = await startServe(env);
  t.teardown(async () => {
    server.child.kill('SIGKILL');
    await server.exited;
  });
  return server;
}

s3test(
  'a bucket that does not exist, or credentials it refuses, stop the start with one line naming the store and nothing secret',
  async (t) => {
    const dataDir = await makeDataDir(t);
    const missing = await runBerth(['serve'], {
      BERTH_DATA_DIR: dataDir,
      BERTH_OBJECT_STORE: 's3://berth-no-such-bucket/site-files',
      BERTH_S3_ENDPOINT: objectStoreEndpoint!,
      BERTH_S3_FORCE_PATH_STYLE: 'true',
    });
    t.is(missing.code, 1);
    t.is(
      missing.stderr,
      `berth: the object store bucket berth-no-such-bucket (prefix site-files/) at ${objectStoreEndpoint} does not exist: create the bucket first\n`,
    );

    const secret = 'not-the-secret-0123456789';
    const refused = await runBerth(['serve'], {
      BERTH_DATA_DIR: dataDir,
      ...(await storeEnv(dataDir)),
      AWS_SECRET_ACCESS_KEY: secret,
    });
    t.is(refused.code, 1);
    t.regex(
      refused.stderr,
      new RegExp(
        `^berth: the object store bucket ${bucketOf(dataDir)} at ${objectStoreEndpoint} failed to answer for the bucket: AccessDenied \\(HTTP 403\\): check the credentials`,
      ),
    );
    t.is(refused.stderr.split('\n').length, 2, 'one line');
    t.false(refused.stderr.includes(secret));

    const badUrl = await runBerth(['serve'], { BERTH_DATA_DIR: dataDir, BERTH_OBJECT_STORE: 'https://bucket' });
    t.is(badUrl.code, 2);
    t.regex(badUrl.stderr, /BERTH_OBJECT_STORE must be s3:\/\/<bucket>\[\/<prefix>\]/);
  },
);

s3test(
  'copy-blobs moves a stopped instance’s blobs and exports into the store, checks each, copies nothing twice, and the instance then serves from it',
  async (t) => {
    const dataDir = await makeDataDir(t);
    const local = { BERTH_DATA_DIR: dataDir, BERTH_OBJECT_STORE: '' };
    const first = await serve(t, local);
    const { writeKey: key, id: accountId, api } = ownerOf(first);
    const site = json<{ id: string; subdomain: string; bucketId: string }>(
      await api.post('v0/sites', { json: { accountId, name: 'moving' } }),
    );
    const page = Buffer.from('<h1>moved</h1>');
    const big = crypto.randomBytes(6 * 1024 * 1024);
    t.is(
      (
        await api.put(`v0/buckets/${site.bucketId}/objects/web/index.html`, {
          body: page,
          headers: { 'content-type': 'text/html' },
        })
      ).statusCode,
      200,
    );
    t.is((await api.put(`v0/buckets/${site.bucketId}/objects/web/big.bin`, { body: big })).statusCode, 200);
    t.is(
      (
        await api.put(`v0/buckets/${site.bucketId}/objects/web/copy.html`, {
          body: page,
          headers: { 'content-type': 'text/html' },
        })
      ).statusCode,
      200,
    );
    const db = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
    const base = `v0/sites/${site.id}/databases/${db.id}`;
    for (const sql of ['CREATE TABLE t (x)', "INSERT INTO t VALUES ('exported')"])
      t.is((await api.post(`${base}/query`, { json: { sql } })).statusCode, 200);
    const exported = json<{ export: { id: string } }>(await api.post(`${base}/exports`)).export;
    await until(
      async () =>
        json<{ export: { status: string } }>(await api.post(`${base}/exports/${exported.id}/reconcile`)).export
          .status === 'COMPLETE',
      'the export',
    );

    const target = await storeEnv(dataDir, 'moved');
    const copy = ['admin', 'copy-blobs', '--to', target.BERTH_OBJECT_STORE!, '--json'];
    const withTarget = { ...local, BERTH_S3_ENDPOINT: target.BERTH_S3_ENDPOINT!, BERTH_S3_FORCE_PATH_STYLE: 'true' };
    const busy = await runBerth(copy, withTarget);
    t.is(busy.code, 1, 'a running server’s blobs are not copied');
    t.regex(busy.stderr, /stop it first/);

    first.child.kill('SIGTERM');
    await first.exited;
    const copied = await runBerth(copy, withTarget);
    t.is(copied.code, 0, copied.stderr);
    t.like(JSON.parse(copied.stdout), {
      blobs: { copied: 2, present: 0, bytes: page.length + big.length },
      exports: { copied: 1, present: 0 },
    });
    t.deepEqual(
      (await keysIn(dataDir, 'moved/blobs/')).sort(),
      [`moved/blobs/${sha256(page)}`, `moved/blobs/${sha256(big)}`].sort(),
    );
    const again = await runBerth(copy, withTarget);
    t.is(again.code, 0, again.stderr);
    t.like(JSON.parse(again.stdout), { blobs: { copied: 0, present: 2 }, exports: { copied: 0, present: 1 } });
    const text = await runBerth(copy.slice(0, -1), withTarget);
    t.regex(
      text.stdout,
      new RegExp(
        `To switch, start Berth with the same data dir and metadata, and\\n  BERTH_OBJECT_STORE=${target.BERTH_OBJECT_STORE}`,
      ),
    );

    // The local blobs are gone: what the switched instance serves comes from the store.
    await fsp.rename(path.join(dataDir, 'blobs'), path.join(dataDir, 'blobs.old'));
    await fsp.rm(path.join(dataDir, 'exports'), { recursive: true });
    const switched = await serve(t, { ...local, ...target });
    const host = { host: `${site.subdomain}.localhost` };
    const served = await apiClient(switched.url).get('', { headers: host, responseType: 'buffer' });
    t.is(served.statusCode, 200);
    t.deepEqual(served.body, page);
    const ranged = await apiClient(switched.url).get('big.bin', {
      headers: { ...host, range: 'bytes=1000-1999' },
      responseType: 'buffer',
    });
    t.is(ranged.statusCode, 206);
    t.deepEqual(ranged.body, big.subarray(1000, 2000));
    const reconciled = await apiClient(switched.url, key).post(`${base}/exports/${exported.id}/reconcile`);
    t.is(reconciled.statusCode, 200, JSON.stringify(reconciled.body));
    const dump = await got.get(json<{ export: { downloadUrl: string } }>(reconciled).export.downloadUrl);
    t.is(dump.statusCode, 200);
    t.regex(dump.body, /exported/);
  },
);

s3test(
  'kill -9 during uploads to the store: no version points at a missing object, and the sweeper removes the orphans',
  async (t) => {
    const dataDir = await makeDataDir(t);
    const env = { BERTH_DATA_DIR: dataDir, ...(await storeEnv(dataDir)) };
    const server = await serve(t, env);
    const { writeKey: key, id: accountId, api } = ownerOf(server);
    const site = json<{ bucketId: string }>(await api.post('v0/sites', { json: { accountId, name: 'killed' } }));

    // Small uploads in flight, and a large one whose first part is in the store as a multipart upload.
    const url = new URL(server.url);
    const large = http.request({
      host: url.hostname,
      port: url.port,
      method: 'PUT',
      path: `/v0/buckets/${site.bucketId}/objects/web/large.bin`,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/octet-stream',
        'content-length': String(64 * 1024 * 1024),
      },
    });
    large.on('error', () => {});
    large.write(crypto.randomBytes(12 * 1024 * 1024));
    let stop = false;
    const acknowledged: Array<{ path: string; body: Buffer }> = [];
    const small = Array.from({ length: 4 }, async (_, worker) => {
      for (let i = 0; !stop; i++) {
        const body = crypto.randomBytes(4096);
        const filePath = `web/small-${worker}-${i}.bin`;
        const res = await api
          .put(`v0/buckets/${site.bucketId}/objects/${filePath}`, { body, retry: { limit: 0 } })
          .catch(() => null);
        if (res?.statusCode === 200) acknowledged.push({ path: filePath, body });
      }
    });
    await until(
      async () =>
        acknowledged.length >= 8 && (await blobLeftovers(dataDir, true)).some((name) => name.startsWith('multipart ')),
      'small uploads, and the large one to reach the store',
    );
    server.child.kill('SIGKILL');
    await server.exited;
    stop = true;
    large.destroy();
    await Promise.all(small);

    // An object no version references, as a write killed between the store and the commit leaves.
    const orphan = crypto.randomBytes(100);
    await testS3().send(
      new PutObjectCommand({ Bucket: bucketOf(dataDir), Key: `blobs/${sha256(orphan)}`, Body: orphan }),
    );

    const again = await serve(t, { ...env, BERTH_BLOB_SWEEP_MS: '1000' });
    const api2 = apiClient(again.url, key);
    for (const { path: filePath, body } of acknowledged) {
      const read = await api2.get(`v0/buckets/${site.bucketId}/objects/${filePath}`, { responseType: 'buffer' });
      t.is(read.statusCode, 200, filePath);
      t.deepEqual(read.body, body);
    }
    const listed: Array<{ path: string }> = [];
    for (let offset: number | null = 0; offset !== null; ) {
      const page: { files: Array<{ path: string }>; pagination: { nextOffset: number | null } } = json(
        await api2.get(`v0/buckets/${site.bucketId}/objects?limit=200&offset=${offset}`),
      );
      listed.push(...page.files);
      offset = page.pagination.nextOffset;
    }
    for (const file of listed)
      t.is(
        (await api2.get(`v0/buckets/${site.bucketId}/objects/${file.path}`, { responseType: 'buffer' })).statusCode,
        200,
        `${file.path} has its bytes`,
      );
    t.false(listed.some((file) => file.path === 'web/large.bin'));
    await until(
      async () => (await blobLeftovers(dataDir, true)).length === 0,
      'the sweeper to remove the temp objects and the unfinished upload',
    );
    await until(
      async () => !(await keysIn(dataDir, 'blobs/')).includes(`blobs/${sha256(orphan)}`),
      'the sweeper to remove the orphan',
    );
    t.regex(again.output(), /removed blobs no file version references/);
  },
);

// Serial: it sets the credentials of the process's environment for a moment, where the SDK finds them.
(objectStoreEndpoint ? test.serial : test.skip)(
  'the driver signs its direct requests for keys under any prefix, one request each, and leaves a refused one to the SDK, which names the failure',
  async (t) => {
    const bucket = 'berth-test-direct';
    await ensureBucket(bucket);
    const prefix = `site files/ü+(${crypto.randomUUID()})*/`;
    const at = { bucket, prefix, endpoint: objectStoreEndpoint!, region: 'us-east-1', forcePathStyle: true };
    const driver = new S3Driver(at);
    t.teardown(() => driver.close());
    await driver.init();
    const data = crypto.randomBytes(5000);
    const requests = async (sent: S3Driver, run: () => Promise<unknown>) => {
      const before = sent.requests;
      await run();
      return sent.requests - before;
    };
    t.is(await requests(driver, () => driver.put('blobs/direct', data)), 1);
    t.deepEqual(await keysUnder(bucket, prefix), [`${prefix}blobs/direct`], 'stored under its key, encoded once');
    t.is(await requests(driver, async () => t.true((await driver.getBytes('blobs/direct')).equals(data))), 1);
    const range = async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of await driver.getRange('blobs/direct', { start: 100, end: 4099 })) chunks.push(chunk);
      t.true(Buffer.concat(chunks).equals(data.subarray(100, 4100)));
    };
    t.is(await requests(driver, range), 1);

    // Credentials the store refuses: each direct request is refused, and the SDK, asked again, says why.
    const secret = process.env.AWS_SECRET_ACCESS_KEY;
    process.env.AWS_SECRET_ACCESS_KEY = 'not-the-secret-0123456789';
    const refused = new S3Driver(at);
    t.teardown(() => refused.close());
    try {
      for (const [what, run] of [
        ['store blobs/direct', () => refused.put('blobs/direct', data)],
        ['read blobs/direct', () => refused.getBytes('blobs/direct')],
      ] as const) {
        let failure: StorageUnavailableError | undefined;
        const sent = await requests(refused, () =>
          run().catch((err: StorageUnavailableError) => {
            failure = err;
          }),
        );
        t.true(failure instanceof StorageUnavailableError, what);
        t.is(failure?.reason, 'SignatureDoesNotMatch', what);
        t.true(failure?.message.startsWith(`the object store bucket ${bucket}`), what);
        t.true(failure?.message.endsWith(`failed to ${what}: SignatureDoesNotMatch`), what);
        t.true(sent >= 2, `${what}: the direct request, then the SDK’s`);
      }
    } finally {
      process.env.AWS_SECRET_ACCESS_KEY = secret;
    }
  },
);

(objectStoreEndpoint ? test : test.skip)(
  'a bucket removed under a running driver: writes and reads fail as the store being unavailable, naming NoSuchBucket, never as a missing object',
  async (t) => {
    const bucket = `berth-test-gone-${crypto.randomUUID().slice(0, 8)}`;
    await ensureBucket(bucket);
    const driver = new S3Driver({
      bucket,
      prefix: '',
      endpoint: objectStoreEndpoint!,
      region: 'us-east-1',
      forcePathStyle: true,
    });
    t.teardown(() => driver.close());
    await driver.init();
    await testS3().send(new DeleteBucketCommand({ Bucket: bucket }));
    const data = crypto.randomBytes(100);
    for (const [what, run] of [
      ['store blobs/gone', () => driver.put('blobs/gone', data)],
      ['read blobs/gone', () => driver.getBytes('blobs/gone')],
      ['read blobs/gone', () => driver.getRange('blobs/gone', { start: 0, end: 9 })],
    ] as const) {
      const failure = await t.throwsAsync(run());
      t.true(failure instanceof StorageUnavailableError, `${what}: ${failure?.name}`);
      t.is((failure as StorageUnavailableError).reason, 'NoSuchBucket', what);
      t.true(failure?.message.endsWith(`failed to ${what}: NoSuchBucket`), failure?.message);
    }
  },
);

/**
 * A Berth on a gateway of the test's own (which the test may stop, freeze or thaw), in a new bucket;
 * `overrides` change the store's settings and Berth's.
 */
async function berthOnOwnStore(
  t: ExecutionContext,
  bucket: string,
  overrides: { silenceMs?: number; blobSweepMs?: number } = {},
) {
  const store = await startObjectStoreServer({
    accessKeyId: process.env.AWS_ACCESS_KEY_ID!,
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY!,
  });
  t.teardown(() => store.stop());
  await testS3(store.endpoint).send(new CreateBucketCommand({ Bucket: bucket }));
  const { silenceMs, blobSweepMs } = overrides;
  const berth = await startTestBerth({
    objectStore: {
      bucket,
      prefix: '',
      endpoint: store.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      ...(silenceMs !== undefined ? { silenceMs } : {}),
    },
    ...(blobSweepMs !== undefined ? { blobSweepMs } : {}),
  });
  t.teardown(() => berth.dispose());
  return { store, berth };
}

s3test(
  'while the store is down, uploads answer 503 storage_unavailable and store nothing, cached reads are answered, readyz names it, and Berth recovers',
  async (t) => {
    const { store, berth } = await berthOnOwnStore(t, 'berth-outage');
    const site = await createSite(berth.owner);
    await putFile(berth.owner, site.bucketId, 'web/index.html', '<p>cached</p>', 'text/html');
    await putFile(berth.owner, site.bucketId, 'web/big.bin', crypto.randomBytes(512 * 1024));
    await deployFixture(berth.owner, site.bucketId, 'filler');
    t.is((await berth.site(site.subdomain).get('')).body, '<p>cached</p>');
    const range = { range: 'bytes=70000-70099' };
    const ranged = await berth.site(site.subdomain).get('big.bin', { headers: range, responseType: 'buffer' });
    t.is(ranged.statusCode, 206);

    // A steady write load across the outage: every answer is a success or storage_unavailable.
    let stop = false;
    t.teardown(() => {
      stop = true;
    });
    const answers: Array<{ status: number; code?: string; path: string }> = [];
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        const filePath = `web/load-${i}.txt`;
        const res = await berth.owner.api.put(`v0/buckets/${site.bucketId}/objects/${filePath}`, {
          body: `load ${i}`,
          retry: { limit: 0 },
        });
        answers.push({
          status: res.statusCode,
          code: res.statusCode === 200 ? undefined : json<{ error: { code: string } }>(res).error.code,
          path: filePath,
        });
      }
    })();
    await until(() => answers.length >= 3, 'writes before the outage');
    await store.pause();

    const refused = await berth.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/during.txt`, {
      body: 'during',
      retry: { limit: 0 },
    });
    t.is(refused.statusCode, 503);
    t.is(json<{ error: { code: string } }>(refused).error.code, 'storage_unavailable');
    t.is(
      (await berth.owner.read.get(`v0/buckets/${site.bucketId}/objects/web/during.txt`)).statusCode,
      404,
      'nothing of it was stored',
    );
    // MCP reports the outage as REST does, not as a failure of its own.
    const mcp = new McpClient({ name: 'berth-test', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${berth.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${berth.owner.writeKey}` } },
      }),
    );
    t.teardown(() => mcp.close());
    const viaMcp = (await mcp.callTool({
      name: 'write_file',
      arguments: { bucketId: site.bucketId, path: 'web/during-mcp.txt', content: 'during' },
    })) as { isError?: boolean; structuredContent?: { error?: { code: string } } };
    t.true(viaMcp.isError);
    t.is(viaMcp.structuredContent?.error?.code, 'storage_unavailable');
    const cached = await berth.site(site.subdomain).get('');
    t.is(cached.statusCode, 200, 'a small page read before is answered from memory');
    t.is(cached.body, '<p>cached</p>');
    const uncached = await berth.site(site.subdomain).get('big.bin');
    t.is(uncached.statusCode, 503);
    const rangedAgain = await berth.site(site.subdomain).get('big.bin', { headers: range, responseType: 'buffer' });
    t.is(rangedAgain.statusCode, 206, 'a range of a large file read before is answered from memory');
    t.true(rangedAgain.body.equals(ranged.body));
    const filled: unknown = JSON.parse((await berth.site(site.subdomain).post('api/filler')).body);
    t.deepEqual(filled, {
      written: 0,
      error: {
        code: 'DATA_STORAGE_UNAVAILABLE',
        status: 503,
        message: 'the file store is not answering; nothing was stored, try again shortly',
      },
    });
    const ready = await berth.anonymous.get('readyz', { responseType: 'json' });
    t.is(ready.statusCode, 503);
    t.regex((ready.body as { checks: { blobs: string } }).checks.blobs, /^the blob store is not answering \(\S+\)$/);
    t.false(JSON.stringify(ready.body).includes(store.endpoint), 'the public check does not name the endpoint');

    await store.resume();
    await until(async () => (await berth.anonymous.get('readyz')).statusCode === 200, 'readyz to recover');
    await until(() => answers.at(-1)?.status === 200, 'writes to succeed again');
    stop = true;
    await load;
    t.true(
      answers.some((a) => a.status === 503),
      'the load met the outage',
    );
    t.deepEqual(
      [...new Set(answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.code}`))],
      ['503 storage_unavailable'],
    );
    for (const answer of answers) {
      const read = await berth.owner.read.get(`v0/buckets/${site.bucketId}/objects/${answer.path}`, {
        responseType: 'text',
      });
      t.is(read.statusCode, answer.status === 200 ? 200 : 404, `${answer.path} was ${answer.status}`);
    }
    t.is((await berth.site(site.subdomain).get('big.bin', { responseType: 'buffer' })).statusCode, 200);
  },
);

s3test(
  'an upload whose bytes outlived the safe age asks the store about them outside its transaction: other writes go on while the store hangs',
  async (t) => {
    // The sweepers' minimum age: an upload not committed by then must make sure its bytes are still there.
    const safeAgeMs = 2000;
    const { store, berth } = await berthOnOwnStore(t, 'berth-hanging', { blobSweepMs: safeAgeMs });
    const s3 = testS3(store.endpoint);
    const site = await createSite(berth.owner);
    const filePath = 'web/page.html';
    const url = `v0/buckets/${site.bucketId}/objects/${filePath}`;
    await putFile(berth.owner, site.bucketId, filePath, '<p>first</p>', 'text/html');

    // Another writer holds what the upload's transaction needs (on SQLite the one metadata connection,
    // on PostgreSQL the file's row) until the upload's bytes are older than the safe age.
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const holding = berth.berth.deps.db.transaction(async (trx) => {
      const row = trx('files').where({ bucket_id: site.bucketId, path: filePath });
      await (onPostgres ? row.forUpdate() : row);
      locked();
      await held;
    });
    await isLocked;
    const body = crypto.randomBytes(1024);
    let answered = false;
    const upload = berth.owner.api.put(url, { body }).finally(() => {
      answered = true;
    });
    const storedAt = await until(
      async () =>
        (
          await s3
            .send(new HeadObjectCommand({ Bucket: 'berth-hanging', Key: `blobs/${sha256(body)}` }))
            .catch(() => undefined)
        )?.LastModified,
      'the upload’s bytes in the store',
    );
    // The upload's clock starts as it sends its bytes, before the store's LastModified, which is in whole
    // seconds: a second past the safe age by LastModified is past it by the upload's clock too. No
    // longer: the upload's statement waits on the lock meanwhile, within the metadata's deadline (8 s).
    await until(() => Date.now() - storedAt.getTime() > safeAgeMs + 1200, 'the bytes to pass the safe age');

    store.freeze();
    // Run first, whatever fails: a server with a request in the frozen store does not close.
    t.teardown(() => store.thaw());
    letGo();
    await holding;
    const deleted = await berth.owner.api
      .delete(url, { timeout: { request: 10_000 } })
      .catch((err: Error) => ({ statusCode: err.name }));
    t.is(deleted.statusCode, 200, 'another write of the file commits while the upload waits for the store');
    t.false(answered, 'the upload waits for the store');
    store.thaw();

    t.is((await upload).statusCode, 200);
    const read = await berth.owner.read.get(url, { responseType: 'buffer' });
    t.is(read.statusCode, 200);
    t.deepEqual(read.body, body);
    // The transaction that waited too long kept nothing: the bytes count for the one version committed.
    const db = berth.berth.deps.db;
    t.deepEqual(
      await db('account_blobs')
        .where({ account_id: berth.owner.id, blob_sha256: sha256(body) })
        .pluck('versions'),
      [1],
    );
    t.deepEqual(
      await db('file_versions')
        .where({ blob_sha256: sha256(body) })
        .pluck('bytes'),
      [1024],
    );
  },
);

s3test(
  'a store that stops answering mid-request fails the request with 503 storage_unavailable instead of holding it',
  async (t) => {
    const { store, berth } = await berthOnOwnStore(t, 'berth-silent', { silenceMs: 1000 });
    const site = await createSite(berth.owner);
    await putFile(berth.owner, site.bucketId, 'web/big.bin', crypto.randomBytes(512 * 1024));

    // The gateway's port still takes connections, and nothing answers on them.
    store.freeze();
    t.teardown(() => store.thaw());
    const bounded = { retry: { limit: 0 }, timeout: { request: 40_000 } };
    const refused = await berth.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/during.txt`, {
      body: 'during',
      ...bounded,
    });
    t.is(refused.statusCode, 503);
    t.is(json<{ error: { code: string } }>(refused).error.code, 'storage_unavailable');
    const unread = await berth.site(site.subdomain).get('big.bin', bounded);
    t.is(unread.statusCode, 503, 'a file not in memory cannot be read from a silent store');

    store.thaw();
    const after = await berth.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/after.txt`, { body: 'after' });
    t.is(after.statusCode, 200);
  },
);

s3test(
  'a backup may leave the blobs in the store: it lists them, and a restore checks every one is there',
  async (t) => {
    const root = await makeDataDir(t);
    const dataDir = path.join(root, 'source');
    const env: Record<string, string> = { BERTH_DATA_DIR: dataDir, ...(await storeEnv(dataDir)) };
    const server = await serve(t, env);
    const { id: accountId, api } = ownerOf(server);
    const site = json<{ bucketId: string }>(await api.post('v0/sites', { json: { accountId, name: 'backed up' } }));
    const bodies = [Buffer.from('one'), Buffer.from('two')];
    for (const [i, body] of bodies.entries())
      t.is((await api.put(`v0/buckets/${site.bucketId}/objects/web/${i}.txt`, { body })).statusCode, 200);

    const archive = path.join(root, 'backup.tar');
    const local = await runBerth(['admin', 'backup', archive, '--without-master-key', '--leave-blobs-in-store'], {
      BERTH_DATA_DIR: dataDir,
      BERTH_OBJECT_STORE: '',
    });
    t.is(local.code, 2, 'the blob directory is always copied');
    const made = await runBerth(
      ['admin', 'backup', archive, '--without-master-key', '--leave-blobs-in-store', '--json'],
      env,
    );
    t.is(made.code, 0, made.stderr);
    t.like(JSON.parse(made.stdout), { backup: { contents: { blobs: 2 } } });
    const members = (await fsp.readFile(archive)).toString('latin1');
    t.true(members.includes('blobs-in-store.txt'));
    t.false(members.includes('\0blobs/'), 'no blob is in the archive');
    for (const body of bodies) t.true(members.includes(sha256(body)));

    const key = path.join(dataDir, 'master.key');
    const into = path.join(root, 'restored');
    const noStore = await runBerth(['admin', 'restore', archive, '--data-dir', into, '--master-key', key], {
      BERTH_OBJECT_STORE: '',
    });
    t.is(noStore.code, 1);
    t.regex(
      noStore.stderr,
      new RegExp(
        `^berth: this backup left its blobs in the object store bucket ${bucketOf(dataDir)} at \\S+: set BERTH_OBJECT_STORE`,
      ),
    );
    t.false(fs.existsSync(into));

    await testS3().send(new DeleteObjectCommand({ Bucket: bucketOf(dataDir), Key: `blobs/${sha256(bodies[1]!)}` }));
    const storeEnvOnly = {
      BERTH_OBJECT_STORE: env.BERTH_OBJECT_STORE!,
      BERTH_S3_ENDPOINT: env.BERTH_S3_ENDPOINT!,
      BERTH_S3_FORCE_PATH_STYLE: 'true',
    };
    const missing = await runBerth(
      ['admin', 'restore', archive, '--data-dir', into, '--master-key', key],
      storeEnvOnly,
    );
    t.is(missing.code, 1);
    t.regex(
      missing.stderr,
      new RegExp(
        `^berth: 1 of the 2 blobs this backup left in its store are not in .* \\(the first: ${sha256(bodies[1]!)}\\); nothing was restored\\n$`,
      ),
    );
    t.false(fs.existsSync(into));

    await testS3().send(
      new PutObjectCommand({ Bucket: bucketOf(dataDir), Key: `blobs/${sha256(bodies[1]!)}`, Body: bodies[1] }),
    );
    const restored = await runBerth(
      ['admin', 'restore', archive, '--data-dir', into, '--master-key', key],
      storeEnvOnly,
    );
    t.is(restored.code, 0, restored.stderr);
    t.false(fs.existsSync(path.join(into, 'blobs')), 'the restored data dir holds no blobs: they are in the store');
  },
);
