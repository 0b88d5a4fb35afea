// The replicator (control-plane/site-databases/replication/) held to one contract on both replica
// targets: a folder, and the object store in the pass that runs one. The engine is the real Litestream
// and the databases real SQLite files in WAL mode, written the way a database process writes them
// (synchronous=FULL, no checkpoints of its own).
import crypto from 'node:crypto';
import { mkdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import Database from 'better-sqlite3';
import pino from 'pino';
import {
  listGenerations,
  type ReplicaTarget,
  type ReplicationTiming,
  restoreReplica,
} from '../../control-plane/site-databases/replication/litestream.ts';
import { DEFAULTS } from '../../control-plane/config.ts';
import { Replicator } from '../../control-plane/site-databases/replication/replicator.ts';
import { SiteReplicas } from '../../control-plane/site-databases/replication/site-replicas.ts';
import { SiteDatabases } from '../../control-plane/site-databases/local-provider.ts';
import { resolveDenoBinary } from '../../runtime-host/deno-binary.ts';
import { ensureBucket, objectStoreEndpoint, onObjectStore } from '../helpers/object-store.ts';
import { until } from '../helpers/until.ts';

const timing: ReplicationTiming = { retentionMs: 7 * 24 * 3600_000, snapshotIntervalMs: 24 * 3600_000 };

interface Target {
  name: string;
  skip?: string;
  make(root: string): Promise<ReplicaTarget>;
}

const targets: Target[] = [
  { name: 'folder', make: async (root) => ({ kind: 'dir', dir: path.join(root, 'replicas') }) },
  {
    name: 'object store',
    ...(onObjectStore ? {} : { skip: 'the object store runs in the pass on the shared backends' }),
    async make() {
      const bucket = `berth-replicas-${crypto.randomBytes(6).toString('hex')}`;
      await ensureBucket(bucket);
      return {
        kind: 's3',
        bucket,
        prefix: 'instance/',
        endpoint: objectStoreEndpoint!,
        region: 'us-east-1',
        forcePathStyle: true,
      };
    },
  },
];

interface Setup {
  root: string;
  target: ReplicaTarget;
  replicator: Replicator;
  open(siteId: string): { db: Database.Database; file: string };
}

async function setup(
  t: ExecutionContext,
  target: Target,
  holds?: (siteIds: string[]) => Promise<Set<string>>,
): Promise<Setup> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-replicator-'));
  const replicaTarget = await target.make(root);
  const replicator = new Replicator({
    workDir: path.join(root, 'runtime', 'replication'),
    target: replicaTarget,
    timing,
    log: pino({ level: 'silent' }),
    ...(holds ? { holds } : {}),
  });
  const dbs: Database.Database[] = [];
  t.teardown(async () => {
    await replicator.close();
    for (const db of dbs) db.close();
    await fs.rm(root, { recursive: true, force: true });
  });
  return {
    root,
    target: replicaTarget,
    replicator,
    open(siteId) {
      const file = path.join(root, 'sites', siteId, 'db.sqlite');
      mkdirSync(path.dirname(file), { recursive: true });
      const db = new Database(file);
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.pragma('wal_autocheckpoint = 0');
      db.pragma('busy_timeout = 5000');
      dbs.push(db);
      return { db, file };
    },
  };
}

const rowsOf = (file: string): number[] => {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT n FROM t ORDER BY n').all() as Array<{ n: number }>).map((r) => r.n);
  } finally {
    db.close();
  }
};

