// Fencing: a database node cut off from PostgreSQL, while its clients and the other nodes still reach
// it, stops taking writes for its databases before another node takes them over; the other node then
// serves them from their replicas; when the line comes back, the cut-off node sets its copy aside and
// serves nothing stale. Writes go through the other node, whose calls reach the database over the
// internal channel while the database stays where it was. (Shared metadata: the PostgreSQL pass.)
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { json, makeDataDir } from '../helpers/berth.ts';
import { freePort } from '../helpers/ports.ts';
import { onPostgres } from '../helpers/postgres.ts';
import { type ServeProcess, startServe } from '../helpers/process.ts';
import { ownerOf, sharedInstance, stopServed } from '../helpers/served.ts';
import { type TcpProxy, startTcpProxy } from '../helpers/tcp-proxy.ts';
import { until } from '../helpers/until.ts';

const cluster = onPostgres ? test.serial : test.skip;

let a: ServeProcess | undefined;
let b: ServeProcess | undefined;
let proxy: TcpProxy | undefined;

test.after.always(async () => {
  await stopServed([a, b]);
  await proxy?.close();
});

cluster(
  'a database node cut from PostgreSQL stops taking writes before the other takes its database over; back, it serves nothing stale',
  async (t) => {
    // The heartbeat lapses after BERTH_DATABASE_FAILOVER_MS (30 s); the node fences itself after 15.
    t.timeout(240_000);
    const root = await makeDataDir(t);
    const [dirA, dirB] = [path.join(root, 'a'), path.join(root, 'b')];
    const common = await sharedInstance(root, dirA);
    const metadata = new URL(common.BERTH_DATABASE_URL!);
    proxy = await startTcpProxy(metadata.hostname, Number(metadata.port));
    const throughProxy = new URL(metadata);
    throughProxy.hostname = '127.0.0.1';
    throughProxy.port = String(proxy.port);
    a = await startServe({
      ...common,
      BERTH_DATABASE_URL: throughProxy.toString(),
      BERTH_DATA_DIR: dirA,
      BERTH_NODE_ID: 'node-a',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    });
    const owner = ownerOf(a);
    // The database is made on A (the first node among equals for a call it answers), then B starts.
    const site = json<{ id: string }>(await owner.api.post('v0/sites', { json: { accountId: owner.id, name: 'cut' } }));
    const database = json<{ database: { id: string } }>(await owner.api.post(`v0/sites/${site.id}/databases`)).database;
    t.true(fs.existsSync(path.join(dirA, 'sites', site.id, 'db.sqlite')), 'the database is on node A');
    b = await startServe({
      ...common,
      BERTH_DATA_DIR: dirB,
      BERTH_NODE_ID: 'node-b',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    });
    const viaB = ownerOf(a, b.url).api;
    const base = `v0/sites/${site.id}/databases/${database.id}`;
    t.is((await viaB.post(`${base}/query`, { json: { sql: 'CREATE TABLE notes (n INTEGER)' } })).statusCode, 200);

    const answers: Array<{ n: number; at: number; status: number }> = [];
    let running = true;
    t.teardown(() => {
      running = false;
    });
    const writing = (async () => {
      for (let n = 0; running; n++) {
        const res = await viaB
          .post(`${base}/query`, { json: { sql: 'INSERT INTO notes VALUES (?)', params: [n] } })
          .catch(() => undefined);
        answers.push({ n, at: Date.now(), status: res?.statusCode ?? 0 });
        if (res?.statusCode !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await until(() => answers.filter((x) => x.status === 200).length >= 20, 'writes through B to the database on A');
    const early = answers.find((x) => x.status === 200)!.at;
    await until(async () => {
      const { latest } = json<{ latest: string | null }>(await viaB.get(`${base}/restore-points`));
      return latest !== null && Date.parse(latest) >= early;
    }, 'the first writes to reach the replica');

    proxy.cut();
    const cutAt = Date.now();
    // Refused while the database has no node that may take writes: A fenced itself, B has not taken over yet.
    await until(() => answers.some((x) => x.at > cutAt && x.status === 503), 'A to stop taking writes', {
      ms: 60_000,
    });
    const fencedAt = answers.find((x) => x.at > cutAt && x.status === 503)!.at;
    await until(() => answers.some((x) => x.at > fencedAt && x.status === 200), 'B to take the database over', {
      ms: 90_000,
    });
    const takenOverAt = answers.find((x) => x.at > fencedAt && x.status === 200)!.at;
    running = false;
    await writing;
    t.true(fencedAt - cutAt < 30_000, 'A stopped before its heartbeat lapsed for the others');
    t.true(
      answers.every((x) => x.status !== 200 || x.at < fencedAt || x.at >= takenOverAt),
      'no write was taken between A stopping and B taking over',
    );

    const rows = new Set(
      json<{ result: Array<{ results: Array<{ n: number }> }> }>(
        await viaB.post(`${base}/query`, { json: { sql: 'SELECT n FROM notes' } }),
      ).result[0]!.results.map((row) => row.n),
    );
    const acknowledged = answers.filter((x) => x.status === 200);
    const lost = acknowledged.filter((x) => !rows.has(x.n));
    t.deepEqual(
      lost.filter((x) => x.at < fencedAt - 2000 || x.at >= takenOverAt),
      [],
      'every write A took until 2 s before it stopped is there, and every one B took after',
    );
    t.log(
      `fenced ${fencedAt - cutAt} ms after the cut, taken over ${takenOverAt - cutAt} ms after it; acknowledged writes lost: ${lost.length} of ${acknowledged.length}`,
    );

    // The line comes back: A writes its heartbeat again, sets its copy aside, and serves nothing stale.
    proxy.mend();
    await until(
      () =>
        fs.existsSync(path.join(dirA, 'superseded')) &&
        fs.readdirSync(path.join(dirA, 'superseded')).some((name) => name.startsWith(site.id)),
      'A to set its copy aside',
      { ms: 60_000 },
    );
    t.false(fs.existsSync(path.join(dirA, 'sites', site.id)));
    // Once A has heard of the new placement (its change feed resyncs as it reconnects).
    await until(
      async () =>
        (await owner.api.post(`${base}/query`, { json: { sql: 'INSERT INTO notes VALUES (-1)' } })).statusCode === 200,
      'a write through A to reach the database where it is now',
    );
    t.true(fs.existsSync(path.join(dirB, 'sites', site.id, 'db.sqlite')));
  },
);
