// `berth admin backup` and `restore` as real processes: an online backup taken while a server keeps
// writing files and database rows, restored into a new data dir that a new server then serves with
// every site, file version, function, secret, row and key as before; and the refusals: a damaged
// archive, a non-empty target, a backup without its master key.
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import got from 'got';
import Database from 'better-sqlite3';
import { SnapshotSourceMissing, snapshotDatabase } from '../storage/backup/sqlite-snapshot.ts';
import { apiClient, createSite, json, makeDataDir, startTestBerth } from './helpers/berth.ts';
import { type ServeProcess, runBerth, startServe, withBackend } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';
import { removeExport } from './helpers/object-store.ts';
import { storedMetadata } from './helpers/postgres.ts';

const BIN = path.resolve(import.meta.dirname, '../control-plane/cli/berth.js');
const PASSPHRASE = 'correct horse battery staple';

/** `berth …` with `input` on its stdin. */
async function berthWithInput(
  args: string[],
  givenEnv: Record<string, string>,
  input: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = await withBackend(givenEnv);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

async function stop(server: ServeProcess): Promise<void> {
  server.child.kill('SIGTERM');
  await server.exited;
}

/** Every entry under `dir` whose mode lets group or others in. */
async function looseModes(dir: string): Promise<string[]> {
  const loose: string[] = [];
  const visit = async (entry: string) => {
    const stat = await fsp.lstat(entry);
    if ((stat.mode & 0o077) !== 0) loose.push(`${path.relative(dir, entry) || '.'} ${(stat.mode & 0o777).toString(8)}`);
    if (stat.isDirectory()) for (const name of await fsp.readdir(entry)) await visit(path.join(entry, name));
  };
  await visit(dir);
  return loose;
}

const FUNCTION = `export default async (req: Request, ctx: any) => Response.json({
  secret: await ctx.secrets.get('STRIPE_KEY'),
  notes: await ctx.db.query('SELECT id, body FROM notes ORDER BY id'),
});`;

interface FileFixture {
  fileId: string;
  path: string;
  /** Every version written, oldest first, with its bytes. */
  versions: Array<{ id: string; bytes: Buffer; contentType: string }>;
}

test('an online backup under a write load restores into a new data dir that answers as before', async (t) => {
  t.timeout(240_000);
  const root = await makeDataDir(t);
  const dataDir = path.join(root, 'data');
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void server.child.kill('SIGKILL'));
  const owner = ownerOf(server);
  const api = owner.api;
  const port = new URL(server.url).port;

  // Two sites; files with several versions (text and binary); a function; a secret; a database with rows.
  const site = json<{ id: string; bucketId: string; subdomain: string }>(
    await api.post('v0/sites', { json: { accountId: owner.id, name: 'Kept', subdomain: 'kept' } }),
  );
  const other = json<{ id: string; bucketId: string; subdomain: string }>(
    await api.post('v0/sites', { json: { accountId: owner.id, name: 'Other', subdomain: 'other' } }),
  );
  const files: FileFixture[] = [];
  const write = async (bucketId: string, filePath: string, bytes: Buffer, contentType: string) => {
    const put = await api.put(`v0/buckets/${bucketId}/objects/${filePath}`, {
      body: bytes,
      headers: { 'content-type': contentType },
    });
    t.is(put.statusCode, 200, JSON.stringify(put.body));
    const body = json<{ fileId: string; versionId: string }>(put);
    let fixture = files.find((f) => f.fileId === body.fileId);
    if (!fixture) {
      fixture = { fileId: body.fileId, path: filePath, versions: [] };
      files.push(fixture);
    }
    fixture.versions.push({ id: body.versionId, bytes, contentType });
  };
  for (const n of [1, 2, 3])
    await write(site.bucketId, 'web/index.html', Buffer.from(`<h1>version ${n}</h1>`), 'text/html; charset=utf-8');
  await write(site.bucketId, 'web/data.bin', crypto.randomBytes(300_000), 'application/octet-stream');
  await write(site.bucketId, 'web/data.bin', crypto.randomBytes(1000), 'application/octet-stream');
  await write(other.bucketId, 'web/index.html', Buffer.from('other site'), 'text/html');
  const fn = await api.put(`v0/buckets/${site.bucketId}/objects/api/hello.ts`, { body: FUNCTION });
  t.is(json<{ deployment: { status: string } }>(fn).deployment.status, 'READY');
  t.is(
    (await api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'STRIPE_KEY', value: 'sk_live_kept' } })).statusCode,
    200,
  );
  const database = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
  const query = async (sql: string, params?: unknown[]) => {
    const res = await api.post(`v0/sites/${site.id}/databases/${database.id}/query`, {
      json: params ? { sql, params } : { sql },
    });
    t.is(res.statusCode, 200, JSON.stringify(res.body));
    return json<{ result: Array<{ results: Array<Record<string, unknown>> }> }>(res).result[0]!.results;
  };
  await query('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  await query('CREATE TABLE load (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  for (const body of ['first', 'second', 'third']) await query('INSERT INTO notes (body) VALUES (?)', [body]);

  // A finished export of the database, whose link must work again after the restore.
  const exportsPath = `v0/sites/${site.id}/databases/${database.id}/exports`;
  const exported = json<{ export: { id: string; status: string; downloadUrl?: string } }>(
    await api.post(exportsPath),
  ).export;
  let exportRecord = exported;
  for (let i = 0; i < 100 && exportRecord.status === 'PROCESSING'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    exportRecord = json<{ export: typeof exportRecord }>(
      await api.post(`${exportsPath}/${exported.id}/reconcile`),
    ).export;
  }
  t.is(exportRecord.status, 'COMPLETE');
  const dump = (await got.get(exportRecord.downloadUrl!)).body;
  t.regex(dump, /INSERT INTO .?notes/);

  // Keys: one made by the operator, one revoked (it must stay revoked).
  const made = await runBerth(['admin', 'create-key', '--account', owner.id, '--permission', 'READ', '--json'], {
    BERTH_DATA_DIR: dataDir,
  });
  t.is(made.code, 0, made.stderr);
  const extraKey = (JSON.parse(made.stdout) as { key: string }).key;
  const doomed = JSON.parse(
    (
      await runBerth(['admin', 'create-key', '--account', owner.id, '--permission', 'WRITE', '--json'], {
        BERTH_DATA_DIR: dataDir,
      })
    ).stdout,
  ) as { key: string; id: string };
  t.is((await runBerth(['admin', 'revoke-key', '--id', doomed.id], { BERTH_DATA_DIR: dataDir })).code, 0);

  // The write load: each round a new file, a new version of load/latest.txt and a row, until stopped.
  const acked = { rounds: 0 };
  let loading = true;
  const load = (async () => {
    for (let i = 1; loading; i++) {
      const a = await api.put(`v0/buckets/${site.bucketId}/objects/load/${i}.txt`, { body: `load ${i}` });
      const b = await api.put(`v0/buckets/${site.bucketId}/objects/load/latest.txt`, { body: String(i) });
      const c = await api.post(`v0/sites/${site.id}/databases/${database.id}/query`, {
        json: { sql: 'INSERT INTO load (id, body) VALUES (?, ?)', params: [i, `row ${i}`] },
      });
      if (a.statusCode !== 200 || b.statusCode !== 200 || c.statusCode !== 200)
        throw new Error(`load round ${i} failed`);
      acked.rounds = i;
    }
  })();
  while (acked.rounds < 5) await new Promise((resolve) => setTimeout(resolve, 20));

  const archive = path.join(root, 'backups', 'berth.tar');
  await fsp.mkdir(path.dirname(archive));
  const before = acked.rounds;
  const backup = await berthWithInput(
    ['admin', 'backup', archive, '--master-key-passphrase-stdin', '--json'],
    { BERTH_DATA_DIR: dataDir },
    `${PASSPHRASE}\n`,
  );
  const after = acked.rounds;
  t.is(backup.code, 0, backup.stderr);
  t.true(after > before, 'the server kept writing while the backup ran');
  loading = false;
  await load;
  const report = (
    JSON.parse(backup.stdout) as {
      backup: {
        bytes: number;
        masterKey: string;
        contents: { sites: number; siteDatabases: number };
        snapshots: { restarts: number };
      };
    }
  ).backup;
  t.log(
    `load rounds acknowledged: ${before} before the backup, ${after} after; copies restarted ${report.snapshots.restarts} times`,
  );
  t.like(report, { masterKey: 'wrapped', contents: { sites: 2, siteDatabases: 1 } });
  t.is((await fsp.stat(archive)).mode & 0o777, 0o600);
  t.is((await fsp.stat(archive)).size, report.bytes);
  t.deepEqual(
    (await fsp.readdir(path.dirname(archive))).sort(),
    ['berth.tar'],
    'no temporary file is left beside the archive',
  );

  // Without the key, for the refusals below; taken after the load stopped.
  const keyless = path.join(root, 'backups', 'keyless.tar');
  const keylessRun = await runBerth(['admin', 'backup', keyless, '--without-master-key'], { BERTH_DATA_DIR: dataDir });
  t.is(keylessRun.code, 0, keylessRun.stderr);
  t.regex(keylessRun.stdout, /master key: left out/);
  await stop(server);

  // Restore into a new data dir, and serve it.
  const restored = path.join(root, 'restored', 'data');
  // BERTH_DATA_DIR names the new instance: on PostgreSQL its metadata goes into that instance's database.
  const restore = await berthWithInput(
    ['admin', 'restore', archive, '--data-dir', restored, '--master-key-passphrase-stdin'],
    { BERTH_DATA_DIR: restored },
    `${PASSPHRASE}\n`,
  );
  t.is(restore.code, 0, restore.stderr);
  t.regex(restore.stdout, /Restored .* into /);
  t.deepEqual(await looseModes(restored), [], 'folders are 0700 and files 0600');
  t.deepEqual(
    await fsp.readFile(path.join(restored, 'master.key')),
    await fsp.readFile(path.join(dataDir, 'master.key')),
  );
  t.false(fs.existsSync(path.join(restored, 'runtime')), 'runtime files are rebuilt, not restored');
  t.false((await storedMetadata(restored)).includes(dataDir), 'nothing names the old data dir');

  const second = await startServe({ BERTH_DATA_DIR: restored });
  t.teardown(() => void second.child.kill('SIGKILL'));
  t.false(second.output().includes('WRITE key'), 'a restored instance has its owner already');
  const api2 = apiClient(second.url, owner.writeKey);
  const read2 = apiClient(second.url, owner.readKey);
  const port2 = new URL(second.url).port;
  const siteHost = (subdomain: string) =>
    got.extend({
      prefixUrl: second.url,
      headers: { host: `${subdomain}.localhost:${port2}` },
      throwHttpErrors: false,
      retry: { limit: 0 },
    });
  t.not(port2, port);

  // Keys: the owner's and the operator's authenticate; the revoked one does not.
  const sites = json<{ sites: Array<{ id: string; subdomain: string }> }>(
    await read2.get('v0/sites', { searchParams: { accountId: owner.id } }),
  );
  t.deepEqual(sites.sites.map((s) => s.subdomain).sort(), ['kept', 'other']);
  t.is(
    (await apiClient(second.url, extraKey).get('v0/sites', { searchParams: { accountId: owner.id } })).statusCode,
    200,
  );
  t.is(
    (await apiClient(second.url, doomed.key).get('v0/sites', { searchParams: { accountId: owner.id } })).statusCode,
    401,
  );

  // Every file version, with its bytes and type; the current ones served by the sites.
  for (const file of files) {
    const versions = json<{ versions: Array<{ id: string; contentType: string }> }>(
      await read2.get(`v0/files/${file.fileId}/versions`),
    );
    t.deepEqual(
      versions.versions.map((v) => v.id),
      file.versions.map((v) => v.id).reverse(),
      file.path,
    );
    for (const version of file.versions) {
      const content = await read2.get(`v0/files/${file.fileId}/versions/${version.id}/content`, {
        responseType: 'buffer',
      });
      t.is(content.statusCode, 200);
      t.true(content.body.equals(version.bytes), `${file.path} ${version.id}`);
      t.is(content.headers['content-type'], version.contentType);
    }
  }
  t.is((await siteHost('kept').get('')).body, '<h1>version 3</h1>');
  t.is((await siteHost('other').get('')).body, 'other site');

  // The function answers, with the secret (decrypted by the restored master key) and the rows.
  const called = await siteHost('kept').get('api/hello');
  t.is(called.statusCode, 200, called.body);
  t.deepEqual(JSON.parse(called.body), {
    secret: 'sk_live_kept',
    notes: [
      { id: 1, body: 'first' },
      { id: 2, body: 'second' },
      { id: 3, body: 'third' },
    ],
  });
  t.is(
    json<{ secret: { value: string } }>(await read2.get(`v0/sites/${site.id}/secrets/STRIPE_KEY`)).secret.value,
    'sk_live_kept',
  );

  const exportAgain = json<{ export: { status: string; downloadUrl?: string } }>(
    await api2.post(`${exportsPath}/${exported.id}/reconcile`),
  ).export;
  t.is(exportAgain.status, 'COMPLETE');
  t.is((await got.get(exportAgain.downloadUrl!)).body, dump);

  // The load as of one moment: rows 1..k and files 1..m with no gap, each whole; at least what was
  // acknowledged before the backup started, at most one round in flight past what it acknowledged.
  const rows = json<{ result: Array<{ results: Array<{ id: number; body: string }> }> }>(
    await api2.post(`v0/sites/${site.id}/databases/${database.id}/query`, {
      json: { sql: 'SELECT id, body FROM load ORDER BY id' },
    }),
  ).result[0]!.results;
  t.true(rows.length >= before && rows.length <= after + 1, `${rows.length} rows, ${before}..${after} acknowledged`);
  t.deepEqual(
    rows,
    rows.map((_, i) => ({ id: i + 1, body: `row ${i + 1}` })),
  );
  const loadFiles: string[] = [];
  for (let offset: number | null = 0; offset !== null; ) {
    const page: { files: Array<{ path: string }>; pagination: { nextOffset: number | null } } = json(
      await read2.get(`v0/buckets/${site.bucketId}/objects`, {
        searchParams: { prefix: 'load/', limit: '200', offset: String(offset) },
      }),
    );
    loadFiles.push(...page.files.map((f) => f.path));
    offset = page.pagination.nextOffset;
  }
  const numbered = loadFiles
    .filter((p) => p !== 'load/latest.txt')
    .map((p) => Number(/load\/(\d+)\.txt/.exec(p)![1]))
    .sort((a, b) => a - b);
  t.true(numbered.length >= before && numbered.length <= after + 1);
  t.deepEqual(
    numbered,
    numbered.map((_, i) => i + 1),
  );
  for (const n of [1, numbered.length])
    t.is(
      (await read2.get(`v0/buckets/${site.bucketId}/objects/load/${n}.txt`, { responseType: 'text' })).body,
      `load ${n}`,
    );
  const latest = await read2.get(`v0/buckets/${site.bucketId}/objects/load/latest.txt`, { responseType: 'text' });
  const latestN = Number(latest.body);
  t.true(
    latestN === numbered.length || latestN === numbered.length - 1,
    `latest.txt says ${latestN}, ${numbered.length} files`,
  );
  const latestVersions = json<{ versions: unknown[] }>(
    await read2.get(`v0/files/${String(latest.headers['berth-file-id'])}/versions`, { searchParams: { limit: '200' } }),
  );
  t.is(latestVersions.versions.length, Math.min(latestN, 200));

  // The restored instance takes writes as usual.
  t.is((await api2.put(`v0/buckets/${site.bucketId}/objects/web/new.txt`, { body: 'after' })).statusCode, 200);
  await stop(second);

  // A backup without its master key needs the key file, and the right one.
  const target = path.join(root, 'keyless', 'data');
  const noKey = await runBerth(['admin', 'restore', keyless, '--data-dir', target], {});
  t.is(noKey.code, 1);
  t.regex(
    noKey.stderr,
    /^berth: this backup was taken without the master key: give the instance's master\.key with --master-key <file>\n$/,
  );
  t.false(fs.existsSync(target));
  const wrongKey = path.join(root, 'wrong.key');
  await fsp.writeFile(wrongKey, crypto.randomBytes(32));
  const wrong = await runBerth(['admin', 'restore', keyless, '--data-dir', target, '--master-key', wrongKey], {});
  t.is(wrong.code, 1);
  t.regex(wrong.stderr, /is not the master key of the backed-up instance; nothing was restored/);
  t.false(fs.existsSync(target));
  t.deepEqual(await fsp.readdir(path.dirname(target)), [], 'no half-restored folder is left');
  const withKey = await runBerth(
    ['admin', 'restore', keyless, '--data-dir', target, '--master-key', path.join(dataDir, 'master.key'), '--json'],
    {},
  );
  t.is(withKey.code, 0, withKey.stderr);
  t.like(JSON.parse(withKey.stdout), { restore: { masterKey: 'omitted', contents: { sites: 2 } } });
  t.deepEqual(
    await fsp.readFile(path.join(target, 'master.key')),
    await fsp.readFile(path.join(dataDir, 'master.key')),
  );

  // A wrapped key with the wrong passphrase.
  const badPass = await berthWithInput(
    ['admin', 'restore', archive, '--data-dir', path.join(root, 'bad-pass')],
    {},
    'not the passphrase\n',
  );
  t.is(badPass.code, 1);
  t.regex(badPass.stderr, /wrapped with a passphrase: pipe it in with --master-key-passphrase-stdin/);
  const wrongPass = await berthWithInput(
    ['admin', 'restore', archive, '--data-dir', path.join(root, 'bad-pass'), '--master-key-passphrase-stdin'],
    {},
    'not the passphrase\n',
  );
  t.is(wrongPass.code, 1);
  t.regex(
    wrongPass.stderr,
    /^berth: the passphrase does not open the master key in this backup; nothing was restored\n$/,
  );
  t.false(fs.existsSync(path.join(root, 'bad-pass')));

  // A flipped byte anywhere is caught before anything is restored: in a blob, a header, the padding.
  const bytes = await fsp.readFile(archive);
  const inBlob = bytes.indexOf(Buffer.from('other site'));
  const inHeader = bytes.indexOf(Buffer.from('meta.sqlite')) + 120;
  const inPadding = bytes.indexOf(Buffer.from('other site')) + 'other site'.length + 5;
  for (const [where, offset] of [
    ['a blob', inBlob],
    ['a header', inHeader],
    ['padding', inPadding],
  ] as const) {
    const damaged = Buffer.from(bytes);
    damaged[offset] = damaged[offset]! ^ 0x01;
    const file = path.join(root, 'damaged.tar');
    await fsp.writeFile(file, damaged);
    const out = path.join(root, 'damaged', 'data');
    const run = await berthWithInput(
      ['admin', 'restore', file, '--data-dir', out, '--master-key-passphrase-stdin'],
      {},
      PASSPHRASE,
    );
    t.is(run.code, 1, where);
    t.regex(run.stderr, /^berth: the backup is damaged or altered \(.+\); nothing was restored\n$/, where);
    t.false(fs.existsSync(out), where);
    t.deepEqual(await fsp.readdir(path.join(root, 'damaged')), [], `${where}: no temporary folder is left`);
  }
});

