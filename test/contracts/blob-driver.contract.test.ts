// The blob driver's contract (storage/blob-driver.ts), written once and run against every adapter
// test/helpers/blob-drivers.ts yields, each test on a store of its own; every title names the adapter.
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import { type BlobDriver, ObjectNotFoundError } from '../../storage/blob-driver.ts';
import { type OpenedDriver, eachBlobDriver } from '../helpers/blob-drivers.ts';
import { until } from '../helpers/until.ts';

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function* chunksOf(data: Buffer, size = 64 * 1024): AsyncIterable<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

async function keysOf(driver: BlobDriver, folder: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of driver.list(folder)) keys.push(object.key);
  return keys.sort();
}

async function localFile(t: ExecutionContext, data: Buffer): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'berth-driver-file-'));
  t.teardown(() => fsp.rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'source.bin');
  await fsp.writeFile(file, data);
  return file;
}

/** Buffers compared as bytes: ava's deepEqual takes seconds over megabytes. */
function sameBytes(t: ExecutionContext, actual: Buffer, expected: Buffer, message?: string): void {
  t.true(
    actual.equals(expected),
    `${message ?? 'the bytes'}: ${actual.length} bytes read, ${expected.length} expected`,
  );
}

class SourceFailed extends Error {}

/**
 * The folders Berth uses and one more, which the local adapter lays out differently (see
 * test/helpers/blob-drivers.ts).
 */
const FOLDERS = ['blobs', 'exports', 'other'];

