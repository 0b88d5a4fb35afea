// The site database provider (control-plane/site-databases/provider.ts) held to one contract
// by both of its implementations: `local`, the databases in this node's data dir, each served by a Deno
// process of its own; and `placed`, a node's PlacedSiteDatabases calling for a database the metadata
// places on another node. That node is reached by peer calls without their network hop
// (helpers/in-process-peers.ts): its placement check, its provider and the JSON both ways are real.
// The tests run one at a time and each uses one database, so few Deno processes run at once.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import pino from 'pino';
import type { Knex } from 'knex';
import { PlacedSiteDatabases } from '../../control-plane/site-databases/cluster/placed-provider.ts';
import type { CallServer } from '../../control-plane/site-databases/cluster/peer-server.ts';
import { resolveDenoBinary } from '../../runtime-host/deno-binary.ts';
import { LEDGER_TABLE } from '../../control-plane/site-databases/protocol.ts';
import {
  type SiteDatabaseProvider,
  type Statement,
  StatementError,
  isBranchNotHere,
} from '../../control-plane/site-databases/provider.ts';
import { branchName } from '../../control-plane/site-databases/branch-names.ts';
import { SiteDatabases } from '../../control-plane/site-databases/local-provider.ts';
import { eachMetadataBackend } from '../helpers/each-adapter.ts';
import { InProcessPeers } from '../helpers/in-process-peers.ts';
import { seedDatabase, seedNode, seedSite } from '../helpers/metadata-rows.ts';

const STATEMENT_TIMEOUT_MS = 3_000;
const MAX_BYTES = 8 * 1024 * 1024;
const NODE_A = 'http://node-a.contract';
const NODE_B = 'http://node-b.contract';

interface Adapter {
  name: 'local' | 'placed';
  provider: SiteDatabaseProvider;
  /** The SiteDatabases whose files hold the databases: this node's, or the other node's. */
  holder: SiteDatabases;
  /** A site that may have a database: placed, for `placed`, on the other node. */
  newSite(): Promise<string>;
  /** What services do before a removal (the placement row deleted); says which node held the database. */
  unplace(siteId: string): Promise<string | undefined>;
  close(): Promise<void>;
}

let root: string;
const adapters: Adapter[] = [];

function siteDatabases(dir: string): SiteDatabases {
  return new SiteDatabases({
    dataDir: path.join(root, dir),
    denoPath: resolveDenoBinary(),
    denoDir: path.join(root, 'deno-dir'),
    statementTimeoutMs: STATEMENT_TIMEOUT_MS,
    maxProcesses: 3,
    idleMs: 10_000,
    maxBytes: MAX_BYTES,
  });
}

function local(): Adapter {
  const holder = siteDatabases('local');
  return {
    name: 'local',
    provider: holder,
    holder,
    newSite: async () => crypto.randomUUID(),
    unplace: async () => undefined,
    close: () => holder.close(),
  };
}

/** The database node's side of peer calls, answering for `databases` as the metadata places them. */
function callServer(databases: SiteDatabases, placed: PlacedSiteDatabases, dir: string): CallServer {
  const refused = async (): Promise<never> => {
    throw new Error('moves are not part of the provider');
  };
  return {
    provider: databases,
    whereIs: (siteId) => placed.whereIs(siteId),
    moveOut: refused,
    recoverHere: refused,
    tmpDir: path.join(root, dir, 'tmp'),
    log: pino({ level: 'silent' }),
  };
}

/** Node A's provider, for databases the metadata places on node B. */
async function placed(
  db: Knex,
  closeMetadata: () => Promise<void>,
): Promise<Adapter & { nodeA: SiteDatabases; db: Knex }> {
  await seedNode(db, 'node-a', NODE_A);
  await seedNode(db, 'node-b', NODE_B);
  const nodeA = siteDatabases('node-a');
  const nodeB = siteDatabases('node-b');
  const peers = new InProcessPeers('node-a');
  const options = { db, statementTimeoutMs: STATEMENT_TIMEOUT_MS };
  const provider = new PlacedSiteDatabases({ ...options, nodeId: 'node-a', local: nodeA, peers });
  const providerB = new PlacedSiteDatabases({ ...options, nodeId: 'node-b', local: nodeB, peers: null });
  peers.serve(NODE_A, callServer(nodeA, provider, 'node-a'));
  peers.serve(NODE_B, callServer(nodeB, providerB, 'node-b'));
  return {
    name: 'placed',
    provider,
    holder: nodeB,
    nodeA,
    db,
    async newSite() {
      const { siteId } = await seedSite(db);
      await seedDatabase(db, siteId, 'node-b');
      return siteId;
    },
    async unplace(siteId) {
      await db('databases').where({ site_id: siteId }).delete();
      // As the change feed tells every node.
      provider.forget(siteId);
      providerB.forget(siteId);
      return 'node-b';
    },
    async close() {
      await provider.close();
      await providerB.close();
      await closeMetadata();
    },
  };
}

