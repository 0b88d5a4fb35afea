// The blob store's contract (storage/blob-store.ts), as ContentStore keeps it over every blob driver
// test/helpers/blob-drivers.ts yields: content-addressed puts of any size, reads and ranges, the
// minimum age and pins that keep a blob from removal, stillStored, sweeping and exports; and, through
// the memory cache in front of it (CachedBlobStore), ranges of large blobs read by block. Every title
// names the driver underneath.
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import { BlobNotFoundError, BlobTooLargeError, type PinnedBlob } from '../../storage/blob-store.ts';
import { BlobSweeper } from '../../storage/blob-sweeper.ts';
import { BLOCK_BYTES, CachedBlobStore } from '../../storage/cached-blob-store.ts';
import { ContentStore, type ContentStoreOptions } from '../../storage/content-store.ts';
import { type OpenedDriver, eachBlobDriver } from '../helpers/blob-drivers.ts';

const digest = (data: Buffer) => crypto.createHash('sha256').update(data).digest('hex');

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Buffers compared as bytes: ava's deepEqual takes seconds over megabytes. */
function sameBytes(t: ExecutionContext, actual: Buffer, expected: Buffer, message?: string): void {
  t.true(
    actual.equals(expected),
    `${message ?? 'the bytes'}: ${actual.length} bytes read, ${expected.length} expected`,
  );
}

/** A body as a request delivers it, in chunks of 64 KiB. */
const body = (data: Buffer): Readable =>
  Readable.from(
    (function* () {
      for (let at = 0; at < data.length; at += 64 * 1024) yield data.subarray(at, at + 64 * 1024);
    })(),
  );

async function listed(store: ContentStore): Promise<Array<{ sha256: string; bytes: number }>> {
  const blobs: Array<{ sha256: string; bytes: number }> = [];
  for await (const blob of store.list()) blobs.push({ sha256: blob.sha256, bytes: blob.bytes });
  return blobs.sort((a, b) => a.sha256.localeCompare(b.sha256));
}

async function localFile(t: ExecutionContext, data: Buffer): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'berth-store-file-'));
  t.teardown(() => fsp.rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'file.bin');
  await fsp.writeFile(file, data);
  return file;
}

