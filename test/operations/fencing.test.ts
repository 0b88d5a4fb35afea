// Fencing: a database node cut off from PostgreSQL, while its clients and the other nodes still reach
// it, stops taking writes for its databases before another node takes them over; the other node then
// serves them from their replicas; when the line comes back, the cut-off node sets its copy aside and
// serves nothing stale. Writes go through the other node, whose calls reach the database as peer
// calls while the database stays where it was. (Shared metadata: the PostgreSQL pass.)
//
// Then the faults that broke it before, each with every acknowledged write read back: a cut that heals
// while the other node is recovering the database, and a link to PostgreSQL that grows slow instead of
// being cut, and a database node whose clock is behind by more than the fencing margin. Those run with
// BERTH_DATABASE_FAILOVER_MS at its least, 20 s (to keep the test short), so the 35 s of the cut and of
// the latency are scaled to it: 35 s / 30 s × 20 s, about 23 s.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
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
let storeProxy: TcpProxy | undefined;

test.after.always(async () => {
  await stopServed([a, b]);
  await proxy?.close();
  await storeProxy?.close();
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

const FAILOVER_MS = 20_000;
/** 35 s against the default failover time of 30 s, scaled to FAILOVER_MS. */
const FAULT_MS = Math.round((35_000 * FAILOVER_MS) / 30_000);

interface Answer {
  n: number;
  at: number;
  status: number;
}

/**
 * Two database nodes of one instance, failing over after FAILOVER_MS: A reaches PostgreSQL through
 * `proxy` and holds a site database; B reaches the object store through `storeProxy`. Writes go
 * through B, whose calls reach the database as peer calls wherever it is placed.
 */
async function pairWithDatabase(t: ExecutionContext, envA: Record<string, string> = {}) {
  await stopServed([a, b]);
  await proxy?.close();
  await storeProxy?.close();
  const root = await makeDataDir(t);
  const [dirA, dirB] = [path.join(root, 'a'), path.join(root, 'b')];
  const common: Record<string, string> = {
    ...(await sharedInstance(root, dirA)),
    BERTH_DATABASE_FAILOVER_MS: String(FAILOVER_MS),
  };
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
    ...envA,
  });
  const owner = ownerOf(a);
  const site = json<{ id: string }>(await owner.api.post('v0/sites', { json: { accountId: owner.id, name: 'f' } }));
  const database = json<{ database: { id: string } }>(await owner.api.post(`v0/sites/${site.id}/databases`)).database;
  t.true(fs.existsSync(path.join(dirA, 'sites', site.id, 'db.sqlite')), 'the database is on node A');
  const store = new URL(common.BERTH_S3_ENDPOINT!);
  storeProxy = await startTcpProxy(store.hostname, Number(store.port));
  b = await startServe({
    ...common,
    BERTH_S3_ENDPOINT: `http://127.0.0.1:${storeProxy.port}`,
    BERTH_DATA_DIR: dirB,
    BERTH_NODE_ID: 'node-b',
    BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
  });
  const viaB = ownerOf(a, b.url).api;
  const base = `v0/sites/${site.id}/databases/${database.id}`;
  t.is((await viaB.post(`${base}/query`, { json: { sql: 'CREATE TABLE notes (n INTEGER)' } })).statusCode, 200);

  const answers: Answer[] = [];
  let running = true;
  const writing = (async () => {
    for (let n = 0; running; n++) {
      const res = await viaB
        .post(`${base}/query`, { json: { sql: 'INSERT INTO notes VALUES (?)', params: [n] } })
        .catch(() => undefined);
      answers.push({ n, at: Date.now(), status: res?.statusCode ?? 0 });
      if (res?.statusCode !== 200) await sleep(100);
    }
  })();
  const stopWriting = async () => {
    running = false;
    await writing;
  };
  t.teardown(() => void stopWriting());
  await until(() => answers.filter((x) => x.status === 200).length >= 20, 'writes through B to the database on A');
  const early = answers.find((x) => x.status === 200)!.at;
  await until(async () => {
    const { latest } = json<{ latest: string | null }>(await viaB.get(`${base}/restore-points`));
    return latest !== null && Date.parse(latest) >= early;
  }, 'the first writes to reach the replica');
  /** Runs `work` on the instance's metadata, over a line of its own. */
  const inMetadata = async <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: common.BERTH_DATABASE_URL });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  /** Every acknowledged write not in the database, read wherever it is now. */
  const lostWrites = async () => {
    const rows = new Set(
      json<{ result: Array<{ results: Array<{ n: number }> }> }>(
        await viaB.post(`${base}/query`, { json: { sql: 'SELECT n FROM notes' } }),
      ).result[0]!.results.map((row) => row.n),
    );
    const acknowledged = answers.filter((x) => x.status === 200);
    return { acknowledged: acknowledged.length, lost: acknowledged.filter((x) => !rows.has(x.n)) };
  };
  return { dirA, dirB, siteId: site.id, answers, stopWriting, inMetadata, lostWrites };
}