let placedAdapter: Awaited<ReturnType<typeof placed>>;
// Placements are kept in shared metadata: PostgreSQL's where this process can reach it, as in a cluster.
const backends = eachMetadataBackend();
const placements = backends.find((b) => b.name === 'postgres') ?? backends[0]!;

test.before(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-contract-'));
  const opened = await placements.open();
  placedAdapter = await placed(opened.metadata.db, opened.close);
  adapters.push(local(), placedAdapter);
});

test.after.always(async () => {
  for (const adapter of adapters) await adapter.close();
  await fs.rm(root, { recursive: true, force: true });
});

const statement = (sql: string, ...params: Statement['params']): Statement => ({ sql, params });

/** The adapter's provider with a new database of its own. */
async function withDatabase(adapter: Adapter) {
  const siteId = await adapter.newSite();
  await adapter.provider.create(siteId);
  const run = (sql: string, ...params: Statement['params']) =>
    adapter.provider.run(siteId, statement(sql, ...params), 'api');
  const rows = async (sql: string) => (await run(sql)).rows;
  return { siteId, run, rows };
}

/** The StatementError a provider call failed with. */
async function failure(t: { throwsAsync: (p: Promise<unknown>) => Promise<unknown> }, call: Promise<unknown>) {
  const err = await t.throwsAsync(call);
  if (!(err instanceof StatementError)) throw new Error(`not a StatementError: ${String(err)}`);
  return err;
}