for (const target of targets) {
  const maybe = target.skip ? test.skip : test.serial;

  maybe(`${target.name}: a commit reaches the replica within about a second and restores whole`, async (t) => {
    const s = await setup(t, target);
    const siteId = crypto.randomUUID();
    const { db, file } = s.open(siteId);
    await s.replicator.watch(siteId, file);
    db.exec('CREATE TABLE t (n INTEGER)');
    const insert = db.prepare('INSERT INTO t (n) VALUES (?)');
    for (let n = 1; n <= 20; n++) {
      insert.run(n);
      s.replicator.wrote(siteId, Date.now());
    }
    await until(
      () => s.replicator.status(siteId)?.upToDate && s.replicator.status(siteId)?.replicatedAt,
      'the writes to be replicated',
    );
    const generations = await listGenerations(siteId, s.target, timing, path.join(s.root, 'work'));
    t.is(generations.length, 1);
    const out = path.join(s.root, 'restored.sqlite');
    await restoreReplica(siteId, s.target, timing, path.join(s.root, 'work'), out, {
      generation: generations[0]!.generation,
    });
    t.deepEqual(
      rowsOf(out),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
  });

  maybe(`${target.name}: a database the node does not hold is never replicated from it`, async (t) => {
    // Two nodes that both have a file of one database (one was cut off while the other took it over):
    // only the node the metadata places it on writes its replica.
    const held = crypto.randomUUID();
    const elsewhere = crypto.randomUUID();
    const s = await setup(t, target, async (siteIds) => new Set(siteIds.filter((id) => id === held)));
    for (const siteId of [held, elsewhere]) {
      const { db, file } = s.open(siteId);
      await s.replicator.watch(siteId, file);
      db.exec('CREATE TABLE t (n INTEGER)');
      db.prepare('INSERT INTO t (n) VALUES (1)').run();
      s.replicator.wrote(siteId, Date.now());
    }
    await until(
      () => s.replicator.status(held)?.upToDate && s.replicator.status(held)?.replicatedAt,
      'the held database to be replicated',
    );
    const work = path.join(s.root, 'work');
    t.is((await listGenerations(held, s.target, timing, work)).length, 1);
    t.deepEqual(await listGenerations(elsewhere, s.target, timing, work), [], 'no generation of the other');
    t.is(s.replicator.status(elsewhere), null, 'and it is not followed');
  });

  maybe(`${target.name}: a restore to a moment gives the rows of that moment`, async (t) => {
    const s = await setup(t, target);
    const siteId = crypto.randomUUID();
    const { db, file } = s.open(siteId);
    await s.replicator.watch(siteId, file);
    db.exec('CREATE TABLE t (n INTEGER)');
    db.prepare('INSERT INTO t (n) VALUES (1), (2), (3)').run();
    s.replicator.wrote(siteId, Date.now());
    await until(() => s.replicator.status(siteId)?.upToDate, 'the writes to be replicated');
    // Whole seconds: the object store dates what it holds to the second.
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const t1 = new Date();
    await new Promise((resolve) => setTimeout(resolve, 2100));
    db.prepare('DELETE FROM t WHERE n > 1').run();
    s.replicator.wrote(siteId, Date.now());
    await until(() => s.replicator.status(siteId)?.upToDate, 'the writes to be replicated');
    const [generation] = await listGenerations(siteId, s.target, timing, path.join(s.root, 'work'));
    const then = path.join(s.root, 'then.sqlite');
    await restoreReplica(siteId, s.target, timing, path.join(s.root, 'work'), then, {
      generation: generation!.generation,
      at: t1,
    });
    t.deepEqual(rowsOf(then), [1, 2, 3]);
    const now = path.join(s.root, 'now.sqlite');
    await restoreReplica(siteId, s.target, timing, path.join(s.root, 'work'), now, {
      generation: generation!.generation,
    });
    t.deepEqual(rowsOf(now), [1]);
  });

  maybe(`${target.name}: a database taken out of the set ships its last writes first`, async (t) => {
    const s = await setup(t, target);
    const [a, b] = [crypto.randomUUID(), crypto.randomUUID()];
    const first = s.open(a);
    const second = s.open(b);
    await Promise.all([s.replicator.watch(a, first.file), s.replicator.watch(b, second.file)]);
    first.db.exec('CREATE TABLE t (n INTEGER)');
    second.db.exec('CREATE TABLE t (n INTEGER)');
    first.db.prepare('INSERT INTO t (n) VALUES (7)').run();
    // At once: the engine has not polled since the write.
    await s.replicator.unwatch(a);
    t.is(s.replicator.status(a), null);
    const [generation] = await listGenerations(a, s.target, timing, path.join(s.root, 'work'));
    const out = path.join(s.root, 'a.sqlite');
    await restoreReplica(a, s.target, timing, path.join(s.root, 'work'), out, {
      generation: generation!.generation,
    });
    t.deepEqual(rowsOf(out), [7]);
    // The other database goes on being replicated by the restarted engine.
    second.db.prepare('INSERT INTO t (n) VALUES (8)').run();
    s.replicator.wrote(b, Date.now());
    await until(() => s.replicator.status(b)?.upToDate, 'the other database to be replicated');
    t.true(s.replicator.restarts >= 2);
  });
}

for (const target of targets) {
  const maybe = target.skip ? test.skip : test.serial;

  maybe(
    `${target.name}: a provider's dropped copy (a failed move or recovery) leaves the replica; a deleted database takes it along`,
    async (t) => {
      const root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-replicas-'));
      const replicas = new SiteReplicas({
        target: await target.make(root),
        timing,
        workDir: path.join(root, 'runtime', 'replication'),
        maxBytes: DEFAULTS.databaseReplicaMaxBytes,
        log: pino({ level: 'silent' }),
      });
      const local = new SiteDatabases({
        dataDir: path.join(root, 'data'),
        denoPath: resolveDenoBinary(),
        denoDir: path.join(root, 'deno-dir'),
        statementTimeoutMs: 5000,
        maxProcesses: 2,
        idleMs: 10_000,
        maxBytes: 8 * 1024 * 1024,
        replicas,
      });
      t.teardown(async () => {
        await local.close();
        await replicas.close();
        await fs.rm(root, { recursive: true, force: true });
      });
      const siteId = crypto.randomUUID();
      await local.create(siteId);
      await local.run(siteId, { sql: 'CREATE TABLE t (n INTEGER)', params: [] }, 'api');
      await local.run(siteId, { sql: 'INSERT INTO t VALUES (1)', params: [] }, 'api');
      await until(async () => (await local.restorePoints(siteId)).earliest, 'the replica to hold the database');
      await local.dropCopy(siteId);
      t.truthy((await local.restorePoints(siteId)).earliest, 'the replica belongs to the database, wherever it is');
      await local.remove(siteId);
      t.is((await local.restorePoints(siteId)).earliest, null, 'a deleted database’s history goes with it');
    },
  );
}

/** The newest row of `siteId`'s replica (0: none), restored whole by the engine's own command. */
async function newestReplicated(s: Setup, siteId: string): Promise<number> {
  const work = path.join(s.root, 'work');
  const latest = (await listGenerations(siteId, s.target, timing, work)).sort(
    (a, b) => b.end.getTime() - a.end.getTime(),
  )[0];
  if (!latest) return 0;
  const out = path.join(s.root, `restored-${crypto.randomUUID()}.sqlite`);
  await restoreReplica(siteId, s.target, timing, work, out, { generation: latest.generation });
  try {
    return Math.max(0, ...rowsOf(out));
  } finally {
    for (const suffix of ['', '-wal', '-shm']) await fs.rm(`${out}${suffix}`, { force: true });
  }
}

for (const target of targets) {
  const maybe = target.skip ? test.skip : test.serial;

  maybe(
    `${target.name}: a database's writes reach the replica within 2 s while 40 others join a set of 200`,
    async (t) => {
      t.timeout(300_000);
      const s = await setup(t, target);
      const make = (n: number) =>
        Array.from({ length: n }, () => {
          const siteId = crypto.randomUUID();
          const { db, file } = s.open(siteId);
          db.exec('CREATE TABLE t (n INTEGER)');
          db.prepare('INSERT INTO t (n) VALUES (1)').run();
          return { siteId, file };
        });
      // Other tenants' databases in use, and the one whose lag is measured.
      await Promise.all(make(200).map(({ siteId, file }) => s.replicator.watch(siteId, file)));
      const quiet = crypto.randomUUID();
      const { db, file } = s.open(quiet);
      db.exec('CREATE TABLE t (n INTEGER)');
      await s.replicator.watch(quiet, file);
      const cold = make(40);

      let joining = true;
      const joined = (async () => {
        // Four at a time, as a tenant's parallel calls open them.
        const queue = [...cold];
        await Promise.all(
          [0, 1, 2, 3].map(async () => {
            for (let next = queue.shift(); next; next = queue.shift()) await s.replicator.watch(next.siteId, next.file);
          }),
        );
        joining = false;
      })();
      const lags: number[] = [];
      for (let n = 1; joining || lags.length < 5; n++) {
        const writtenAt = Date.now();
        db.prepare('INSERT INTO t (n) VALUES (?)').run(n);
        s.replicator.wrote(quiet, writtenAt);
        for (;;) {
          const startedAt = Date.now();
          if ((await newestReplicated(s, quiet)) >= n) {
            lags.push(startedAt - writtenAt);
            break;
          }
          if (startedAt - writtenAt > 60_000) {
            lags.push(Number.POSITIVE_INFINITY);
            break;
          }
        }
      }
      await joined;
      t.log(`lags (ms): ${lags.join(', ')}; engine starts: ${s.replicator.restarts}`);
      t.true(Math.max(...lags) < 2000, `the worst lag was ${Math.max(...lags)} ms`);
    },
  );
}
