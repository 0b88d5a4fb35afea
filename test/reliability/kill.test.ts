// kill -9 of the server in the middle of work: the next start on the same data dir ends the processes
// the killed server left and removes its half-written temp files; and while a server runs, no second
// one may take its data dir; a publish killed half-way leaves the site wholly old or wholly new.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import got from 'got';
import { apiClient, createSite, json, makeDataDir } from '../helpers/berth.ts';
import { type ServeProcess, processesMentioning, runBerth, startServe } from '../helpers/process.ts';
import { ownerOf } from '../helpers/served.ts';
import { until } from '../helpers/until.ts';

/** Every file or folder under `dir` whose name ends in `.tmp`, and whatever is in the blob store's temp folder. */
function tempFiles(dir: string): string[] {
  const found: string[] = [];
  const walk = (folder: string) => {
    for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
      const full = path.join(folder, entry.name);
      const storeTemp = full === path.join(dir, 'blobs', '.tmp'); // the blob store's own folder stays, empty
      if ((entry.name.endsWith('.tmp') && !storeTemp) || path.basename(folder) === '.tmp')
        found.push(path.relative(dir, full));
      if (entry.isDirectory() && full !== path.join(dir, 'runtime', 'deno-dir')) walk(full);
    }
  };
  walk(dir);
  return found;
}

const running = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
};

async function serve(t: ExecutionContext, dataDir: string, env: Record<string, string> = {}): Promise<ServeProcess> {
  const server = await startServe({ BERTH_DATA_DIR: dataDir, ...env });
  t.teardown(async () => {
    server.child.kill('SIGKILL');
    await server.exited;
  });
  return server;
}

/** Kills the server outright and returns the pids of the Deno processes it had running. */
async function killOutright(server: ServeProcess, dataDir: string): Promise<number[]> {
  const children = processesMentioning(dataDir);
  server.child.kill('SIGKILL');
  await server.exited;
  return children;
}

/** Restarts on the data dir and checks that nothing of the killed server is left. */
async function restartClean(
  t: ExecutionContext,
  dataDir: string,
  orphans: number[],
  env: Record<string, string> = {},
): Promise<ServeProcess> {
  const again = await serve(t, dataDir, env);
  t.deepEqual(tempFiles(dataDir), [], 'no temp file of the killed server is left');
  t.deepEqual(orphans.filter(running), [], 'no process of the killed server is left');
  return again;
}

test('kill -9 during an export of a large table: the dump in progress is stopped and its temp file removed', async (t) => {
  const dataDir = await makeDataDir(t);
  const server = await serve(t, dataDir);
  const owner = ownerOf(server);
  const { api } = owner;
  const site = await createSite(owner, { name: 'killed' });
  const db = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  for (const sql of [
    'CREATE TABLE big (b BLOB)',
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 60000) INSERT INTO big SELECT randomblob(2000) FROM c',
  ]) {
    const filled = await api.post(`${base}/query`, { json: { sql } });
    t.is(filled.statusCode, 200, JSON.stringify(filled.body));
  }
  const started = json<{ export: { id: string } }>(await api.post(`${base}/exports`)).export;
  const dump = path.join(dataDir, 'exports', `${started.id}.sql.tmp`);
  await until(() => fs.existsSync(dump) && fs.statSync(dump).size > 0, 'the dump to be written');
  const orphans = await killOutright(server, dataDir);
  t.true(orphans.length > 0, 'the database process was running at the kill');

  const again = await restartClean(t, dataDir, orphans);
  const api2 = apiClient(again.url, owner.writeKey);
  const reconciled = json<{ export: { status: string } }>(
    await api2.post(`${base}/exports/${started.id}/reconcile`),
  ).export;
  t.is(reconciled.status, 'ERROR');
});

// The blob directory's temp files; the object store's are in test/object-store.test.ts.
test('kill -9 during an upload: the partial blob is removed and no version was made', async (t) => {
  const dataDir = await makeDataDir(t);
  const local = { BERTH_OBJECT_STORE: '' };
  const server = await serve(t, dataDir, local);
  const owner = ownerOf(server);
  const site = await createSite(owner, { name: 'killed' });
  const url = new URL(server.url);
  const upload = http.request({
    host: url.hostname,
    port: url.port,
    method: 'PUT',
    path: `/v0/buckets/${site.bucketId}/objects/web/big.bin`,
    headers: {
      authorization: `Bearer ${owner.writeKey}`,
      'content-type': 'application/octet-stream',
      'content-length': String(64 * 1024 * 1024),
    },
  });
  upload.on('error', () => {});
  upload.write(Buffer.alloc(4 * 1024 * 1024, 1));
  const partial = path.join(dataDir, 'blobs', '.tmp');
  await until(
    () => fs.readdirSync(partial).some((name) => fs.statSync(path.join(partial, name)).size > 0),
    'the upload to reach the blob store',
  );
  const orphans = await killOutright(server, dataDir);
  upload.destroy();

  const again = await restartClean(t, dataDir, orphans, local);
  const read = await apiClient(again.url, owner.writeKey).get(`v0/buckets/${site.bucketId}/objects/web/big.bin`);
  t.is(read.statusCode, 404);
  t.is(json<{ error: { code: string } }>(read).error.code, 'not_found');
});