for (const name of ['local', 'placed'] as const) {
  const adapter = () => adapters.find((a) => a.name === name)!;
  const title = (text: string) => `[${name}] ${text}`;

  test.serial(
    title('create is safe to repeat, and a statement answers its rows, changes and last row id'),
    async (t) => {
      const { siteId, run } = await withDatabase(adapter());
      await adapter().provider.create(siteId);
      t.like(await run('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, score REAL, seen INTEGER, raw BLOB)'), {
        rows: [],
        changes: 0,
      });
      const inserted = await run(
        "INSERT INTO notes (body, score, seen, raw) VALUES (?, ?, ?, x'00ff10')",
        'hello',
        1.5,
        true,
      );
      t.like(inserted, { rows: [], changes: 1, lastRowId: 1 });
      t.is(typeof inserted.durationMs, 'number');
      await run('INSERT INTO notes (body, score, seen) VALUES (?, ?, ?)', null, -2, false);
      const read = await run('SELECT id, body, score, seen, raw FROM notes ORDER BY id');
      t.deepEqual(read.rows, [
        { id: 1, body: 'hello', score: 1.5, seen: 1, raw: Buffer.from([0, 255, 16]) },
        { id: 2, body: null, score: -2, seen: 0, raw: null },
      ]);
      t.true(Buffer.isBuffer(read.rows[0]!.raw), 'bytes come back as bytes');
      await adapter().provider.create(siteId);
      t.is((await run('SELECT COUNT(*) AS n FROM notes')).rows[0]!.n, 2, 'a repeated create keeps what is there');
    },
  );

  test.serial(title('batch runs its statements in one transaction: all of them or none'), async (t) => {
    const { siteId, run, rows } = await withDatabase(adapter());
    const { provider } = adapter();
    await run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
    const results = await provider.batch(
      siteId,
      [
        statement('INSERT INTO t (v) VALUES (?)', 'a'),
        statement('INSERT INTO t (v) VALUES (?)', 'b'),
        statement('SELECT v FROM t ORDER BY id'),
      ],
      'function',
    );
    t.deepEqual(
      results.map((r) => ({ rows: r.rows, changes: r.changes, lastRowId: r.lastRowId })),
      [
        { rows: [], changes: 1, lastRowId: 1 },
        { rows: [], changes: 1, lastRowId: 2 },
        { rows: [{ v: 'a' }, { v: 'b' }], changes: 0, lastRowId: null },
      ],
    );
    const failed = await failure(
      t,
      provider.batch(
        siteId,
        [statement('INSERT INTO t (v) VALUES (?)', 'c'), statement('INSERT INTO t (v) VALUES (?)', null)],
        'function',
      ),
    );
    t.is(failed.reason, 'failed');
    t.deepEqual(await rows('SELECT v FROM t ORDER BY id'), [{ v: 'a' }, { v: 'b' }], 'the failed batch kept nothing');
  });

  test.serial(title('a statement asked to only read reads, and one that would write fails as denied'), async (t) => {
    const { siteId, run, rows } = await withDatabase(adapter());
    const { provider } = adapter();
    await run('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    await run("INSERT INTO t (v) VALUES ('a')");
    const reading = { readsOnly: true };
    t.deepEqual((await provider.run(siteId, statement('SELECT v FROM t WHERE id = ?', 1), 'api', reading)).rows, [
      { v: 'a' },
    ]);
    const refused = await failure(t, provider.run(siteId, statement("INSERT INTO t (v) VALUES ('b')"), 'api', reading));
    t.is(refused.reason, 'denied');
    t.deepEqual(await rows('SELECT v FROM t ORDER BY id'), [{ v: 'a' }], 'the refused write kept nothing');
  });

  test.serial(
    title('a statement the database does not complete fails with its reason, in words that name no host path'),
    async (t) => {
      const { siteId, run } = await withDatabase(adapter());
      const { provider } = adapter();
      const failed = await failure(t, run('SELEC 1'));
      t.is(failed.reason, 'failed');
      const denied = await failure(t, run(`ATTACH DATABASE '${path.join(root, 'x.sqlite')}' AS x`));
      t.is(denied.reason, 'denied');
      const reserved = await failure(
        t,
        provider.run(siteId, statement(`SELECT name FROM ${LEDGER_TABLE}`), 'function'),
      );
      t.is(reserved.reason, 'reserved');
      t.like(await run(`SELECT name FROM ${LEDGER_TABLE}`), { rows: [] }, 'the query API may read the ledger');
      await run('CREATE TABLE big (b BLOB)');
      const full = await failure(t, run('INSERT INTO big (b) VALUES (zeroblob(?))', MAX_BYTES + 1024 * 1024));
      t.is(full.reason, 'full');
      for (const err of [failed, denied, reserved, full]) t.false(err.message.includes(root), err.message);
    },
  );

  test.serial(title('a migration commits its SQL and its receipt together, or neither'), async (t) => {
    const { siteId, rows } = await withDatabase(adapter());
    const { provider } = adapter();
    const receipt = (name: string) =>
      statement(
        `INSERT INTO ${LEDGER_TABLE} (name, checksum, sql, applied_at) VALUES (?, ?, ?, ?)`,
        name,
        'c',
        null,
        '2025-01-01 00:00:00',
      );
    await provider.migrate(
      siteId,
      'CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a DEFAULT VALUES;',
      receipt('0001'),
    );
    const failed = await failure(
      t,
      provider.migrate(siteId, 'CREATE TABLE b (id INTEGER); INSERT INTO nowhere VALUES (1);', receipt('0002')),
    );
    t.is(failed.reason, 'failed');
    const ledger = await failure(t, provider.migrate(siteId, `DELETE FROM ${LEDGER_TABLE}`, receipt('0003')));
    t.is(ledger.reason, 'reserved');
    t.deepEqual(await rows(`SELECT name FROM ${LEDGER_TABLE} ORDER BY id`), [{ name: '0001' }]);
    t.deepEqual(
      await rows("SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN ('a', 'b')"),
      [{ name: 'a' }],
      'the failed migration left no table',
    );
  });

  test.serial(title('dump writes SQL that rebuilds the database in an empty one'), async (t) => {
    const { siteId, run } = await withDatabase(adapter());
    await run('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, raw BLOB)');
    await run('CREATE INDEX notes_body ON notes (body)');
    await run("INSERT INTO notes (body, raw) VALUES (?, x'0001'), ('it''s', NULL)", 'first');
    const file = path.join(root, `${crypto.randomUUID()}.sql`);
    t.teardown(() => fs.rm(file, { force: true }));
    const bytes = await adapter().provider.dump(siteId, file);
    t.is(bytes, (await fs.stat(file)).size);
    const rebuilt = new Database(':memory:');
    t.teardown(() => rebuilt.close());
    rebuilt.exec(await fs.readFile(file, 'utf8'));
    t.deepEqual(rebuilt.prepare('SELECT id, body, raw FROM notes ORDER BY id').all(), [
      { id: 1, body: 'first', raw: Buffer.from([0, 1]) },
      { id: 2, body: "it's", raw: null },
    ]);
    t.deepEqual(rebuilt.prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND name = 'notes_body'").all(), [
      { name: 'notes_body' },
    ]);
  });

  test.serial(
    title('compact keeps every row and says what it gave back; size is what the database takes'),
    async (t) => {
      const { siteId, run, rows } = await withDatabase(adapter());
      const { provider } = adapter();
      const empty = await provider.size(siteId);
      t.true(empty > 0);
      await run('CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)');
      await run('INSERT INTO t (b) SELECT zeroblob(64 * 1024) FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3)');
      const filled = await provider.size(siteId);
      t.true(filled > empty + 3 * 64 * 1024, `${filled} bytes hold three blobs of 64 KiB`);
      await run('DELETE FROM t WHERE id > 1');
      const compaction = await provider.compact(siteId);
      t.true(compaction.bytesAfter <= compaction.bytesBefore);
      t.true(compaction.bytesAfter >= 64 * 1024, 'what is left still holds a row');
      t.deepEqual(await rows('SELECT id, length(b) AS n FROM t'), [{ id: 1, n: 64 * 1024 }]);
      t.true((await provider.size(siteId)) < filled);
    },
  );

  test.serial(
    title('a statement past its time limit is stopped, keeps nothing it wrote, and the next one runs'),
    async (t) => {
      const { siteId, run, rows } = await withDatabase(adapter());
      await run('CREATE TABLE t (v TEXT)');
      const endless = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) AS m FROM c';
      const stopped = await failure(
        t,
        adapter().provider.batch(
          siteId,
          [statement("INSERT INTO t (v) VALUES ('lost')"), statement(endless)],
          'function',
        ),
      );
      t.is(stopped.reason, 'timeout');
      t.deepEqual(await rows('SELECT v FROM t'), []);
      await run("INSERT INTO t (v) VALUES ('kept')");
      t.deepEqual(await rows('SELECT v FROM t'), [{ v: 'kept' }]);
    },
  );

  test.serial(
    title('while its writes are paused, a database answers reads and holds a write until they resume'),
    async (t) => {
      const { siteId, run, rows } = await withDatabase(adapter());
      await run('CREATE TABLE t (v TEXT)');
      const frozen = await adapter().holder.freeze(siteId);
      let thawed = false;
      t.teardown(() => !thawed && frozen.thaw('kept'));
      let written = false;
      const writing = run("INSERT INTO t (v) VALUES ('later')").then((result) => {
        written = true;
        return result;
      });
      t.deepEqual(await rows('SELECT v FROM t'), [], 'a read is answered while writes are paused');
      t.like((await frozen.census()).tables, { t: 0 }, 'the write did not run');
      t.false(written, 'the write waits');
      thawed = true;
      await frozen.thaw('kept');
      t.like(await writing, { changes: 1 });
      t.deepEqual(await rows('SELECT v FROM t'), [{ v: 'later' }]);
    },
  );

  test.serial(
    title('a branch is a copy of its database: what it writes stays on it, its size is its own, dropped it is gone'),
    async (t) => {
      const { siteId, run, rows } = await withDatabase(adapter());
      const { provider } = adapter();
      await run('CREATE TABLE t (v TEXT)');
      await run("INSERT INTO t VALUES ('before')");
      const branch = branchName(siteId, crypto.randomUUID());
      // No replica here: a moment in the past cannot be had, and a copy of now can.
      const past = await failure(t, provider.makeBranch(branch, new Date(Date.now() - 60_000), false));
      t.is(past.reason, 'unavailable');
      const made = await provider.makeBranch(branch, new Date(), true);
      t.is(made.from, 'copy');
      t.true(made.bytes > 0);
      await provider.run(branch, statement("INSERT INTO t VALUES ('on the branch')"), 'api');
      await run("INSERT INTO t VALUES ('after')");
      t.deepEqual((await provider.run(branch, statement('SELECT v FROM t ORDER BY rowid'), 'api')).rows, [
        { v: 'before' },
        { v: 'on the branch' },
      ]);
      t.deepEqual(await rows('SELECT v FROM t ORDER BY rowid'), [{ v: 'before' }, { v: 'after' }]);
      t.true((await provider.size(branch)) > 0);
      await provider.migrate(
        branch,
        'ALTER TABLE t ADD COLUMN w TEXT',
        statement(
          `INSERT INTO ${LEDGER_TABLE} (name, checksum, sql, applied_at) VALUES ('0001_w.sql', 'x', NULL, '2026-01-01 00:00:00')`,
        ),
      );
      t.is((await rows("SELECT count(*) AS n FROM pragma_table_info('t')"))[0]!.n, 1, 'the database keeps its schema');
      await provider.dropBranch(branch);
      const gone = await failure(t, provider.run(branch, statement('SELECT 1'), 'api'));
      t.true(isBranchNotHere(gone), gone.message);
      await provider.dropBranch(branch);
      t.pass('dropping a branch twice is no failure');
    },
  );

  test.serial(title('a removed database answers unavailable, and a new create makes an empty one'), async (t) => {
    const { siteId, run } = await withDatabase(adapter());
    const { provider } = adapter();
    await run('CREATE TABLE t (v TEXT)');
    const heldBy = await adapter().unplace(siteId);
    await provider.remove(siteId, heldBy);
    t.is((await failure(t, run('SELECT v FROM t'))).reason, 'unavailable');
    const again = await adapter().newSite();
    t.is(
      (await failure(t, adapter().provider.run(again, statement('SELECT 1'), 'api'))).reason,
      'unavailable',
      'nor does a database never created',
    );
  });
}