test('restore refuses a non-empty folder and a file that is no backup; backup refuses to guess about the master key', async (t) => {
  t.timeout(180_000);
  const root = await makeDataDir(t);
  const dataDir = path.join(root, 'data');
  const made = await runBerth(['admin', 'create-account', '--name', 'Solo', '--create-data-dir'], {
    BERTH_DATA_DIR: dataDir,
  });
  t.is(made.code, 0, made.stderr);
  // An admin command makes no master key; a server does, on its first start.
  await fsp.writeFile(path.join(dataDir, 'master.key'), crypto.randomBytes(32), { mode: 0o600 });

  // The refusals are independent of each other: run at once.
  const [neither, short, inside, nowhere] = await Promise.all([
    runBerth(['admin', 'backup', path.join(root, 'b.tar')], { BERTH_DATA_DIR: dataDir }),
    berthWithInput(
      ['admin', 'backup', path.join(root, 'b.tar'), '--master-key-passphrase-stdin'],
      { BERTH_DATA_DIR: dataDir },
      'short\n',
    ),
    runBerth(['admin', 'backup', path.join(dataDir, 'b.tar'), '--without-master-key'], { BERTH_DATA_DIR: dataDir }),
    runBerth(['admin', 'backup', path.join(root, 'b.tar'), '--without-master-key'], {
      BERTH_DATA_DIR: path.join(root, 'nothing'),
    }),
  ]);
  t.is(neither.code, 2);
  t.regex(neither.stderr, /^berth: say what to do with the master key/);
  t.is(short.code, 2);
  t.regex(short.stderr, /at least 12 characters/);
  t.is(inside.code, 1);
  t.regex(inside.stderr, /inside the data dir/);
  t.is(nowhere.code, 1);
  t.regex(nowhere.stderr, /there is no data dir at /);
  t.false(fs.existsSync(path.join(root, 'nothing')), 'backup creates no data dir');
  t.false(fs.existsSync(path.join(root, 'b.tar')));

  const archive = path.join(root, 'b.tar');
  t.is((await runBerth(['admin', 'backup', archive, '--without-master-key'], { BERTH_DATA_DIR: dataDir })).code, 0);

  const busy = path.join(root, 'busy');
  await fsp.mkdir(busy);
  await fsp.writeFile(path.join(busy, 'keep.txt'), 'mine');
  const empty = path.join(root, 'empty');
  await fsp.mkdir(empty);
  const notBackup = path.join(root, 'notes.txt');
  await fsp.writeFile(notBackup, 'just some text\n'.repeat(100));
  const key = path.join(dataDir, 'master.key');
  const [refused, into, junk, noDir] = await Promise.all([
    runBerth(['admin', 'restore', archive, '--data-dir', busy, '--master-key', key], {}),
    runBerth(['admin', 'restore', archive, '--data-dir', empty, '--master-key', key], {}),
    runBerth(['admin', 'restore', notBackup, '--data-dir', path.join(root, 'x'), '--json'], {}),
    runBerth(['admin', 'restore', archive], {}),
  ]);
  t.is(refused.code, 1);
  t.is(refused.stderr, `berth: ${busy} is not empty: restore into a new, empty folder (nothing was changed)\n`);
  t.deepEqual(await fsp.readdir(busy), ['keep.txt']);

  // An empty folder is fine, and is replaced by the restored one.
  t.is(into.code, 0, into.stderr);
  t.true(fs.existsSync(path.join(empty, 'meta.sqlite')));
  t.is((await fsp.stat(empty)).mode & 0o777, 0o700);

  t.is(junk.code, 1);
  t.is((JSON.parse(junk.stdout) as { error: { code: string } }).error.code, 'not_a_backup');
  t.false(fs.existsSync(path.join(root, 'x')));

  t.is(noDir.code, 2);
  t.regex(noDir.stderr, /--data-dir <empty dir> is required/);
});