for (const adapter of eachBlobDriver()) {
  if (adapter.skip) {
    test.skip(`[${adapter.name}] the blob store contract: ${adapter.skip}`, () => {});
    continue;
  }
  const contract = (
    title: string,
    run: (t: ExecutionContext, store: ContentStore, opened: OpenedDriver) => Promise<void>,
    options: ContentStoreOptions = {},
  ) =>
    test(`[${adapter.name}] ${title}`, async (t) => {
      const opened = await adapter.open(t);
      await run(t, new ContentStore(opened.driver, options), opened);
    });

  contract(
    'a body of any size is stored under its digest and read back whole, streamed and by range',
    async (t, store) => {
      const sizes = [0, 100, 256 * 1024, 300 * 1024, 6 * 1024 * 1024 + 7];
      for (const size of sizes) {
        for (const declared of [true, false]) {
          const data = crypto.randomBytes(size);
          const blob = await store.put(body(data), 10 * 1024 * 1024, declared ? size : undefined);
          const how = `${size} bytes, ${declared ? 'declared' : 'undeclared'}`;
          t.is(blob.sha256, digest(data), how);
          t.is(blob.bytes, size, how);
          blob.unpin();
          t.true(await store.has(blob.sha256), how);
          t.is(await store.sizeOf(blob.sha256), size, how);
          sameBytes(t, await store.read(blob.sha256), data, how);
          sameBytes(t, await bytesOf(await store.stream(blob.sha256)), data, how);
          if (size > 20) {
            const start = Math.floor(size / 2) - 10;
            const range = { start, end: start + 19 };
            sameBytes(t, await bytesOf(await store.stream(blob.sha256, range)), data.subarray(start, start + 20), how);
          }
        }
      }
    },
  );

  contract(
    'through the memory cache, a short range of a large blob is its bytes, read by block once: within a block, across blocks, to its last byte',
    async (t, store) => {
      const cached = new CachedBlobStore(store, 8 * 1024 * 1024);
      const data = crypto.randomBytes(300 * 1024 + 7);
      const blob = await store.put(body(data), data.length);
      blob.unpin();
      const last = data.length - 1;
      const ranges = [
        { start: 0, end: 0 },
        { start: BLOCK_BYTES, end: 2 * BLOCK_BYTES - 1 },
        { start: BLOCK_BYTES - 10, end: BLOCK_BYTES + 9 },
        { start: last - 9, end: last },
        { start: 4 * BLOCK_BYTES - 1, end: last },
        { start: 0, end: 4 * BLOCK_BYTES - 1 },
      ];
      for (const range of ranges) {
        const part = await cached.readRange(blob.sha256, data.length, range);
        t.truthy(part, `${range.start}-${range.end}`);
        if (part) sameBytes(t, part, data.subarray(range.start, range.end + 1), `${range.start}-${range.end}`);
      }
      // Every block is in memory now: reading them again asks the store nothing, even all at once.
      const asked = store.requests;
      const again = await Promise.all(ranges.map((range) => cached.readRange(blob.sha256, data.length, range)));
      again.forEach((part, i) => {
        const range = ranges[i]!;
        if (part) sameBytes(t, part, data.subarray(range.start, range.end + 1), `again ${range.start}-${range.end}`);
      });
      t.is(store.requests, asked);
    },
  );

  contract(
    'through the memory cache, a block many ask for at once is read once, and the blocks of a range in one read; ranges that are long, or of small blobs, are left to streaming',
    async (t, store) => {
      const cached = new CachedBlobStore(store, 8 * 1024 * 1024);
      const data = crypto.randomBytes(1024 * 1024);
      const blob = await store.put(body(data), data.length);
      blob.unpin();
      const asked = store.requests;
      const range = { start: 3 * BLOCK_BYTES + 5, end: 3 * BLOCK_BYTES + 500 };
      const parts = await Promise.all(
        Array.from({ length: 8 }, () => cached.readRange(blob.sha256, data.length, range)),
      );
      for (const part of parts) sameBytes(t, part ?? Buffer.alloc(0), data.subarray(range.start, range.end + 1));
      t.true(store.requests - asked <= 1, `${store.requests - asked} requests for one block`);
      const across = { start: 6 * BLOCK_BYTES - 10, end: 7 * BLOCK_BYTES + 9 };
      const before = store.requests;
      const part = await cached.readRange(blob.sha256, data.length, across);
      sameBytes(t, part ?? Buffer.alloc(0), data.subarray(across.start, across.end + 1), 'three blocks');
      t.true(store.requests - before <= 1, `${store.requests - before} requests for three blocks`);

      t.is(await cached.readRange(blob.sha256, data.length, { start: 1, end: 4 * BLOCK_BYTES }), null, 'five blocks');
      t.is(await cached.readRange(blob.sha256, data.length, { start: 0, end: data.length }), null, 'past the end');
      const small = crypto.randomBytes(1000);
      const smallBlob = await store.put(body(small), small.length);
      smallBlob.unpin();
      t.is(await cached.readRange(smallBlob.sha256, small.length, { start: 0, end: 9 }), null, 'a small blob');
      const off = new CachedBlobStore(store, 0);
      t.is(await off.readRange(blob.sha256, data.length, range), null, 'the cache is off');
    },
  );

  contract(
    'a body past the limit fails with BlobTooLargeError, keeps nothing and leaves its source open',
    async (t, store, { leftovers }) => {
      const cases = [
        { size: 200, limit: 100, declared: 200 },
        { size: 1000, limit: 500, declared: undefined },
        { size: 600 * 1024, limit: 400 * 1024, declared: undefined },
        { size: 600 * 1024, limit: 400 * 1024, declared: 600 * 1024 },
        { size: 6 * 1024 * 1024, limit: 5 * 1024 * 1024 + 1, declared: undefined },
      ];
      for (const { size, limit, declared } of cases) {
        const source = body(crypto.randomBytes(size));
        await t.throwsAsync(
          store.put(source, limit, declared),
          { instanceOf: BlobTooLargeError },
          `${size} > ${limit}`,
        );
        t.false(source.destroyed, 'a request refused with 413 can still be answered');
        source.destroy();
      }
      t.deepEqual(await listed(store), []);
      t.deepEqual(await leftovers(), []);
    },
  );

  contract('a body whose source fails keeps nothing', async (t, store, { leftovers }) => {
    for (const size of [1000, 600 * 1024]) {
      const failing = Readable.from(
        (async function* () {
          yield crypto.randomBytes(size);
          throw new Error('the client went away');
        })(),
      );
      await t.throwsAsync(store.put(failing, 10 * 1024 * 1024), { message: 'the client went away' });
    }
    t.deepEqual(await listed(store), []);
    t.deepEqual(await leftovers(), []);
  });

  contract('the same bytes are stored once, and storing them again makes the blob new', async (t, store) => {
    for (const size of [100, 400 * 1024]) {
      const data = crypto.randomBytes(size);
      const first = await store.put(body(data), size);
      const second = await store.put(body(data), size);
      t.is(second.sha256, first.sha256);
      t.true(second.storedAt >= first.storedAt);
      first.unpin();
      second.unpin();
    }
    t.is((await listed(store)).length, 2);
  });

  contract(
    'a stored blob is pinned until its last write unpins it, and removal keeps a pinned blob',
    async (t, store) => {
      const data = Buffer.from('pinned');
      const first = await store.put(body(data), 100);
      const second = await store.put(body(data), 100);
      t.true(store.isPinned(first.sha256));
      t.false(await store.remove(first.sha256, 0), 'pinned, however old');
      first.unpin();
      first.unpin();
      t.true(store.isPinned(first.sha256), 'the second write still holds it');
      t.false(await store.remove(first.sha256, 0));
      second.unpin();
      t.false(store.isPinned(first.sha256));
      t.true(await store.remove(first.sha256, 0));
      t.false(await store.has(first.sha256));
      t.false(await store.remove(first.sha256, 0), 'not there any more');
    },
  );

  contract('removal keeps a blob younger than its minimum age', async (t, store) => {
    const blob = await store.put(body(Buffer.from('young')), 100);
    blob.unpin();
    t.false(await store.remove(blob.sha256, 3_600_000));
    t.true(await store.has(blob.sha256));
    t.true(await store.touch(blob.sha256));
    t.false(await store.touch(digest(Buffer.from('never stored'))));
  });

  contract('stillStored is true while the blob is there and false once it was removed', async (t, store) => {
    const blob = await store.put(body(Buffer.from('committed')), 100);
    t.true(await store.stillStored(blob));
    blob.unpin();
    t.true(await store.remove(blob.sha256, 0));
    t.false(await store.stillStored(blob));
  });

  contract(
    'with a safe age, stillStored trusts a write younger than it and asks the store about an older one',
    async (t, store) => {
      const blob = await store.put(body(Buffer.from('trusted')), 100);
      blob.unpin();
      t.true(await store.remove(blob.sha256, 0));
      t.true(await store.stillStored(blob), 'no sweeper removes a blob within its safe age');
      t.true(store.keeps(blob));
      const older: PinnedBlob = { ...blob, storedAt: Date.now() - 7_200_000 };
      t.false(store.keeps(older), 'past its safe age another server’s sweeper may remove it');
      t.false(await store.stillStored(older));
    },
    { safeAgeMs: 3_600_000 },
  );

  contract(
    'past the safe age, stillStored touches a blob still there, and it is kept for another safe age',
    async (t, store) => {
      const blob = await store.put(body(Buffer.from('slow commit')), 100);
      const older: PinnedBlob = { ...blob, storedAt: Date.now() - 7_200_000 };
      t.true(await store.stillStored(older));
      t.true(store.keeps(older), 'the touch started its age again');
      blob.unpin();
      t.false(await store.remove(blob.sha256, 3_600_000), 'the touched blob is young to the sweeper too');
    },
    { safeAgeMs: 3_600_000 },
  );

  contract(
    'on a shared store, a blob another node stored again just before the sweeper removed it is put back once referenced',
    async (t, store, opened) => {
      // Two nodes on one store: each has its own pins, so only age and references keep the other's write.
      const other = new ContentStore(opened.driver, { safeAgeMs: 3_600_000 });
      const data = crypto.randomBytes(1000);
      const sha256 = digest(data);
      (await store.put(body(data), 2000)).unpin();
      let referenced = false;
      const isReferenced = async (sha: string) => referenced && sha === sha256;
      // The other node's write of the same bytes lands after this node's sweeper checked the blob's age
      // (a minimum age of 0 stands for that moment) and before its removal, then commits trusting them.
      const written = await other.put(body(data), 2000);
      t.like(await new BlobSweeper(store, isReferenced, 0).sweep(), { removed: 1 });
      t.true(other.keeps(written), 'the write trusts its bytes: they are younger than the safe age');
      referenced = true;
      written.unpin();
      t.false(await store.has(sha256));
      t.like(await new BlobSweeper(store, isReferenced, 0).sweep(), { restored: 1, removed: 0 });
      sameBytes(t, await store.read(sha256), data);
      // The copy is gone once past its time, and a removed blob nothing references is not put back.
      const orphan = crypto.randomBytes(500);
      (await store.put(body(orphan), 1000)).unpin();
      t.like(await new BlobSweeper(store, isReferenced, 0).sweep(), { restored: 0, removed: 1 });
      t.like(await new BlobSweeper(store, isReferenced, 0).sweep(), { restored: 0, removed: 0 });
      t.false(await store.has(digest(orphan)));
      const copies: string[] = [];
      for await (const copy of opened.driver.list('removed-blobs')) copies.push(copy.key);
      t.deepEqual(copies, []);
    },
    { safeAgeMs: 3_600_000 },
  );

  contract('without a safe age the pin alone keeps the blob until the commit', async (t, store) => {
    const blob = await store.put(body(Buffer.from('pinned')), 100);
    t.true(store.keeps({ ...blob, storedAt: 0 }));
    blob.unpin();
  });

  contract('a blob the store does not have fails to read with BlobNotFoundError', async (t, store) => {
    const missing = digest(Buffer.from('missing'));
    t.false(await store.has(missing));
    t.is(await store.sizeOf(missing), null);
    await t.throwsAsync(store.read(missing), { instanceOf: BlobNotFoundError, code: 'ENOENT' });
    await t.throwsAsync(store.stream(missing), { instanceOf: BlobNotFoundError, code: 'ENOENT' });
    await t.throwsAsync(store.stream(missing, { start: 0, end: 1 }), { instanceOf: BlobNotFoundError });
  });

  contract('list yields every blob with its size, and nothing else the store keeps', async (t, store) => {
    const bodies = [Buffer.from('one'), crypto.randomBytes(300 * 1024), Buffer.alloc(0)];
    for (const data of bodies) (await store.put(body(data), 1024 * 1024)).unpin();
    await store.putExport('0b7a1c9e-0000-4c3b-9a8e-1f2d3c4b5a6e', await localFile(t, Buffer.from('dump')));
    t.deepEqual(
      await listed(store),
      bodies
        .map((data) => ({ sha256: digest(data), bytes: data.length }))
        .sort((a, b) => a.sha256.localeCompare(b.sha256)),
    );
  });

  contract(
    'the sweeper removes what nothing references once old enough, keeps referenced, pinned and young blobs, and reports it',
    async (t, store) => {
      const referenced = await store.put(body(Buffer.from('referenced')), 100);
      const orphan = await store.put(body(crypto.randomBytes(300 * 1024)), 1024 * 1024);
      const writing = await store.put(body(Buffer.from('being written')), 100);
      referenced.unpin();
      orphan.unpin();
      const isReferenced = async (sha256: string) => sha256 === referenced.sha256;
      const patient = await new BlobSweeper(store, isReferenced, 3_600_000).sweep();
      t.like(patient, { removed: 0, bytes: 0 });
      const report = await new BlobSweeper(store, isReferenced, 0).sweep();
      t.like(report, { removed: 1, bytes: 300 * 1024 });
      t.true(await store.has(referenced.sha256));
      t.false(await store.has(orphan.sha256));
      t.true(await store.has(writing.sha256));
      writing.unpin();
      t.like(await new BlobSweeper(store, isReferenced, 0).sweep(), { removed: 1 });
      t.deepEqual(await listed(store), [{ sha256: referenced.sha256, bytes: 10 }]);
    },
  );

  contract('an export is stored from its file and read back; one the store does not have is null', async (t, store) => {
    const id = '5f0c2a7e-8b1d-4e6f-a3c9-0d2e4f6a8b1c';
    const dump = crypto.randomBytes(100 * 1024);
    const file = await localFile(t, dump);
    t.is(await store.putExport(id, file), dump.length);
    t.true(await store.hasExport(id));
    const opened = await store.openExport(id);
    t.truthy(opened);
    if (opened) sameBytes(t, await bytesOf(opened), dump);
    const other = '5f0c2a7e-0000-4e6f-a3c9-0d2e4f6a8b1c';
    t.false(await store.hasExport(other));
    t.is(await store.openExport(other), null);
  });

  contract('names that are not a digest or an export id are refused', async (t, store) => {
    await t.throwsAsync(store.read('../../etc/passwd'), { message: /^not a sha256 digest/ });
    await t.throwsAsync(store.remove('A'.repeat(64), 0), { message: /^not a sha256 digest/ });
    await t.throwsAsync(store.openExport('../x'), { message: /^not a key/ });
  });

  contract('concurrent writes of the same bytes all succeed and the blob stays whole', async (t, store) => {
    const small = crypto.randomBytes(1000);
    const large = crypto.randomBytes(700 * 1024);
    const blobs = await Promise.all(
      Array.from({ length: 4 }, () => [
        store.put(body(small), 1024 * 1024),
        store.put(body(large), 1024 * 1024),
      ]).flat(),
    );
    for (const blob of blobs) blob.unpin();
    sameBytes(t, await store.read(digest(small)), small);
    sameBytes(t, await store.read(digest(large)), large);
    t.is((await listed(store)).length, 2);
  });
}
