// Group commit of the metadata WAL (control-plane/db/sqlite/wal-sync.ts): callers that commit while a sync
// runs wait for the next one, and a failed sync fails only the callers it was for.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { WalSync } from '../control-plane/db/sqlite/wal-sync.ts';

test('a failed WAL sync fails its own callers only; later callers get a sync of their own', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-wal-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const database = path.join(dir, 'meta.sqlite');
  const wal = new WalSync(database);
  t.teardown(() => wal.close());

  // No -wal file yet: the running sync fails, and so does the next one, made for the second caller.
  const first = wal.durable();
  const second = wal.durable();
  await t.throwsAsync(first, { code: 'ENOENT' });
  await t.throwsAsync(second, { code: 'ENOENT' });

  await fs.writeFile(`${database}-wal`, 'frames');
  const callers = [wal.durable(), wal.durable(), wal.durable()];
  await t.notThrowsAsync(Promise.all(callers));
  await t.notThrowsAsync(wal.durable());
});