test('a copy under steady writes restarts, then finishes in one step, and is one consistent moment', async (t) => {
  const root = await makeDataDir(t);
  const source = path.join(root, 'live.sqlite');
  const writer = new Database(source);
  t.teardown(() => writer.close());
  writer.exec(
    'PRAGMA journal_mode = WAL; CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT); CREATE TABLE total (n INTEGER); INSERT INTO total VALUES (0);',
  );
  // About 1000 pages, so small steps take many turns.
  writer.exec(
    `BEGIN; ${Array.from({ length: 400 }, () => 'INSERT INTO rows (body) VALUES (hex(randomblob(4000)));').join(' ')} UPDATE total SET n = 400; COMMIT;`,
  );

  let writes = 0;
  const copy = path.join(root, 'copy.sqlite');
  const report = await snapshotDatabase(source, copy, {
    stepPages: 20,
    maxRestarts: 3,
    // Another connection commits between steps: each write makes SQLite start the copy again.
    onProgress: () => {
      writes++;
      writer.exec("BEGIN; INSERT INTO rows (body) VALUES ('late'); UPDATE total SET n = n + 1; COMMIT;");
    },
  });
  t.is(report.restarts, 3);
  t.true(report.wholeStep);

  const copied = new Database(copy);
  t.teardown(() => copied.close());
  const row = copied
    .prepare<[], { rows: number; total: number }>(
      'SELECT (SELECT count(*) FROM rows) AS rows, (SELECT n FROM total) AS total',
    )
    .get()!;
  t.is(row.rows, row.total, 'the copy is one committed state');
  t.is(row.rows, 400 + writes, 'it holds every write committed before its last step');
});