test.serial(
  '[local] a database process whose workers open line after line keeps a bounded number of their tokens',
  async (t) => {
    const lineDir = path.join(root, 'lines');
    const databases = new SiteDatabases({
      dataDir: path.join(root, 'tokens'),
      denoPath: resolveDenoBinary(),
      denoDir: path.join(root, 'deno-dir'),
      statementTimeoutMs: STATEMENT_TIMEOUT_MS,
      maxProcesses: 1,
      idleMs: 10_000,
      maxBytes: MAX_BYTES,
      lineDir,
      maxLineTokens: 50,
    });
    t.teardown(() => databases.close());
    const siteId = crypto.randomUUID();
    await databases.create(siteId);
    // Workers that come and go: each line is closed by its worker as soon as it is open.
    const socketPath = path.join(root, 'worker.sock');
    const worker = net.createServer((socket) => socket.destroy());
    t.teardown(() => worker.close());
    await new Promise<void>((resolve) => worker.listen(socketPath, resolve));
    let opened = 0;
    while (opened <= 60) {
      if (await databases.openLine(siteId, socketPath, crypto.randomBytes(32).toString('hex'), () => {})) opened++;
    }
    t.is(databases.lineTokens, 50);
  },
);

test.serial('[local] a call in flight or held when its database moves to another node is told it moved', async (t) => {
  const adapter = adapters.find((a) => a.name === 'local')!;
  const siteId = await adapter.newSite();
  await adapter.provider.create(siteId);
  await adapter.provider.run(siteId, statement('CREATE TABLE t (v TEXT)'), 'api');
  const frozen = await adapter.holder.freeze(siteId);
  const held = adapter.provider.run(siteId, statement("INSERT INTO t (v) VALUES ('held')"), 'api');
  await frozen.census();
  // Sent as the move ends: its process is stopped under it.
  const inFlight = adapter.provider.run(siteId, statement("INSERT INTO t (v) VALUES ('in flight')"), 'api');
  await frozen.thaw('moved');
  t.is((await failure(t, held)).reason, 'moved');
  t.is((await failure(t, inFlight)).reason, 'moved', 'the caller may send it where the database is now');
  t.is((await failure(t, adapter.provider.run(siteId, statement('SELECT v FROM t'), 'api'))).reason, 'moved');
});

