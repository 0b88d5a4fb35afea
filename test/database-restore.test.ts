// Time travel: a site database put back as it was at a moment, from its replica (Litestream, to a
// folder on the embedded defaults and to the object store on the shared backends), through the API.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, apiClient, json, makeDataDir, startTestBerth } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { processesMentioning, startServe } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';
import { until } from './helpers/until.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

interface Points {
  earliest: string | null;
  latest: string | null;
}

/** Waits until the replica holds every write made up to now. */
async function replicated(base: string): Promise<Points> {
  const now = Date.now();
  return until(async () => {
    const points = json<Points>(await t0.owner.read.get(`${base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) >= Math.floor(now / 1000) * 1000 && points;
  }, 'the writes to reach the replica');
}

const second = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString();

test.serial(
  'a restore brings back a moment’s rows and migrations, and the moment before it stays restorable',
  async (t) => {
    const { base, query } = await siteWithDatabase(t0.owner);
    const migrate = (migrations: Array<{ name: string; sql: string }>) =>
      t0.owner.api.post(`${base}/migrations/apply`, { json: { migrations, confirm: true } });
    const history = [
      { name: '0001_notes.sql', sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);' },
      { name: '0002_pinned.sql', sql: 'ALTER TABLE notes ADD COLUMN pinned INTEGER;' },
    ];
    t.is((await migrate(history.slice(0, 1))).statusCode, 200);
    for (const body of ['one', 'two', 'three']) await query('INSERT INTO notes (body) VALUES (?)', [body]);
    await replicated(base);
    await sleep(1500);
    const t1 = Date.now();
    await sleep(2500);
    t.is((await migrate(history)).statusCode, 200);
    const deleted = await query('DELETE FROM notes WHERE id > 1');
    t.like(deleted.body.result[0]!.meta, { changes: 2 });
    await replicated(base);

    const restored = await t0.owner.api.post(`${base}/restore`, { json: { at: second(t1 + 1000) } });
    t.is(restored.statusCode, 200, JSON.stringify(restored.body));
    const answer = json<{ database: { id: string; status: string }; restoredTo: string; restoredFrom: string }>(
      restored,
    );
    t.is(answer.restoredTo, second(t1 + 1000));
    t.is(answer.database.status, 'READY');
    t.true(Date.parse(answer.restoredFrom) > t1);
    const rows = await query('SELECT body FROM notes ORDER BY id');
    t.deepEqual(
      rows.body.result[0]!.results.map((r) => r.body),
      ['one', 'two', 'three'],
    );
    // The ledger came back with the rows: the second migration is pending again, and applies.
    const ledger = json<{ applied: Array<{ name: string }> }>(await t0.owner.read.get(`${base}/migrations`));
    t.deepEqual(
      ledger.applied.map((m) => m.name),
      ['0001_notes.sql'],
    );

    // Undone: the moment before the restore has the deletion and the second migration.
    await replicated(base);
    const undone = await t0.owner.api.post(`${base}/restore`, { json: { at: answer.restoredFrom } });
    t.is(undone.statusCode, 200, JSON.stringify(undone.body));
    const after = await query('SELECT body, pinned FROM notes ORDER BY id');
    t.deepEqual(after.body.result[0]!.results, [{ body: 'one', pinned: null }]);
    t.deepEqual(
      json<{ applied: Array<{ name: string }> }>(await t0.owner.read.get(`${base}/migrations`)).applied.map(
        (m) => m.name,
      ),
      ['0001_notes.sql', '0002_pinned.sql'],
    );
    // The restored database goes on taking writes, and replicating them.
    t.is((await query('INSERT INTO notes (body) VALUES (?)', ['four'])).status, 200);
    await replicated(base);
  },
);

test.serial('a moment outside what the replica holds is refused with the range it does hold', async (t) => {
  const { base, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE t (n INTEGER)');
  const points = await replicated(base);
  t.truthy(points.earliest);
  // The database in use: how its replication goes, and what its replica takes.
  const replication = await until(async () => {
    const { replication } = json<{
      replication: { lagMs: number; replicatedAt: string | null; replicaBytes: number } | null;
    }>(await t0.owner.read.get(`${base}/restore-points`));
    return replication?.replicatedAt ? replication : undefined;
  }, 'the replicator to see the database shipped');
  t.true(replication.replicaBytes > 0);
  t.is(replication.lagMs, 0);
  const ready = json<{ ready: boolean; replication: string }>(await t0.anonymous.get('readyz'));
  t.like(ready, { ready: true, replication: 'ok' });
  for (const at of [
    new Date(Date.now() - 8 * 24 * 3600_000).toISOString(),
    new Date(Date.now() + 3600_000).toISOString(),
  ]) {
    const refused = await t0.owner.api.post(`${base}/restore`, { json: { at } });
    t.is(refused.statusCode, 422);
    const { error } = json(refused);
    t.is(error.code, 'restore_point_unavailable');
    // What the replica held then and holds now, should the range ever be missing.
    const why = async () =>
      `refused with ${JSON.stringify(error)}; the range before: ${JSON.stringify(points)}, now: ${JSON.stringify(json(await t0.owner.read.get(`${base}/restore-points`)))}`;
    if (!error.details?.earliest || !error.details?.latest) t.fail(await why());
    t.truthy(error.details?.earliest);
    t.truthy(error.details?.latest);
  }
  const malformed = await t0.owner.api.post(`${base}/restore`, { json: { at: 'yesterday' } });
  t.is(malformed.statusCode, 400);
  t.is(json(malformed).error.code, 'invalid_request');
  // A READ key sees the range and cannot restore.
  const byReader = await t0.owner.read.post(`${base}/restore`, { json: { at: points.latest } });
  t.is(byReader.statusCode, 403);
  t.is(json(byReader).error.code, 'forbidden');
});

test.serial(
  'kill -9 of the server under writes: nothing acknowledged is lost, its replicator does not outlive it, and replication resumes by itself',
  async (t) => {
    const dataDir = await makeDataDir(t);
    const env = { BERTH_DATA_DIR: dataDir };
    let server = await startServe(env);
    t.teardown(() => {
      server.child.kill('SIGKILL');
    });
    const owner = ownerOf(server);
    const { base, query } = await siteWithDatabase(owner);
    await query('CREATE TABLE t (n INTEGER)');
    const acknowledged: number[] = [];
    let running = true;
    const writing = (async () => {
      for (let n = 0; running; n++) {
        const res = await owner.api
          .post(`${base}/query`, { json: { sql: 'INSERT INTO t VALUES (?)', params: [n] } })
          .catch(() => undefined);
        if (res?.statusCode === 200) acknowledged.push(n);
      }
    })();
    await until(() => acknowledged.length >= 30, 'writes before the kill');
    server.child.kill('SIGKILL');
    await server.exited;
    running = false;
    await writing;
    const config = path.join(dataDir, 'runtime', 'replication', 'engines');
    await until(() => processesMentioning(config).length === 0, 'the replicator to end with its server', {
      ms: 10_000,
    });

    server = await startServe(env);
    const again = apiClient(server.url, owner.writeKey);
    const rows = json<{ result: Array<{ results: Array<{ n: number }> }> }>(
      await again.post(`${base}/query`, { json: { sql: 'SELECT n FROM t ORDER BY n' } }),
    ).result[0]!.results.map((row) => row.n);
    t.deepEqual(
      acknowledged.filter((n) => !rows.includes(n)),
      [],
      'every acknowledged write is in the database',
    );
    // Replication resumes: a write after the restart reaches the replica, and a restore to it holds it.
    t.is((await again.post(`${base}/query`, { json: { sql: 'INSERT INTO t VALUES (-1)' } })).statusCode, 200);
    // A moment a little after the write: a restore holds what was written about a second before it.
    const written = Math.floor(Date.now() / 1000) * 1000 + 2000;
    await until(async () => {
      const { latest } = json<Points>(await again.get(`${base}/restore-points`));
      return latest !== null && Date.parse(latest) >= written;
    }, 'the write after the restart to reach the replica');
    const restored = await again.post(`${base}/restore`, { json: { at: new Date(written).toISOString() } });
    t.is(restored.statusCode, 200, JSON.stringify(restored.body));
    const count = json<{ result: Array<{ results: Array<{ n: number }> }> }>(
      await again.post(`${base}/query`, { json: { sql: 'SELECT count(*) AS n FROM t WHERE n = -1' } }),
    ).result[0]!.results[0]!.n;
    t.is(count, 1);
  },
);
