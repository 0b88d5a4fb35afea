// SIGTERM once functions have run: requests in flight finish, workers stop, the metadata WAL is
// checkpointed away and the process exits 0. A second signal forces the exit.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { apiClient, deployFixture, json, makeDataDir, putFile } from '../helpers/berth.ts';
import { type ServeProcess, processesMentioning, startServe } from '../helpers/process.ts';
import { ownerOf } from '../helpers/served.ts';
import { onPostgres } from '../helpers/postgres.ts';

async function noneLeft(needle: string): Promise<number[]> {
  let pids = processesMentioning(needle);
  for (let i = 0; i < 20 && pids.length > 0; i++) {
    await sleep(100);
    pids = processesMentioning(needle);
  }
  return pids;
}

/** A GET on a hosted site whose body is read slowly, so it is still in flight at the signal. */
function slowGet(
  server: ServeProcess,
  subdomain: string,
  urlPath: string,
  pauseMs: number,
): Promise<{ status: number; body: Buffer }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: url.hostname, port: url.port, path: urlPath, headers: { host: `${subdomain}.localhost:${url.port}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.once('data', () => {
          res.pause();
          setTimeout(() => res.resume(), pauseMs);
        });
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
}

async function serveWithFunction(t: ExecutionContext, options: { processGroup?: boolean } = {}) {
  const dataDir = await makeDataDir(t);
  const server = await startServe({ BERTH_DATA_DIR: dataDir, BERTH_SHUTDOWN_GRACE_MS: '15000' }, options);
  t.teardown(() => void server.child.kill('SIGKILL'));
  const owner = ownerOf(server);
  const site = json<{ id: string; bucketId: string; subdomain: string }>(
    await owner.api.post('v0/sites', { json: { accountId: owner.id, name: 'shutdown' } }),
  );
  await deployFixture(owner, site.bucketId, 'slow');
  // A first call starts a worker: from here on the process has function workers to clean up.
  const warm = await slowGet(server, site.subdomain, '/api/slow?ms=0', 0);
  if (warm.status !== 200) throw new Error(`warm-up call answered ${warm.status}`);
  return { dataDir, server, owner, site };
}

test('SIGTERM with a function call and downloads in flight: all finish, workers stop, exit 0', async (t) => {
  const { dataDir, server, owner, site } = await serveWithFunction(t);
  const big = crypto.randomBytes(24 * 1024 * 1024);
  await putFile(owner, site.bucketId, 'web/big.bin', big, 'application/octet-stream');
  t.true(processesMentioning(dataDir).length > 0, 'a Deno worker runs before the signal');

  const call = slowGet(server, site.subdomain, '/api/slow?ms=2000', 0);
  const downloads = [1500, 2000, 2500].map((pause) => slowGet(server, site.subdomain, '/big.bin', pause));
  await sleep(500);
  server.child.kill('SIGTERM');

  const answered = await call;
  t.is(answered.status, 200);
  t.is(answered.body.toString(), 'answered after 2000 ms');
  const digest = crypto.createHash('sha256').update(big).digest('hex');
  for (const download of await Promise.all(downloads)) {
    t.is(download.status, 200);
    t.is(download.body.length, big.length);
    t.is(crypto.createHash('sha256').update(download.body).digest('hex'), digest);
  }

  t.is(await server.exited, 0);
  t.true(server.output().includes('"msg":"stopped"'));
  const wal = path.join(dataDir, 'meta.sqlite-wal');
  t.true(onPostgres || !fs.existsSync(wal) || fs.statSync(wal).size === 0, 'the metadata WAL was checkpointed');
  t.deepEqual(await noneLeft(dataDir), [], 'no Deno worker outlives the server');
});

test('Ctrl-C at a terminal signals the whole process group; calls and statements in flight still finish', async (t) => {
  const { dataDir, server, owner, site } = await serveWithFunction(t, { processGroup: true });
  const db = json<{ database: { id: string } }>(await owner.api.post(`v0/sites/${site.id}/databases`)).database;
  const call = slowGet(server, site.subdomain, '/api/slow?ms=1500', 0);
  await sleep(400);
  const statement = owner.api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
    json: {
      sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) AS n FROM c',
    },
  });
  await sleep(100);
  process.kill(-server.child.pid!, 'SIGINT');
  const answered = await call;
  t.is(answered.status, 200, 'the worker was not interrupted with the server');
  t.is(answered.body.toString(), 'answered after 1500 ms');
  const counted = await statement;
  t.is(counted.statusCode, 200, 'the database process was not interrupted either');
  t.deepEqual(json<{ result: Array<{ results: unknown[] }> }>(counted).result[0]!.results, [{ n: 3000000 }]);
  t.is(await server.exited, 0);
  t.true(server.output().includes('"msg":"stopped"'));
  t.deepEqual(await noneLeft(dataDir), [], 'workers and database processes stopped with the server');
});

test('a second signal during the shutdown forces the exit; workers do not outlive it', async (t) => {
  const { dataDir, server, site } = await serveWithFunction(t);
  const call = slowGet(server, site.subdomain, '/api/slow?ms=5000', 0).catch(() => null);
  await sleep(500);
  server.child.kill('SIGTERM');
  await sleep(300);
  t.is(server.child.exitCode, null, 'the first signal waits for the call in flight');
  server.child.kill('SIGINT');
  const started = Date.now();
  t.is(await server.exited, 1);
  t.true(Date.now() - started < 10_000, 'well before the call (5 s) or the grace period (15 s) would have ended');
  t.true(server.output().includes('"msg":"second signal; exiting without waiting for requests in flight"'));
  await call;
  t.deepEqual(await noneLeft(dataDir), []);
});

test('a repeated SIGTERM during the shutdown keeps the grace period; the call in flight finishes', async (t) => {
  const { dataDir, server, site } = await serveWithFunction(t);
  const call = slowGet(server, site.subdomain, '/api/slow?ms=2000', 0);
  await sleep(500);
  server.child.kill('SIGTERM');
  await sleep(50);
  server.child.kill('SIGTERM');
  server.child.kill('SIGHUP');
  const answered = await call;
  t.is(answered.status, 200);
  t.is(answered.body.toString(), 'answered after 2000 ms');
  t.is(await server.exited, 0);
  t.true(server.output().includes('already shutting down'));
  t.deepEqual(await noneLeft(dataDir), []);
});

interface LoadResult {
  /** Requests answered 200. */
  ok: number;
  /** What went wrong with requests sent before the signal. */
  failures: string[];
}

/**
 * A static load: `connections` keep-alive clients each asking for one file in a loop until told the
 * signal's time. Only requests sent before it must succeed: later ones may find the port closed.
 */
function staticLoad(server: ServeProcess, subdomain: string, urlPath: string, connections: number) {
  const url = new URL(server.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let signalledAt = Infinity;
  const result: LoadResult = { ok: 0, failures: [] };
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const req = http.get(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: urlPath,
          headers: { host: `${subdomain}.localhost:${url.port}` },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
    });
  const loops = Array.from({ length: connections }, async () => {
    while (Date.now() < signalledAt) {
      const sentAt = Date.now();
      try {
        const status = await once();
        if (status === 200) result.ok++;
        else if (sentAt < signalledAt) result.failures.push(`status ${status}`);
      } catch (err) {
        if (sentAt < signalledAt) result.failures.push((err as NodeJS.ErrnoException).code ?? String(err));
      }
    }
  });
  return {
    signalled: (at: number) => (signalledAt = at),
    done: async (): Promise<LoadResult> => {
      await Promise.all(loops);
      agent.destroy();
      return result;
    },
  };
}

type StopWay = 'the server process alone' | 'the process group of `make run`' | 'every process of the tree at once';

const stopsCleanly = test.macro(async (t, way: StopWay) => {
  const dataDir = await makeDataDir(t);
  // A grace well past what the calls need even when the whole suite loads both cores: 16 workers
  // starting at a lower CPU priority than the tests can take longer than 15 s then.
  const env = { BERTH_DATA_DIR: dataDir, BERTH_SHUTDOWN_GRACE_MS: '45000' };
  const server = await startServe(env, { viaMake: way === 'the process group of `make run`' });
  t.teardown(() => {
    try {
      process.kill(-server.child.pid!, 'SIGKILL');
    } catch {
      server.child.kill('SIGKILL');
    }
  });
  const owner = ownerOf(server);
  const { api } = owner;
  const site = json<{ id: string; bucketId: string; subdomain: string }>(
    await api.post('v0/sites', { json: { accountId: owner.id, name: 'stop' } }),
  );
  await deployFixture(owner, site.bucketId, 'slow');
  await putFile(owner, site.bucketId, 'web/index.html', Buffer.from('<h1>still here</h1>'), 'text/html');
  const database = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;

  const load = staticLoad(server, site.subdomain, '/index.html', 4);
  const calls = Array.from({ length: 16 }, () => slowGet(server, site.subdomain, '/api/slow?ms=2500', 0));
  const statement = api.post(`v0/sites/${site.id}/databases/${database.id}/query`, {
    json: {
      sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) AS n FROM c',
    },
  });
  await sleep(700);
  const children = processesMentioning(dataDir);
  t.true(children.length >= 2, 'a function worker and a database process run at the signal');

  load.signalled(Date.now());
  if (way === 'the server process alone') server.child.kill('SIGTERM');
  else if (way === 'the process group of `make run`') process.kill(-server.child.pid!, 'SIGTERM');
  else for (const pid of [server.child.pid!, ...children]) process.kill(pid, 'SIGTERM');

  for (const answered of await Promise.all(calls)) {
    t.is(answered.status, 200);
    t.is(answered.body.toString(), 'answered after 2500 ms');
  }
  const counted = await statement;
  t.is(counted.statusCode, 200, 'the statement in flight finished');
  const { ok, failures } = await load.done();
  t.deepEqual(failures, [], 'no static request sent before the signal failed');
  t.true(ok > 0);
  await server.exited;
  t.true(server.output().includes('"msg":"stopped"'));
  t.deepEqual(await noneLeft(dataDir), [], 'workers and database processes stopped with the server');

  const again = await startServe(env);
  t.teardown(() => void again.child.kill('SIGKILL'));
  const page = await apiClient(again.url).get('index.html', {
    headers: { host: `${site.subdomain}.localhost` },
    responseType: 'text',
  });
  t.is(page.statusCode, 200);
  t.is(page.body, '<h1>still here</h1>');
  again.child.kill('SIGTERM');
  t.is(await again.exited, 0);
});

test('stopping under load: SIGTERM to the server process alone', stopsCleanly, 'the server process alone');
test(
  'stopping under load: SIGTERM to the process group of `make run`',
  stopsCleanly,
  'the process group of `make run`',
);
test(
  'stopping under load: SIGTERM to every process of the tree at once, as systemd does',
  stopsCleanly,
  'every process of the tree at once',
);