test.serial(
  '[placed] a write held or in flight when its database moves to another node follows it there',
  async (t) => {
    const adapter = placedAdapter;
    const siteId = await adapter.newSite();
    await adapter.provider.create(siteId);
    await adapter.provider.run(siteId, statement('CREATE TABLE t (v TEXT)'), 'api');
    const frozen = await adapter.holder.freeze(siteId);
    const held = adapter.provider.run(siteId, statement("INSERT INTO t (v) VALUES ('held')"), 'api');
    // The move, as cluster/move.ts makes it: the file copied to node A, checked, then placed there.
    const incoming = await adapter.nodeA.incoming(siteId);
    await fs.copyFile(frozen.file, path.join(incoming, 'db.sqlite'));
    await adapter.nodeA.install(siteId, incoming);
    await adapter.db('databases').where({ site_id: siteId }).update({ node_id: 'node-a' });
    // Node A still takes the database to be on node B: this write is sent there as the move ends.
    const inFlight = adapter.provider.run(siteId, statement("INSERT INTO t (v) VALUES ('in flight')"), 'api');
    await frozen.thaw('moved');
    t.like(await held, { changes: 1 });
    t.like(await inFlight, { changes: 1 });
    t.deepEqual(
      (await adapter.nodeA.run(siteId, statement('SELECT v FROM t ORDER BY v'), 'api')).rows,
      [{ v: 'held' }, { v: 'in flight' }],
      'both writes landed on the new node',
    );
    await t.throwsAsync(fs.stat(adapter.holder.fileOf(siteId)), { code: 'ENOENT' }, 'the old node removed its file');
  },
);