for (const adapter of eachBlobDriver()) {
  if (adapter.skip) {
    test.skip(`[${adapter.name}] the blob driver contract: ${adapter.skip}`, () => {});
    continue;
  }
  const contract = (title: string, run: (t: ExecutionContext, store: OpenedDriver) => Promise<void>) =>
    test(`[${adapter.name}] ${title}`, async (t) => run(t, await adapter.open(t)));

  contract('put then get returns the bytes, in every folder', async (t, { driver }) => {
    await driver.writable();
    for (const folder of FOLDERS) {
      const data = crypto.randomBytes(1000);
      const key = `${folder}/a1-${folder}`;
      await driver.put(key, data);
      t.true(await driver.exists(key));
      sameBytes(t, await bytesOf(await driver.get(key)), data);
      sameBytes(t, await driver.getBytes(key), data);
    }
  });

  contract('a range is its bytes from start to end, inclusive', async (t, { driver }) => {
    const data = crypto.randomBytes(1000);
    await driver.put('blobs/ranged', data);
    sameBytes(t, await bytesOf(await driver.getRange('blobs/ranged', { start: 10, end: 19 })), data.subarray(10, 20));
    sameBytes(t, await bytesOf(await driver.getRange('blobs/ranged', { start: 0, end: 0 })), data.subarray(0, 1));
    sameBytes(t, await bytesOf(await driver.getRange('blobs/ranged', { start: 999, end: 999 })), data.subarray(999));
  });

  contract('a put of bytes in memory, a read and a range each ask the store at most once', async (t, { driver }) => {
    const data = crypto.randomBytes(3000);
    const once = async (what: string, run: () => Promise<unknown>) => {
      const before = driver.requests;
      await run();
      t.true(driver.requests - before <= 1, `${what}: ${driver.requests - before} requests`);
    };
    await once('put', () => driver.put('blobs/counted', data));
    await once('get', async () => sameBytes(t, await bytesOf(await driver.get('blobs/counted')), data));
    await once('range', async () =>
      sameBytes(
        t,
        await bytesOf(await driver.getRange('blobs/counted', { start: 7, end: 2006 })),
        data.subarray(7, 2007),
      ),
    );
    await once('missing', () => t.throwsAsync(driver.get('blobs/not-there'), { instanceOf: ObjectNotFoundError }));
  });

  contract('stat gives the size and when it was written', async (t, { driver }) => {
    const before = Date.now();
    await driver.put('blobs/measured', Buffer.alloc(1234, 7));
    const stat = await driver.stat('blobs/measured');
    t.is(stat?.bytes, 1234);
    // Object stores keep whole seconds, and their clock is not ours: near enough.
    const modified = stat?.modifiedMs ?? 0;
    t.true(Math.abs(modified - before) < 5000, `modified ${modified}, written at ${before}`);
  });

  contract(
    'a missing key: not there, no stat, reads fail with ObjectNotFoundError, nothing to touch',
    async (t, { driver }) => {
      const key = 'blobs/missing';
      t.false(await driver.exists(key));
      t.is(await driver.stat(key), null);
      for (const read of [driver.get(key), driver.getRange(key, { start: 0, end: 1 }), driver.getBytes(key)])
        await t.throwsAsync(read, { instanceOf: ObjectNotFoundError, code: 'ENOENT' });
      t.false(await driver.touch(key));
      t.false(await driver.delete(key, { minAgeMs: 0 }));
    },
  );

  contract('an empty object is stored and read as empty', async (t, { driver }) => {
    await driver.put('blobs/empty', Buffer.alloc(0));
    await driver.putStream('other/empty', chunksOf(Buffer.alloc(0)));
    for (const key of ['blobs/empty', 'other/empty']) {
      t.is((await driver.getBytes(key)).length, 0);
      t.is((await driver.stat(key))?.bytes, 0);
    }
  });

  contract('put replaces what the key held, whole', async (t, { driver }) => {
    await driver.put('blobs/replaced', Buffer.alloc(5000, 1));
    const second = Buffer.alloc(300, 2);
    await driver.put('blobs/replaced', second);
    sameBytes(t, await driver.getBytes('blobs/replaced'), second);
    t.is((await driver.stat('blobs/replaced'))?.bytes, 300);
  });

  contract('an immutable put of a key that is there keeps its bytes and makes it new', async (t, { driver }) => {
    const data = crypto.randomBytes(500);
    await driver.put('blobs/kept', data, { immutable: true });
    const first = (await driver.stat('blobs/kept'))?.modifiedMs ?? 0;
    // Until the store's clock shows a later time (object stores keep whole seconds).
    await until(async () => {
      await driver.put('blobs/kept', data, { immutable: true });
      return ((await driver.stat('blobs/kept'))?.modifiedMs ?? 0) > first;
    }, 'the put to make the object new');
    sameBytes(t, await driver.getBytes('blobs/kept'), data);
  });

  contract('touch makes an object new and keeps its bytes', async (t, { driver }) => {
    const data = crypto.randomBytes(500);
    await driver.put('blobs/touched', data);
    const first = (await driver.stat('blobs/touched'))?.modifiedMs ?? 0;
    await until(async () => {
      t.true(await driver.touch('blobs/touched'));
      return ((await driver.stat('blobs/touched'))?.modifiedMs ?? 0) > first;
    }, 'the touch to make the object new');
    sameBytes(t, await driver.getBytes('blobs/touched'), data);
    t.is((await driver.stat('blobs/touched'))?.bytes, 500);
  });

  contract('copy stores the object whole under another key, and leaves the original', async (t, { driver }) => {
    const data = crypto.randomBytes(300 * 1024);
    await driver.put('blobs/original', data);
    t.true(await driver.copy('blobs/original', 'removed-blobs/copy'));
    sameBytes(t, await driver.getBytes('removed-blobs/copy'), data);
    sameBytes(t, await driver.getBytes('blobs/original'), data);
    t.false(await driver.copy('blobs/missing', 'removed-blobs/none'));
    t.false(await driver.exists('removed-blobs/none'));
  });

  contract('putStream stores what the source yields, under a key given or named at the end', async (t, { driver }) => {
    for (const folder of FOLDERS) {
      const data = crypto.randomBytes(300 * 1024);
      await driver.putStream(`${folder}/given`, chunksOf(data));
      sameBytes(t, await driver.getBytes(`${folder}/given`), data);

      let ended = false;
      const calls: boolean[] = [];
      await driver.putStream(
        () => {
          calls.push(ended);
          return `${folder}/named`;
        },
        (async function* () {
          yield* chunksOf(data);
          ended = true;
        })(),
      );
      t.deepEqual(calls, [true], 'named once, after the last byte');
      sameBytes(t, await driver.getBytes(`${folder}/named`), data);
    }
  });

  contract('a large streamed write arrives whole, and ranges across its parts read right', async (t, { driver }) => {
    const data = crypto.randomBytes(6 * 1024 * 1024 + 123);
    await driver.putStream(() => 'blobs/large', chunksOf(data));
    await driver.putStream('exports/large', chunksOf(data));
    for (const key of ['blobs/large', 'exports/large']) {
      t.is((await driver.stat(key))?.bytes, data.length);
      const start = 5 * 1024 * 1024 - 10;
      sameBytes(
        t,
        await bytesOf(await driver.getRange(key, { start, end: start + 19 })),
        data.subarray(start, start + 20),
      );
      sameBytes(t, await bytesOf(await driver.get(key)), data);
    }
  });

  contract(
    'a source that fails: its error is thrown as it is, nothing is stored and nothing is left',
    async (t, { driver, leftovers }) => {
      const failing = (bytes: number) =>
        (async function* () {
          yield* chunksOf(crypto.randomBytes(bytes));
          throw new SourceFailed('the client went away');
        })();
      for (const bytes of [100, 6 * 1024 * 1024]) {
        for (const folder of FOLDERS) {
          await t.throwsAsync(driver.putStream(`${folder}/failed`, failing(bytes)), { instanceOf: SourceFailed });
          await t.throwsAsync(
            driver.putStream(() => `${folder}/failed`, failing(bytes)),
            { instanceOf: SourceFailed },
          );
          t.false(await driver.exists(`${folder}/failed`));
          t.deepEqual(await keysOf(driver, folder), []);
        }
      }
      t.deepEqual(await leftovers(), []);
    },
  );

  contract('a key function that throws: nothing is stored and nothing is left', async (t, { driver, leftovers }) => {
    for (const bytes of [100, 6 * 1024 * 1024]) {
      await t.throwsAsync(
        driver.putStream(
          () => {
            throw new SourceFailed('no key');
          },
          chunksOf(crypto.randomBytes(bytes)),
        ),
        { instanceOf: SourceFailed },
      );
    }
    for (const folder of FOLDERS) t.deepEqual(await keysOf(driver, folder), []);
    t.deepEqual(await leftovers(), []);
  });

  contract('putFile stores a copy and leaves the file; with move it may take it', async (t, { driver, leftovers }) => {
    for (const folder of FOLDERS) {
      const data = crypto.randomBytes(70 * 1024);
      const file = await localFile(t, data);
      t.is(await driver.putFile(`${folder}/copied`, file, { contentType: 'application/octet-stream' }), data.length);
      sameBytes(t, await fsp.readFile(file), data, 'the file is left as it was');
      sameBytes(t, await driver.getBytes(`${folder}/copied`), data);

      const moved = await localFile(t, data);
      t.is(await driver.putFile(`${folder}/moved`, moved, { move: true }), data.length);
      sameBytes(t, await driver.getBytes(`${folder}/moved`), data);

      const replacement = await localFile(t, Buffer.from('second'));
      await driver.putFile(`${folder}/copied`, replacement);
      sameBytes(t, await driver.getBytes(`${folder}/copied`), Buffer.from('second'), 'replaced whole');
    }
    t.deepEqual(await leftovers(), []);
  });

  contract(
    'list yields each object of a folder with its size and age, and nothing of other folders or writes in progress',
    async (t, { driver, killWrite }) => {
      const before = Date.now();
      await driver.put('blobs/aa1', Buffer.alloc(1));
      await driver.put('blobs/ab2', Buffer.alloc(2));
      await driver.putStream(() => 'blobs/zz3', chunksOf(Buffer.alloc(3)));
      await driver.put('other/x', Buffer.alloc(4));
      await driver.putFile('exports/y.sql', await localFile(t, Buffer.alloc(5)));
      await killWrite();
      const listed: Array<{ key: string; bytes: number }> = [];
      for await (const object of driver.list('blobs')) {
        t.true(Math.abs(object.modifiedMs - before) < 5000, `${object.key} modified ${object.modifiedMs}`);
        listed.push({ key: object.key, bytes: object.bytes });
      }
      t.deepEqual(
        listed.sort((a, b) => a.key.localeCompare(b.key)),
        [
          { key: 'blobs/aa1', bytes: 1 },
          { key: 'blobs/ab2', bytes: 2 },
          { key: 'blobs/zz3', bytes: 3 },
        ],
      );
      t.deepEqual(await keysOf(driver, 'other'), ['other/x']);
      t.deepEqual(await keysOf(driver, 'exports'), ['exports/y.sql']);
      t.deepEqual(await keysOf(driver, 'none'), []);
    },
  );

  contract(
    'a conditional delete keeps an object younger than its minimum age or one keep() keeps, and removes it otherwise',
    async (t, { driver }) => {
      await driver.put('blobs/aged', Buffer.from('aged'));
      t.false(await driver.delete('blobs/aged', { minAgeMs: 3_600_000 }));
      t.true(await driver.exists('blobs/aged'));
      let asked = 0;
      t.false(await driver.delete('blobs/aged', { minAgeMs: 0, keep: () => ++asked > 0 }));
      t.is(asked, 1);
      t.true(await driver.exists('blobs/aged'));
      t.true(await driver.delete('blobs/aged', { minAgeMs: 0, keep: () => false }));
      t.false(await driver.exists('blobs/aged'));
      t.false(await driver.delete('blobs/aged', { minAgeMs: 0 }));
    },
  );

  contract('a delete removes the object, and a missing key is no error', async (t, { driver }) => {
    await driver.put('other/gone', Buffer.from('gone'));
    await driver.delete('other/gone');
    t.false(await driver.exists('other/gone'));
    await t.notThrowsAsync(driver.delete('other/gone'));
  });

  contract('keys that leave their folder or reach temp files are refused', async (t, { driver }) => {
    const data = Buffer.from('x');
    for (const key of [
      '../x',
      'blobs/../x',
      'blobs/.hidden',
      'blobs/x.tmp',
      'tmp/x',
      'blobs/a/b',
      '/x',
      'x',
      'Blobs/x',
      'blobs/',
    ]) {
      await t.throwsAsync(driver.put(key, data), { message: /^not a key/ }, key);
      const calls: Array<(key: string) => Promise<unknown>> = [
        (k) => driver.exists(k),
        (k) => driver.stat(k),
        (k) => driver.get(k),
        (k) => driver.getBytes(k),
        (k) => driver.touch(k),
        (k) => driver.delete(k),
      ];
      for (const call of calls) await t.throwsAsync(call(key), { message: /^not a key/ }, key);
      await t.throwsAsync(
        driver.putStream(() => key, chunksOf(data)),
        { message: /^not a key/ },
        key,
      );
    }
    for (const folder of ['tmp', '..', 'blobs/x', '']) {
      await t.throwsAsync(
        (async () => {
          for await (const _ of driver.list(folder));
        })(),
        { message: /^not a folder/ },
      );
    }
  });

  contract(
    'what a killed write left is gone once the store is opened again and its leftovers removed',
    async (t, { leftovers, killWrite, reopen }) => {
      await killWrite();
      t.not((await leftovers()).length, 0);
      const again = await reopen();
      await again.removeLeftovers(0);
      t.deepEqual(await leftovers(), []);
    },
  );

  contract(
    'concurrent immutable writes of one key all succeed and leave it whole',
    async (t, { driver, leftovers }) => {
      const small = crypto.randomBytes(2000);
      const large = crypto.randomBytes(400 * 1024);
      await Promise.all(
        Array.from({ length: 4 }, () => [
          driver.put('blobs/same-small', small, { immutable: true }),
          driver.putStream(() => 'blobs/same-large', chunksOf(large), { immutable: true }),
        ]).flat(),
      );
      sameBytes(t, await driver.getBytes('blobs/same-small'), small);
      sameBytes(t, await driver.getBytes('blobs/same-large'), large);
      t.deepEqual(await keysOf(driver, 'blobs'), ['blobs/same-large', 'blobs/same-small']);
      t.deepEqual(await leftovers(), []);
    },
  );
}
