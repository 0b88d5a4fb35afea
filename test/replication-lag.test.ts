// Replication that does not stall others: while one tenant opens 40 cold site databases (each joins
// the node's replication as it opens), another tenant's writes reach its database's replica within 2 s.
// The replica is read from outside, as a restore does: each write is looked for in restores of the
// replica made back to back, and its lag counts from its acknowledgement to the start of the first
// restore that holds it.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import Database from 'better-sqlite3';
import { startBerth } from '../control-plane/server.ts';
import { replicaTarget, replicationTiming } from '../control-plane/site-databases/compose.ts';
import { listGenerations, restoreReplica } from '../control-plane/site-databases/replication/litestream.ts';
import { apiClient, json, makeDataDir, startTestBerth } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';

const COLD = 40;

/** Runs `each` over `items`, four at a time. */
async function inParallel<T>(items: T[], each: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    [0, 1, 2, 3].map(async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await each(item);
    }),
  );
}
const MAX_LAG_MS = 2000;

test('a tenant’s writes reach its replica within 2 s while another tenant opens 40 cold databases', async (t) => {
  t.timeout(240_000);
  const dataDir = await makeDataDir(t);
  const first = await startTestBerth({ dataDir });
  const busy = await first.newAccount('platform-admin');
  const coldBases: string[] = [];
  await inParallel([...Array(COLD).keys()], async (i) => {
    const { base, query } = await siteWithDatabase(busy, { name: `cold ${i}` });
    t.is((await query('CREATE TABLE t (n INTEGER, body BLOB)')).status, 200);
    coldBases.push(base);
  });
  const quiet = await siteWithDatabase(first.owner);
  t.is((await quiet.query('CREATE TABLE writes (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)')).status, 200);
  // Restarted: every database is cold, out of the replication until it is next opened.
  await first.berth.close();
  const berth = await startBerth(first.config);
  t.teardown(() => berth.close());
  const quietApi = apiClient(berth.url, first.owner.writeKey);
  const busyApi = apiClient(berth.url, busy.writeKey);
  const writeMs: number[] = [];
  const write = async (id: number) => {
    const sentAt = Date.now();
    const res = await quietApi.post(`${quiet.base}/query`, {
      json: { sql: 'INSERT INTO writes (id, at) VALUES (?, ?)', params: [id, Date.now()] },
    });
    t.is(res.statusCode, 200, JSON.stringify(res.body));
    writeMs.push(Date.now() - sentAt);
    return sentAt;
  };
  await write(0);

  const target = replicaTarget(first.config);
  const timing = replicationTiming(first.config);
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-replica-read-'));
  t.teardown(() => fs.rm(workDir, { recursive: true, force: true }));
  /** The newest row id the replica holds now, and when the restore that read it started. */
  const newestReplicated = async (): Promise<{ id: number; at: number }> => {
    const at = Date.now();
    const generations = await listGenerations(quiet.site.id, target, timing, workDir);
    const latest = generations.sort((a, b) => b.end.getTime() - a.end.getTime())[0];
    if (!latest) return { id: -1, at };
    const out = path.join(workDir, `restored-${at}.sqlite`);
    await restoreReplica(quiet.site.id, target, timing, workDir, out, { generation: latest.generation });
    const db = new Database(out, { readonly: true });
    try {
      return { id: (db.prepare('SELECT max(id) AS id FROM writes').get() as { id: number | null }).id ?? -1, at };
    } finally {
      db.close();
      for (const suffix of ['', '-wal', '-shm']) await fs.rm(`${out}${suffix}`, { force: true });
    }
  };
  const lagOf = async (id: number, writtenAt: number): Promise<number> => {
    for (;;) {
      const seen = await newestReplicated();
      if (seen.id >= id) return Math.max(0, seen.at - writtenAt);
      if (Date.now() - writtenAt > 60_000) return Number.POSITIVE_INFINITY;
    }
  };
  await lagOf(0, Date.now());

  let opening = true;
  const openStart = Date.now();
  const opened = (async () => {
    // Four at a time, as a tenant's parallel calls would, each writing a little (256 KiB) as it opens.
    await inParallel(coldBases, async (base) => {
      const res = await busyApi.post(`${base}/query`, {
        json: { sql: 'INSERT INTO t (n, body) VALUES (1, randomblob(262144))' },
      });
      t.is(res.statusCode, 200, JSON.stringify(json(res)));
    });
    opening = false;
    t.log(`opened ${COLD} cold databases in ${Date.now() - openStart} ms`);
  })();
  const lags: number[] = [];
  for (let id = 1; opening || lags.length < 5; id++) {
    lags.push(await lagOf(id, await write(id)));
    await sleep(200);
  }
  await opened;
  t.log(`${lags.length} writes, lag (ms): ${lags.join(', ')}; each write took (ms): ${writeMs.join(', ')}`);
  const worst = Math.max(...lags);
  t.true(worst < MAX_LAG_MS, `the worst lag was ${worst} ms`);
});