test('a copy of a source that stays locked fails after the busy time and leaves no file', async (t) => {
  const root = await makeDataDir(t);
  const source = path.join(root, 'locked.sqlite');
  const holder = new Database(source);
  t.teardown(() => holder.close());
  // A rollback-journal database: an exclusive transaction keeps every reader out.
  holder.exec('CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1); BEGIN EXCLUSIVE;');
  const copy = path.join(root, 'copy.sqlite');
  const started = performance.now();
  await t.throwsAsync(snapshotDatabase(source, copy, { busyMs: 200 }), {
    message: `${source} stayed locked for more than 200 ms`,
  });
  t.true(performance.now() - started >= 200);
  t.false(fs.existsSync(copy));

  // Locked once the copy has begun: the next step waits the busy time in vain, and the copy stops.
  holder.exec('ROLLBACK');
  const lockOnce = () => {
    if (!holder.inTransaction) holder.exec('BEGIN EXCLUSIVE');
  };
  await t.throwsAsync(snapshotDatabase(source, copy, { busyMs: 200, onProgress: lockOnce }), {
    message: `${source} stayed locked for more than 200 ms`,
  });
  t.false(fs.existsSync(copy));
});

test('a missing source is reported as missing, and neither it nor a copy is created', async (t) => {
  const root = await makeDataDir(t);
  for (const source of [path.join(root, 'gone.sqlite'), path.join(root, 'gone', 'db.sqlite')]) {
    await t.throwsAsync(snapshotDatabase(source, path.join(root, 'copy.sqlite')), {
      instanceOf: SnapshotSourceMissing,
    });
    t.false(fs.existsSync(source));
  }
  t.deepEqual(await fsp.readdir(root), []);
});