test('kill -9 during a migration: its database process is stopped and the migration is whole or absent', async (t) => {
  const dataDir = await makeDataDir(t);
  const server = await serve(t, dataDir);
  const owner = ownerOf(server);
  const { api } = owner;
  const site = await createSite(owner, { name: 'killed' });
  const db = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  const slow = {
    name: '0001_big.sql',
    sql: 'CREATE TABLE big (x INTEGER); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) INSERT INTO big SELECT x FROM c;',
  };
  const pending = api
    .post(`${base}/migrations/apply`, { json: { migrations: [slow], confirm: true } })
    .catch(() => null);
  await sleep(500);
  const orphans = await killOutright(server, dataDir);
  await pending;
  t.true(orphans.length > 0, 'the database process was running at the kill');

  const again = await restartClean(t, dataDir, orphans);
  const api2 = apiClient(again.url, owner.writeKey);
  const applied = json<{ applied: Array<{ name: string }> }>(await api2.get(`${base}/migrations`)).applied.map(
    (m) => m.name,
  );
  const counted = await api2.post(`${base}/query`, {
    json: { sql: "SELECT count(*) AS n FROM sqlite_schema WHERE name = 'big'" },
  });
  const tables = json<{ result: Array<{ results: Array<{ n: number }> }> }>(counted).result[0]!.results[0]!.n;
  t.is(tables, applied.length, 'the table exists exactly when the ledger says the migration was applied');
});

test('a second server on the same data dir refuses to start, naming it and the running server; admin commands still work', async (t) => {
  const dataDir = await makeDataDir(t);
  const first = await serve(t, dataDir);
  const owner = ownerOf(first);
  const { api } = owner;
  const site = await createSite(owner, { name: 'killed' });

  const second = await runBerth(['serve'], { BERTH_DATA_DIR: dataDir, BERTH_PORT: '0' });
  t.is(second.code, 1);
  t.is(second.stderr.trim().split('\n').length, 1, second.stderr);
  t.true(
    second.stderr.includes(`the data dir ${dataDir} is in use by another Berth server (pid ${first.child.pid})`),
    second.stderr,
  );

  const listed = await runBerth(['admin', 'list-keys', '--account', owner.id], { BERTH_DATA_DIR: dataDir });
  t.is(listed.code, 0, listed.stderr);
  const read = await api.get(`v0/sites/${site.id}`);
  t.is(read.statusCode, 200, 'the first server kept serving');

  // Killed outright, the server's lock goes with it: the next start does not wait for anything.
  first.child.kill('SIGKILL');
  await first.exited;
  const next = await serve(t, dataDir);
  t.is((await apiClient(next.url).get('healthz')).statusCode, 200);
});

test('kill -9 during a publish: after the restart the site is wholly the old deployment or wholly the new', async (t) => {
  const dataDir = await makeDataDir(t);
  let server = await serve(t, dataDir);
  const owner = ownerOf(server);
  const site = await createSite(owner, { name: 'published' });
  const FILES = 1500;
  const build = (name: string) => ({
    files: Array.from({ length: FILES }, (_, i) => ({
      path: `web/f${i}.txt`,
      content: name,
      contentType: 'text/plain',
    })),
  });
  const declare = async (api: ReturnType<typeof apiClient>, name: string) =>
    json<{ deployment: { id: string } }>(await api.post(`v0/sites/${site.id}/deployments`, { json: build(name) }))
      .deployment.id;
  const first = await declare(owner.api, 'build 0');
  t.is((await owner.api.post(`v0/sites/${site.id}/deployments/${first}/publish`)).statusCode, 200);
  const outcomes: string[] = [];
  for (const [round, delayMs] of [20, 60, 150].entries()) {
    const api = apiClient(server.url, owner.writeKey);
    const id = await declare(api, `build ${round + 1}`);
    const publishing = api.post(`v0/sites/${site.id}/deployments/${id}/publish`).catch(() => undefined);
    await sleep(delayMs);
    server.child.kill('SIGKILL');
    await server.exited;
    await publishing;
    server = await serve(t, dataDir);
    // Every file of the site, read through hosting: one build, whichever it is.
    const onSite = got.extend({
      prefixUrl: server.url,
      headers: { host: `${site.subdomain}.localhost` },
      retry: { limit: 0 },
    });
    const builds = new Set<string>();
    for (let i = 0; i < FILES; i++) builds.add((await onSite.get(`f${i}.txt`)).body);
    t.is(builds.size, 1, `round ${round}: ${[...builds].join(', ')}`);
    outcomes.push(`${delayMs} ms: ${[...builds][0]}`);
  }
  t.log(outcomes.join('; '));
});