cluster(
  'a database node cut from PostgreSQL whose line heals while the other node recovers its database keeps it, and no acknowledged write is lost',
  async (t) => {
    t.timeout(300_000);
    const pair = await pairWithDatabase(t);
    const { answers, siteId } = pair;
    // B's line to the object store is slow from now on, as for a database large enough that its
    // restore takes seconds: the heal then comes mid-recovery.
    storeProxy!.slow(1500);
    proxy!.cut();
    const cutAt = Date.now();
    await until(() => answers.some((x) => x.at > cutAt && x.status === 503), 'A to stop taking writes', {
      ms: 60_000,
    });
    const fencedAt = answers.find((x) => x.at > cutAt && x.status === 503)!.at;
    const lease = () =>
      pair.inMetadata(async (client) => {
        const { rows } = await client.query('SELECT to_node FROM database_moves WHERE site_id = $1', [siteId]);
        return rows.length > 0;
      });
    await until(lease, 'B to start recovering the database', { ms: 60_000, every: 20 });
    await sleep(Math.max(0, cutAt + FAULT_MS - Date.now()));
    t.true(await lease(), 'the recovery is still under way when the line heals');
    proxy!.mend();
    const healedAt = Date.now();
    await until(async () => !(await lease()), 'the recovery to end', { ms: 180_000, every: 200 });
    storeProxy!.slow(0);
    await until(() => answers.some((x) => x.at > healedAt && x.status === 200), 'writes to be taken again', {
      ms: 60_000,
    });
    const servedAgainAt = answers.find((x) => x.at > healedAt && x.status === 200)!.at;
    await pair.stopWriting();
    const { acknowledged, lost } = await pair.lostWrites();
    t.log(
      `cut ${healedAt - cutAt} ms; fenced ${fencedAt - cutAt} ms after the cut; writes taken again ${servedAgainAt - cutAt} ms after it; acknowledged writes lost: ${lost.length} of ${acknowledged}`,
    );
    t.deepEqual(lost, [], 'every acknowledged write is in the database');
    t.true(fencedAt - cutAt < FAILOVER_MS, 'A stopped before its heartbeat lapsed for the others');
    t.true(
      answers.every((x) => x.status !== 200 || x.at < fencedAt || x.at > healedAt),
      'no write was taken between A stopping and its line healing',
    );
    // A's heartbeat came back before the switch: the recovery gave up, and A keeps the database.
    const placed = await pair.inMetadata(
      async (client) =>
        (await client.query('SELECT node_id FROM databases WHERE site_id = $1', [siteId])).rows[0]?.node_id,
    );
    t.is(placed, 'node-a');
    t.false(fs.existsSync(path.join(pair.dirB, 'sites', siteId)), 'B kept no copy');
    t.true(fs.existsSync(path.join(pair.dirA, 'sites', siteId, 'db.sqlite')));
  },
);