test('a site database deleted and an export file gone while the backup runs are left out, and the copy says so', async (t) => {
  t.timeout(120_000);
  const own = await startTestBerth();
  t.teardown(() => own.dispose());
  const kept = await createSite(own.owner);
  const gone = await createSite(own.owner);
  const keptDb = json<{ database: { id: string } }>(await own.owner.api.post(`v0/sites/${kept.id}/databases`)).database;
  t.is((await own.owner.api.post(`v0/sites/${gone.id}/databases`)).statusCode, 200);
  const exportsPath = `v0/sites/${kept.id}/databases/${keptDb.id}/exports`;
  const exported = json<{ export: { id: string; status: string } }>(await own.owner.api.post(exportsPath)).export;
  for (let status = exported.status; status === 'PROCESSING'; ) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    status = json<{ export: { status: string } }>(await own.owner.api.post(`${exportsPath}/${exported.id}/reconcile`))
      .export.status;
  }
  // As a deletion does after removing the binding: the files go, while the metadata still lists them.
  // The site's database process and its replicator may still be writing there: the removal retries
  // while a file appears in a folder it is emptying (ENOTEMPTY).
  await fsp.rm(path.join(own.dataDir, 'sites', gone.id), { recursive: true, force: true, maxRetries: 10 });
  await removeExport(own.dataDir, exported.id);

  const root = await makeDataDir(t);
  const file = path.join(root, 'b.tar');
  const backup = await runBerth(['admin', 'backup', file, '--without-master-key', '--json'], {
    BERTH_DATA_DIR: own.dataDir,
  });
  t.is(backup.code, 0, backup.stderr);
  const report = (
    JSON.parse(backup.stdout) as { backup: { deletedDuringBackup: string[]; contents: Record<string, number> } }
  ).backup;
  t.deepEqual(report.deletedDuringBackup, [gone.id]);
  t.like(report.contents, { sites: 2, siteDatabases: 1, exports: 0 });

  const restored = path.join(root, 'data');
  const restore = await runBerth(
    ['admin', 'restore', file, '--data-dir', restored, '--master-key', path.join(own.dataDir, 'master.key')],
    {},
  );
  t.is(restore.code, 0, restore.stderr);
  const meta = new Database(path.join(restored, 'meta.sqlite'));
  t.teardown(() => meta.close());
  t.deepEqual(meta.prepare('SELECT site_id FROM databases').all(), [{ site_id: kept.id }]);
  t.deepEqual(meta.prepare('SELECT status FROM database_exports').all(), [{ status: 'ERROR' }]);
  t.true(fs.existsSync(path.join(restored, 'sites', kept.id, 'db.sqlite')));
  t.false(fs.existsSync(path.join(restored, 'sites', gone.id)));
  t.deepEqual(
    (await fsp.readdir(restored)).filter((name) => name.endsWith('-wal') || name.endsWith('-journal')),
    [],
    'each database is one file',
  );
});

