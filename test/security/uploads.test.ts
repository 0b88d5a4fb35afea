// Failed and aborted uploads remove their temp file (or temp object) at once, and the server keeps
// answering. Serial: each test looks at the one shared blob store.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, json, makeDataDir, putFile, startTestBerth } from '../helpers/berth.ts';
import { localBlobDriver } from '../../control-plane/blob-stores.ts';
import { ContentStore } from '../../storage/content-store.ts';
import { blobLeftovers } from '../helpers/object-store.ts';

let t0: TestBerth;
let bucketId: string;
test.before(async () => {
  t0 = await startTestBerth({ maxFileBytes: 1024 * 1024 });
  bucketId = json<{ id: string }>(
    await t0.owner.api.post('v0/buckets', { json: { accountId: t0.owner.id, name: 'uploads' } }),
  ).id;
});
test.after.always(async () => {
  await t0?.dispose();
});

/** Polls briefly until the store holds no temp file or object; returns what is left. */
async function leftovers(): Promise<string[]> {
  let names = await blobLeftovers(t0.dataDir);
  for (let i = 0; i < 40 && names.length > 0; i++) {
    await sleep(50);
    names = await blobLeftovers(t0.dataDir);
  }
  return names;
}

/** Sends a PUT with raw headers and part of its body, then drops the connection. */
async function abandonUpload(objectPath: string, headers: Record<string, string>, sent: Buffer): Promise<void> {
  const url = new URL(t0.url);
  const socket = net.connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const head = Object.entries({ host: url.host, authorization: `Bearer ${t0.owner.writeKey}`, ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(`PUT /v0/buckets/${bucketId}/objects/${objectPath} HTTP/1.1\r\n${head}\r\n`);
  socket.write(sent);
  // Wait until the server has begun storing the bytes, i.e. its temp file exists (an object store may
  // hold them in memory until a whole part has come: then this waits its 2 s out).
  for (let i = 0; i < 100 && (await blobLeftovers(t0.dataDir)).length === 0; i++) await sleep(20);
  socket.destroy();
}

async function stillAnswers(t: { is(actual: unknown, expected: unknown): void }) {
  t.is((await t0.owner.read.get('v0/accounts/current')).statusCode, 200);
}

test.serial('a client that declares 1 MiB, sends half and disconnects leaves no temp file', async (t) => {
  await abandonUpload('half.bin', { 'content-length': String(1024 * 1024) }, Buffer.alloc(512 * 1024, 1));
  t.deepEqual(await leftovers(), []);
  await stillAnswers(t);
  t.is((await t0.owner.read.get(`v0/buckets/${bucketId}/objects/half.bin`)).statusCode, 404);
});

test.serial('a chunked upload cut off mid-body leaves no temp file', async (t) => {
  const chunk = Buffer.alloc(64 * 1024, 2);
  await abandonUpload(
    'chunked.bin',
    { 'transfer-encoding': 'chunked' },
    Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]),
  );
  t.deepEqual(await leftovers(), []);
  await stillAnswers(t);
});

test.serial('an upload past BERTH_MAX_FILE_BYTES answers 413 and leaves no temp file', async (t) => {
  const declared = await t0.owner.api.put(`v0/buckets/${bucketId}/objects/big.bin`, {
    body: Buffer.alloc(1024 * 1024 + 1),
  });
  t.is(declared.statusCode, 413);
  t.is(json(declared).error.code, 'file_too_large');
  async function* body() {
    for (let i = 0; i < 20; i++) yield Buffer.alloc(64 * 1024, 3);
  }
  const chunked = await t0.owner.api.put(`v0/buckets/${bucketId}/objects/big.bin`, { body: Readable.from(body()) });
  t.is(chunked.statusCode, 413);
  t.deepEqual(await leftovers(), []);
  await stillAnswers(t);
});

test.serial('a stale If-Match answers 409 and leaves no temp file', async (t) => {
  const first = await putFile(t0.owner, bucketId, 'versioned.txt', 'one');
  await putFile(t0.owner, bucketId, 'versioned.txt', 'two');
  const stale = await t0.owner.api.put(`v0/buckets/${bucketId}/objects/versioned.txt`, {
    body: 'three',
    headers: { 'if-match': `"${first.versionId}"` },
  });
  t.is(stale.statusCode, 409);
  t.is(json(stale).error.code, 'version_conflict');
  const malformed = await t0.owner.api.put(`v0/buckets/${bucketId}/objects/versioned.txt`, {
    body: 'three',
    headers: { 'if-match': 'not-a-version' },
  });
  t.is(malformed.statusCode, 400);
  t.deepEqual(await leftovers(), []);
  await stillAnswers(t);
});

test.serial(
  'a write that fails after its body was read (the blob cannot be moved into place) leaves no temp file',
  async (t) => {
    const root = path.join(await makeDataDir(t), 'blobs');
    const store = new ContentStore(localBlobDriver(root, path.join(root, 'exports')));
    await store.init();
    const bytes = Buffer.from('unmovable');
    const digest = crypto.createHash('sha256').update(bytes).digest('hex');
    // A file where the blob's fan-out directory should be makes the final rename impossible.
    await fs.writeFile(path.join(root, digest.slice(0, 2)), '');
    // Streamed, and written whole by a writer thread as a body declared small.
    await t.throwsAsync(store.put(Readable.from([bytes]), 1024), { code: 'ENOTDIR' });
    await t.throwsAsync(store.put(Readable.from([bytes]), 1024, bytes.length), { code: 'ENOTDIR' });
    t.deepEqual(await fs.readdir(path.join(root, '.tmp')), []);
    await store.close();
  },
);