cluster(
  'a database node whose link to PostgreSQL grows slow, not cut, stops taking writes before the other takes its database over, and no acknowledged write is lost',
  async (t) => {
    t.timeout(420_000);
    // Every statement holds a connection for its round trip: A's pool is large enough that its link,
    // not its pool, is what is slow.
    const pair = await pairWithDatabase(t, { BERTH_DATABASE_POOL: '40' });
    const { answers, siteId } = pair;
    // The latency grows a step at a time, each step smaller than the fencing margin, as a link degrades.
    const startedAt = Date.now();
    const steps = 16;
    for (let step = 1; step <= steps; step++) {
      proxy!.slow(Math.round((FAULT_MS * step) / steps));
      await sleep(6000);
    }
    const fullAt = Date.now();
    const fenced = answers.find((x) => x.at > startedAt && x.status === 503);
    t.truthy(fenced, 'A stopped taking writes while its link grew slow');
    const fencedAt = fenced!.at;
    await until(() => answers.some((x) => x.at > fencedAt && x.status === 200), 'B to take the database over', {
      ms: 120_000,
    });
    const takenOverAt = answers.find((x) => x.at > fencedAt && x.status === 200)!.at;
    // The latency stays for FAULT_MS at its full value at least, then goes.
    await sleep(Math.max(0, fullAt + FAULT_MS - Date.now()));
    proxy!.slow(0);
    await until(
      () =>
        fs.existsSync(path.join(pair.dirA, 'superseded')) &&
        fs.readdirSync(path.join(pair.dirA, 'superseded')).some((name) => name.startsWith(siteId)),
      'A to set its copy aside',
      { ms: 120_000 },
    );
    await pair.stopWriting();
    const { acknowledged, lost } = await pair.lostWrites();
    t.log(
      `fenced ${fencedAt - startedAt} ms after the link began to slow; taken over ${takenOverAt - startedAt} ms after it; acknowledged writes lost: ${lost.length} of ${acknowledged}`,
    );
    t.deepEqual(lost, [], 'every acknowledged write is in the database');
    t.true(
      answers.every((x) => x.status !== 200 || x.at < fencedAt || x.at >= takenOverAt),
      'no write was taken between A stopping and B taking over',
    );
    t.true(fs.existsSync(path.join(pair.dirB, 'sites', siteId, 'db.sqlite')), 'the database is on B');
  },
);

cluster(
  'a database node whose clock is 25 s behind is not taken for lost: it keeps its database and no acknowledged write is lost',
  async (t) => {
    t.timeout(240_000);
    // More than the fencing margin (10 s here) and less than the 30 s of leeway peer calls' signatures have.
    const pair = await pairWithDatabase(t, {
      NODE_OPTIONS: `--import=${path.resolve(import.meta.dirname, '../fixtures/skewed-clock.mjs')}`,
      SKEWED_CLOCK_MS: '-25000',
    });
    const { answers, siteId } = pair;
    const from = answers.length;
    // Past the failover time and a few of B's looks for lost nodes.
    await sleep(FAILOVER_MS + 15_000);
    await pair.stopWriting();
    const { acknowledged, lost } = await pair.lostWrites();
    const refused = answers.slice(from).filter((x) => x.status !== 200).length;
    t.log(`writes refused meanwhile: ${refused}; acknowledged writes lost: ${lost.length} of ${acknowledged}`);
    t.deepEqual(lost, [], 'every acknowledged write is in the database');
    const placed = await pair.inMetadata(
      async (client) =>
        (await client.query('SELECT node_id FROM databases WHERE site_id = $1', [siteId])).rows[0]?.node_id,
    );
    t.is(placed, 'node-a', 'A was never taken for lost');
    t.is(refused, 0, 'and its database never stopped taking writes');
  },
);