/** The pid of a process that has ended. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

test('a backup or restore killed outright leaves nothing the next one in the same place does not remove; a live one is left alone', async (t) => {
  const root = await makeDataDir(t);
  const berth = await startTestBerth({ dataDir: path.join(root, 'data') });
  t.teardown(() => berth.dispose());
  const dead = await deadPid();
  const archive = path.join(root, 'b.tar');
  // What a killed backup leaves beside its archive, and what a backup still running there has made.
  await fsp.mkdir(path.join(root, `.berth-backup-${dead}-abc123`));
  await fsp.writeFile(path.join(root, `.berth-backup-${dead}-abc123`, 'meta.sqlite'), 'half a copy');
  await fsp.writeFile(path.join(root, `.b.tar.${dead}-0123456789ab.tmp`), 'half an archive');
  await fsp.mkdir(path.join(root, `.berth-backup-${process.pid}-live12`));
  const backedUp = await runBerth(['admin', 'backup', archive, '--without-master-key'], {
    BERTH_DATA_DIR: berth.dataDir,
  });
  t.is(backedUp.code, 0, backedUp.stderr);
  t.deepEqual((await fsp.readdir(root)).filter((name) => name.startsWith('.')).sort(), [
    `.berth-backup-${process.pid}-live12`,
  ]);

  // A restore killed while staging beside its target, or inside an existing empty one.
  const target = path.join(root, 'restored');
  await fsp.mkdir(target);
  await fsp.mkdir(path.join(target, `.berth-restore-${dead}-xyz789`));
  await fsp.mkdir(path.join(root, `.restored.restore-${dead}-xyz789`));
  const restored = await runBerth(
    ['admin', 'restore', archive, '--data-dir', target, '--master-key', path.join(berth.dataDir, 'master.key')],
    {},
  );
  t.is(restored.code, 0, restored.stderr);
  t.true(fs.existsSync(path.join(target, 'meta.sqlite')));
  t.false(fs.existsSync(path.join(target, `.berth-restore-${dead}-xyz789`)));
  t.false(fs.existsSync(path.join(root, `.restored.restore-${dead}-xyz789`)));
});
