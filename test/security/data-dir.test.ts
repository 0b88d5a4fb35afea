// The data dir is private whatever the umask Berth was started with: everything the server, SQLite,
// the admin CLI and Deno workers create in it, and whatever an earlier start left readable.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { apiClient, deployFixture, json, makeDataDir, putFile } from '../helpers/berth.ts';
import { runBerth, startServe } from '../helpers/process.ts';
import { ownerOf } from '../helpers/served.ts';
import { onPostgres } from '../helpers/postgres.ts';
import { onObjectStore } from '../helpers/object-store.ts';

// Children inherit this umask: without Berth's own, everything it made would be 0644 and 0755.
process.umask(0o022);

/** Every directory and file under `root` (itself included) that group or others may access. */
function exposed(root: string): string[] {
  const found: string[] = [];
  const visit = (entry: string) => {
    const stat = fs.lstatSync(entry, { throwIfNoEntry: false });
    if (!stat || !(stat.isDirectory() || stat.isFile())) return;
    if ((stat.mode & 0o077) !== 0)
      found.push(`${path.relative(root, entry) || '.'} ${(stat.mode & 0o777).toString(8)}`);
    if (stat.isDirectory()) for (const name of fs.readdirSync(entry)) visit(path.join(entry, name));
  };
  visit(root);
  return found;
}

const TIGHTENED = '"msg":"tightened the permissions of the data dir"';

test('a server started with umask 022 creates nothing that group or others can read', async (t) => {
  const dataDir = path.join(await makeDataDir(t), 'data');
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void server.child.kill('SIGKILL'));
  const account = ownerOf(server);

  const site = json<{ id: string; bucketId: string; subdomain: string }>(
    await account.api.post('v0/sites', { json: { accountId: account.id, name: 'private' } }),
  );
  await putFile(account, site.bucketId, 'web/index.html', '<p>mine</p>', 'text/html');
  await deployFixture(account, site.bucketId, 'echo');
  const called = await apiClient(server.url).post('api/echo', {
    body: 'hello',
    headers: { host: `${site.subdomain}.localhost:${new URL(server.url).port}` },
    responseType: 'text',
  });
  t.is(called.statusCode, 200);
  await account.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'TOKEN', value: 'shh' } });

  const db = json<{ database: { id: string } }>(await account.api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  t.is((await account.api.post(`${base}/query`, { json: { sql: 'CREATE TABLE notes (body TEXT)' } })).statusCode, 200);
  t.is(
    (await account.api.post(`${base}/query`, { json: { sql: "INSERT INTO notes VALUES ('private')" } })).statusCode,
    200,
  );
  let record = json<{ export: { id: string; status: string } }>(await account.api.post(`${base}/exports`)).export;
  for (let i = 0; i < 100 && record.status === 'PROCESSING'; i++) {
    await sleep(50);
    record = json<{ export: typeof record }>(await account.api.post(`${base}/exports/${record.id}/reconcile`)).export;
  }
  t.is(record.status, 'COMPLETE');

  const admin = await runBerth(['admin', 'create-account', '--name', 'Second', '--json'], { BERTH_DATA_DIR: dataDir });
  t.is(admin.code, 0, admin.stderr);

  // The metadata, blobs and exports are in the data dir on the embedded defaults only.
  const metadata = onPostgres ? [] : ['meta.sqlite'];
  const blobs = onObjectStore ? [] : ['blobs', path.join('exports', `${record.id}.sql`)];
  for (const name of [...metadata, ...blobs, 'master.key', path.join('sites', site.id, 'db.sqlite')]) {
    t.true(fs.existsSync(path.join(dataDir, name)), `${name} exists`);
  }
  t.deepEqual(exposed(dataDir), [], 'while the server runs (WAL and shared-memory files included)');

  server.child.kill('SIGTERM');
  t.is(await server.exited, 0);
  t.deepEqual(exposed(dataDir), [], 'after it stopped');
  t.false(server.output().includes(TIGHTENED), 'nothing to tighten in what it made itself');
});

test('the admin CLI on a fresh data dir makes it private', async (t) => {
  const dataDir = path.join(await makeDataDir(t), 'admin-first');
  const created = await runBerth(['admin', 'create-account', '--name', 'First', '--create-data-dir', '--json'], {
    BERTH_DATA_DIR: dataDir,
  });
  t.is(created.code, 0, created.stderr);
  t.is(fs.existsSync(path.join(dataDir, 'meta.sqlite')), !onPostgres, 'the metadata is in the data dir on SQLite only');
  t.deepEqual(exposed(dataDir), []);
});

test('a start tightens modes left loose, says so once, and follows no symbolic link', async (t) => {
  const dataDir = path.join(await makeDataDir(t), 'data');
  const first = await startServe({ BERTH_DATA_DIR: dataDir });
  const account = ownerOf(first);
  const site = json<{ id: string; bucketId: string }>(
    await account.api.post('v0/sites', { json: { accountId: account.id, name: 'loose' } }),
  );
  await putFile(account, site.bucketId, 'web/index.html', 'x', 'text/html');
  await account.api.post(`v0/sites/${site.id}/databases`);
  first.child.kill('SIGTERM');
  t.is(await first.exited, 0);

  // What an older Berth under umask 022 left: everything readable by all.
  const loosen = (entry: string) => {
    const stat = fs.lstatSync(entry);
    if (stat.isSymbolicLink()) return;
    fs.chmodSync(entry, stat.isDirectory() ? 0o755 : 0o644);
    if (stat.isDirectory()) for (const name of fs.readdirSync(entry)) loosen(path.join(entry, name));
  };
  loosen(dataDir);
  const outside = path.join(path.dirname(dataDir), 'outside.txt');
  fs.writeFileSync(outside, 'not Berth’s');
  fs.chmodSync(outside, 0o644);
  fs.symlinkSync(outside, path.join(dataDir, 'link-to-outside'));
  const loose = exposed(dataDir).length;
  t.true(loose >= 8, `${loose} loose entries`);

  const second = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void second.child.kill('SIGKILL'));
  const lines = second
    .output()
    .split('\n')
    .filter((l) => l.includes(TIGHTENED));
  t.is(lines.length, 1);
  t.is(JSON.parse(lines[0]!).entries, loose);
  t.deepEqual(exposed(dataDir), []);
  t.is(fs.statSync(outside).mode & 0o777, 0o644, 'the link was not followed');
  t.is(
    (
      await apiClient(second.url, account.readKey).get(`v0/buckets/${site.bucketId}/objects/web/index.html`, {
        responseType: 'text',
      })
    ).body,
    'x',
  );
  second.child.kill('SIGTERM');
  t.is(await second.exited, 0);

  const third = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void third.child.kill('SIGKILL'));
  t.false(third.output().includes(TIGHTENED), 'a second start finds nothing to tighten');
  third.child.kill('SIGTERM');
  t.is(await third.exited, 0);
});
