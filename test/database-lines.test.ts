// A function's ctx.db calls on its worker's own line to the site's database process: used, counted
// as calls through the host are, timed by the same limit, closed while the host needs the database to
// itself, and out of reach of every other site. Then a hostile tenant on its own line.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import got from 'got';
import { type TestBerth, deployFixture, json, startTestBerth } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { until } from './helpers/until.ts';
import type { SiteDatabases } from '../control-plane/site-databases/local-provider.ts';

const TOKEN = 'metrics-token-for-the-line-tests-01';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth({ metricsToken: TOKEN });
});
test.after.always(async () => {
  await t0?.dispose();
});

const provider = (berth: TestBerth) => berth.berth.deps.siteDatabases;

type Answer = { value?: any; error?: { name: string; code: string; message: string } };

const caller = (berth: TestBerth, subdomain: string) => async (body: unknown) => {
  const res = await berth.site(subdomain).post('api/db', { json: body });
  if (res.statusCode !== 200) throw new Error(`the function answered ${res.statusCode}: ${res.body}`);
  return JSON.parse(res.body) as Answer;
};

const scrape = async () => (await got.get(`${t0.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).body;
const sample = (metrics: string, line: string) =>
  Number(new RegExp(`^${line.replace(/[{}]/g, '\\$&')} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);

/** The path a worker was given for its line to its database, from its command line. */
function dbPathOf(pid: number): string {
  const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  return args.find((a) => a.startsWith('--allow-read='))!.split(',')[1]!;
}

/** Calls a function once and returns the pid of the worker that served it (a new one). */
async function workerOf(berth: TestBerth, call: () => Promise<unknown>): Promise<number> {
  const before = new Set(berth.berth.deps.runtime.workerPids());
  await call();
  return berth.berth.deps.runtime.workerPids().find((pid) => !before.has(pid))!;
}

test.serial(
  'ctx.db calls go on the line, and are counted in analytics and metrics as calls through the host are',
  async (t) => {
    const { site, query } = await siteWithDatabase(t0.owner);
    await query('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, data BLOB)');
    await deployFixture(t0.owner, site.bucketId, 'db');
    const call = caller(t0, site.subdomain);
    const before = await scrape();
    const callsBefore = provider(t0).lineCalls;

    t.deepEqual(
      (await call({ op: 'execute', sql: "INSERT INTO items (name, data) VALUES (?, X'00FF10')", params: ['a'] })).value,
      { changes: 1, lastInsertRowId: 1 },
    );
    t.deepEqual((await call({ op: 'first', sql: 'SELECT name, data FROM items' })).value, {
      name: 'a',
      data: { type: 'Buffer', data: [0, 255, 16] },
    });
    t.deepEqual((await call({ op: 'query', sql: 'SELECT name FROM items WHERE id = ?', params: [1] })).value, [
      { name: 'a' },
    ]);
    t.deepEqual(
      (
        await call({
          op: 'batch',
          statements: [{ sql: "INSERT INTO items (name) VALUES ('b')" }, { sql: 'SELECT 1 AS one' }],
        })
      ).value,
      [
        { rows: [], changes: 1, lastInsertRowId: 2 },
        { rows: [{ one: 1 }], changes: 0, lastInsertRowId: null },
      ],
    );
    const failed = await call({ op: 'execute', sql: 'INSERT INTO nowhere VALUES (1)' });
    t.like(failed.error, { code: 'DATABASE_QUERY_FAILED' });
    t.like((await call({ op: 'query', sql: 'SELECT * FROM _berth_migrations' })).error, {
      code: 'DATABASE_RESERVED_TABLE',
    });

    // The first call asks for the line; each later one is served on it, and reported within a second.
    await until(() => provider(t0).lineCalls - callsBefore >= 6, 'the line’s calls reported');
    const metrics = await until(async () => {
      const now = await scrape();
      const counted = (method: string) =>
        sample(now, `berth_ctx_calls_total{method="${method}"}`) -
        sample(before, `berth_ctx_calls_total{method="${method}"}`);
      return (
        counted('db.execute') === 2 &&
        counted('db.first') === 1 &&
        counted('db.query') === 2 &&
        counted('db.batch') === 1 &&
        now
      );
    }, 'every call counted once in the metrics');
    t.true(
      sample(metrics, 'berth_database_statement_duration_seconds_count{source="function",outcome="error"}') >= 2,
      'the failed statements are in the statement metrics',
    );
    const analytics = await until(async () => {
      const totals = json<{ totals: { databaseCalls: number } }>(
        await t0.owner.read.get(`v0/sites/${site.id}/analytics`),
      ).totals;
      return totals.databaseCalls === 6 && totals;
    }, 'six database calls in the site’s analytics');
    t.is(analytics.databaseCalls, 6);
    const logs = json<{ logs: Array<{ message: string }> }>(await t0.owner.read.get(`v0/sites/${site.id}/logs`)).logs;
    t.true(
      logs.some((l) => l.message.includes('ctx.db: no such table: nowhere')),
      'the diagnostic is in the site’s logs',
    );
  },
);

test('a statement past the time limit on the line is stopped with the error the host gives, and the database serves on', async (t) => {
  const berth = await startTestBerth({ databaseTimeoutMs: 1500 });
  t.teardown(() => berth.dispose());
  const { site, query } = await siteWithDatabase(berth.owner);
  await query('CREATE TABLE t (n INTEGER)');
  await deployFixture(berth.owner, site.bucketId, 'db');
  const call = caller(berth, site.subdomain);
  await call({ op: 'execute', sql: 'INSERT INTO t VALUES (1)' });
  await call({ op: 'execute', sql: 'INSERT INTO t VALUES (2)' });
  await until(() => provider(berth).lineCalls >= 1, 'a call served on the line');
  const endless = await call({
    op: 'first',
    sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) AS n FROM c',
  });
  t.like(endless.error, { code: 'DATABASE_TIMEOUT' });
  t.regex(endless.error!.message, /ran longer than 1500 ms and was stopped/);
  t.deepEqual((await call({ op: 'first', sql: 'SELECT count(*) AS n FROM t' })).value, { n: 2 });
});

test('compaction and a copy of the file during line traffic lose no write, and a copy keeps writes paused', async (t) => {
  const { site, base, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE hits (id INTEGER PRIMARY KEY, at TEXT)');
  await deployFixture(t0.owner, site.bucketId, 'db');
  const call = caller(t0, site.subdomain);
  await call({ op: 'execute', sql: "INSERT INTO hits (at) VALUES ('first')" });
  const callsBefore = provider(t0).lineCalls;
  let written = 1;
  let stop = false;
  const writers = Array.from({ length: 4 }, async () => {
    while (!stop) {
      const answer = await call({ op: 'execute', sql: "INSERT INTO hits (at) VALUES ('load')" });
      if (answer.value?.changes === 1) written++;
      else throw new Error(`a write failed: ${JSON.stringify(answer)}`);
    }
  });
  for (let i = 0; i < 3; i++) {
    const compacted = await t0.owner.api.post(`${base}/compact`);
    t.is(compacted.statusCode, 200, JSON.stringify(compacted.body));
  }
  // On shared metadata the provider routes to the node's own (the move tests copy files there).
  const local = provider(t0) as unknown as Partial<SiteDatabases>;
  if (!local.freeze) {
    stop = true;
    await Promise.all(writers);
    t.deepEqual((await call({ op: 'first', sql: 'SELECT count(*) AS n FROM hits' })).value, { n: written });
    return;
  }
  const frozen = await local.freeze(site.id);
  const census = await frozen.census();
  const during = written;
  // Reads are served while the file is copied; a write waits for the thaw, then runs.
  const read = await call({ op: 'first', sql: 'SELECT count(*) AS n FROM hits' });
  t.true(read.value.n >= census.tables.hits!);
  const count = (await call({ op: 'first', sql: 'SELECT count(*) AS n FROM hits' })).value.n;
  t.is(count, census.tables.hits, 'nothing was written while the file was copied');
  await frozen.thaw('kept');
  stop = true;
  await Promise.all(writers);
  t.true(written > during, 'the writes that waited ran after the thaw');
  t.deepEqual((await call({ op: 'first', sql: 'SELECT count(*) AS n FROM hits' })).value, { n: written });
  t.true(provider(t0).lineCalls > callsBefore, 'the writes went on the line');
});

test('a database process stopped for another site’s closes its lines first: every write answered is kept, once', async (t) => {
  const berth = await startTestBerth({ maxDatabaseProcesses: 1 });
  t.teardown(() => berth.dispose());
  const sites = [await siteWithDatabase(berth.owner), await siteWithDatabase(berth.owner)];
  for (const { site, query } of sites) {
    await query('CREATE TABLE hits (id INTEGER PRIMARY KEY)');
    await deployFixture(berth.owner, site.bucketId, 'db');
  }
  const calls = sites.map(({ site }) => caller(berth, site.subdomain));
  // In turns: each burst's first call stops the other site's process, whose line closes as it ends;
  // every call of every burst is on a line, and all are counted, those reported as a process ended too.
  const before = provider(berth).lineCalls;
  for (let round = 0; round < 3; round++) {
    for (const call of calls) {
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => call({ op: 'execute', sql: 'INSERT INTO hits DEFAULT VALUES' })),
      );
      for (const answer of answers) t.is(answer.value?.changes, 1, JSON.stringify(answer));
    }
  }
  await until(() => provider(berth).lineCalls - before === 30, 'the thirty calls counted');
  // The two sites write at once with room for one database process: each call of one site may stop the
  // other's process, lines and all, in the middle of its traffic. A call that finds the one process
  // busy with the other site's is told the database is unavailable, as through the host.
  const kept = [15, 15];
  let unavailable = 0;
  const deadline = Date.now() + 4000;
  await Promise.all(
    calls.map(async (call, i) => {
      while (Date.now() < deadline) {
        const answer = await call({ op: 'execute', sql: 'INSERT INTO hits DEFAULT VALUES' });
        if (answer.value?.changes === 1) kept[i]!++;
        else if (answer.error?.code === 'DATABASE_UNAVAILABLE') unavailable++;
        else t.fail(JSON.stringify(answer));
      }
    }),
  );
  for (const [i, call] of calls.entries()) {
    let counted: Answer = {};
    for (let tries = 0; tries < 50 && counted.value === undefined; tries++)
      counted = await call({ op: 'first', sql: 'SELECT count(*) AS n FROM hits' });
    t.deepEqual(counted.value, { n: kept[i] }, `site ${i}: ${unavailable} calls found the process busy`);
  }
  t.true(kept[0]! > 15 && kept[1]! > 15);
});

test('a worker of one site reaches no other site’s database, and cannot touch its own line’s path', async (t) => {
  const a = await siteWithDatabase(t0.owner);
  const b = await siteWithDatabase(t0.owner);
  await b.query('CREATE TABLE secrets (v TEXT)');
  await b.query("INSERT INTO secrets VALUES ('b only')");
  await deployFixture(t0.owner, b.site.bucketId, 'db');
  const pidB = await workerOf(t0, () => caller(t0, b.site.subdomain)({ op: 'first', sql: 'SELECT v FROM secrets' }));
  const listenerB = dbPathOf(pidB);
  const sockets = path.dirname(listenerB);
  const processes = () => fs.readdirSync(sockets).filter((name) => name.endsWith('.dbs'));
  await until(() => processes().length > 0, 'a database process’s line path');

  await deployFixture(t0.owner, a.site.bucketId, 'db-line-reach');
  const reach = async (paths: string[]) =>
    JSON.parse((await t0.site(a.site.subdomain).post('api/db-line-reach', { json: { paths } })).body) as Record<
      string,
      Record<string, string>
    >;
  const pidA = await workerOf(t0, () => reach([]));
  const own = dbPathOf(pidA);
  t.not(own, listenerB);
  const targets = [own, listenerB, ...processes().map((name) => path.join(sockets, name))];
  const seen = await reach(targets);
  for (const target of targets)
    t.deepEqual(
      seen[target],
      { connect: 'NotCapable', listen: 'NotCapable', remove: 'NotCapable', write: 'NotCapable' },
      path.basename(target),
    );
  t.true(fs.statSync(own).isSocket(), 'its own path is still the shim’s listener');
  // A connection to a worker that does not bring the token the worker asked with is closed by it.
  const strangerToken = 'f'.repeat(64);
  t.true(await provider(t0).openLine(b.site.id, listenerB, strangerToken, () => {}));
  t.deepEqual((await caller(t0, b.site.subdomain)({ op: 'first', sql: 'SELECT v FROM secrets' })).value, {
    v: 'b only',
  });
});

/**
 * Plays a worker gone hostile: listens where the site's database process is told to connect, takes
 * its Hello, sends `frames`, and reads what comes back until the process closes the line or
 * `waitMs` pass.
 */
async function hostileWorker(siteId: string, frames: Buffer[], waitMs = 3000) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chan-'));
  const socketPath = path.join(dir, 'w.sock');
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  const token = crypto.randomBytes(32).toString('hex');
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  const opened = await provider(t0).openLine(siteId, socketPath, token, () => {});
  if (!opened) throw new Error('no line opened');
  const socket = await accepted;
  const frames_: Array<{ type: number; payload: any }> = [];
  let buffered = Buffer.alloc(0);
  const closed = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), waitMs);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 9 && buffered.length >= 4 + buffered.readUInt32BE(0)) {
        const size = 4 + buffered.readUInt32BE(0);
        const text = buffered.subarray(9, size).toString('utf8');
        frames_.push({ type: buffered[4]!, payload: buffered[4] === 1 ? text : text ? JSON.parse(text) : null });
        buffered = buffered.subarray(size);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
    socket.on('error', () => {});
    for (const bytes of frames) socket.write(bytes);
  });
  socket.destroy();
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  const [hello, ...answers] = frames_;
  return { hello: hello?.type === 1 && hello.payload === token, answers, closed };
}

function frame(type: number, stream: number, payload: string | Buffer = '', declared?: number): Buffer {
  const bytes = Buffer.from(payload);
  const out = Buffer.alloc(9 + bytes.length);
  out.writeUInt32BE(declared ?? 5 + bytes.length, 0);
  out.writeUInt8(type, 4);
  out.writeUInt32BE(stream, 5);
  bytes.copy(out, 9);
  return out;
}
const CALL = 2;
const call = (stream: number, value: unknown) => frame(CALL, stream, JSON.stringify(value));

test('hostile frames on a line close it and change nothing; the database serves on', async (t) => {
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE items (n INTEGER)');
  await query('INSERT INTO items VALUES (1)');
  await deployFixture(t0.owner, site.bucketId, 'db');
  const ledger = (await query('SELECT count(*) AS n FROM _berth_migrations')).body.result[0]!.results;
  const attack = (frames: Buffer[], waitMs?: number) => hostileWorker(site.id, frames, waitMs);

  const good = await attack([call(1, { method: 'db.first', args: ['SELECT 41 + 1 AS n'] })], 1000);
  t.true(good.hello, 'the process says Hello with the token the worker gave');
  t.like(good.answers[0], { type: 3, payload: { ok: true, value: { rows: [{ n: 42 }], changes: 0 } } });

  const hostile: Record<string, Buffer[]> = {
    migrate: [call(1, { op: 'migrate', sql: 'DROP TABLE items', receipt: { sql: 'SELECT 1', params: [] } })],
    dump: [call(1, { method: 'dump', args: [] })],
    checkpoint: [call(1, { method: 'checkpoint', args: [] })],
    census: [call(1, { op: 'census' })],
    systemRequest: [
      call(1, { op: 'run', access: 'system', statement: { sql: 'DELETE FROM _berth_migrations', params: [] } }),
    ],
    malformed: [frame(CALL, 1, '{"method": "db.query", "args": [')],
    notAnObject: [frame(CALL, 1, 'null')],
    oversized: [frame(CALL, 1, '{"method":"db.query","args":["SELECT 1"]}', 64 * 1024 * 1024)],
    unknownType: [frame(9, 1, '{}')],
    hello: [frame(1, 0, 'f'.repeat(64))],
  };
  for (const [name, frames] of Object.entries(hostile)) {
    const outcome = await attack(frames);
    t.deepEqual(outcome, { hello: true, answers: [], closed: true }, name);
  }
  // A call that fails the host's checks is answered with the host's error, and runs nothing.
  const two = await attack([call(1, { method: 'db.batch', args: [[{ sql: 'DROP TABLE items; SELECT 1' }]] })], 1000);
  t.like(two.answers[0], { payload: { ok: false, error: { code: 'DATABASE_MULTIPLE_STATEMENTS' } } });
  // The access a frame claims is ignored: the call runs as the function's, which the ledger refuses.
  const spoofed = await attack(
    [
      call(1, { method: 'db.execute', args: ['DELETE FROM _berth_migrations'], access: 'api', readOnly: false }),
      call(2, { method: 'db.first', args: ['SELECT count(*) AS n FROM items'], access: 'system' }),
    ],
    1000,
  );
  t.like(spoofed.answers[0], { type: 3, payload: { ok: false, error: { reason: 'reserved' } } });
  t.like(spoofed.answers[1], { type: 3, payload: { ok: true, value: { rows: [{ n: 1 }] } } });
  // A flood of calls piled on one line is answered, each in turn.
  const flood = await attack(
    Array.from({ length: 500 }, (_, i) => call(i + 1, { method: 'db.first', args: ['SELECT ? AS i', [i]] })),
    5000,
  );
  t.is(flood.answers.length, 500);
  t.like(flood.answers[499], { payload: { ok: true, value: { rows: [{ i: 499 }] } } });

  t.deepEqual((await query('SELECT count(*) AS n FROM items')).body.result[0]!.results, [{ n: 1 }]);
  t.deepEqual((await query('SELECT count(*) AS n FROM _berth_migrations')).body.result[0]!.results, ledger);
  const served = await caller(t0, site.subdomain)({ op: 'first', sql: 'SELECT n FROM items' });
  t.deepEqual(served.value, { n: 1 }, 'the database still serves the site’s functions');
});

/** The site's database process, found by the database file on its command line. */
function databaseProcessOf(siteId: string): number {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (args.includes('sqlite-host') && args.includes(siteId)) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error(`no database process for ${siteId}`);
}

const residentBytes = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

test('a worker that reads none of its answers makes its database process hold a few of them, not all', async (t) => {
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE items (n INTEGER)');
  const socket = await acceptLine(t, site.id);
  socket.pause();
  const pid = databaseProcessOf(site.id);
  const before = residentBytes(pid);
  // 100 answers of about 5.3 MiB each (4 MB of bytes, in base64): 530 MiB if the process kept them all.
  for (let i = 1; i <= 100; i++)
    socket.write(call(i, { method: 'db.first', args: ['SELECT randomblob(4000000) AS b'] }));
  // Long enough for the process to have answered every call many times over had it gone on reading.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const grown = residentBytes(pid) - before;
  t.true(grown < 128 * 1024 * 1024, `the process grew by ${Math.round(grown / 1024 / 1024)} MiB`);
  t.deepEqual((await query('SELECT count(*) AS n FROM items')).body.result[0]!.results, [{ n: 0 }], 'and serves on');
});

/** The socket of a line of `siteId`'s database, accepted where a worker would listen for it. */
async function acceptLine(t: ExecutionContext, siteId: string): Promise<net.Socket> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chan-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const socketPath = path.join(dir, 'w.sock');
  const server = net.createServer();
  t.teardown(() => server.close());
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  t.true(await provider(t0).openLine(siteId, socketPath, crypto.randomBytes(32).toString('hex'), () => {}));
  const socket = await accepted;
  t.teardown(() => socket.destroy());
  return socket;
}

/**
 * A line of `siteId`'s database opened as a worker's would be: `ask` runs a db.first call on it,
 * `closed` resolves when the database process closes it.
 */
async function openLine(t: ExecutionContext, siteId: string) {
  const socket = await acceptLine(t, siteId);
  const waiting = new Map<number, { resolve: (payload: any) => void; reject: (err: Error) => void }>();
  let buffered = Buffer.alloc(0);
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 9 && buffered.length >= 4 + buffered.readUInt32BE(0)) {
      const size = 4 + buffered.readUInt32BE(0);
      const stream = buffered.readUInt32BE(5);
      if (buffered[4] === 3) waiting.get(stream)?.resolve(JSON.parse(buffered.subarray(9, size).toString('utf8')));
      buffered = buffered.subarray(size);
    }
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) =>
    socket.on('close', () => {
      for (const { reject } of waiting.values()) reject(new Error('the line closed'));
      resolve();
    }),
  );
  let stream = 0;
  const ask = (sql: string) =>
    new Promise<any>((resolve, reject) => {
      if (socket.destroyed) return reject(new Error('the line closed'));
      waiting.set(++stream, { resolve, reject });
      socket.write(call(stream, { method: 'db.first', args: [sql] }));
    });
  return { ask, closed };
}

test('a change to one site closes that site’s database lines and leaves another site’s working', async (t) => {
  const kept = await siteWithDatabase(t0.owner);
  const changed = await siteWithDatabase(t0.owner);
  const keptLine = await openLine(t, kept.site.id);
  const changedLine = await openLine(t, changed.site.id);
  t.like(await keptLine.ask('SELECT 1 AS n'), { ok: true, value: { rows: [{ n: 1 }] } });
  t.like(await changedLine.ask('SELECT 1 AS n'), { ok: true, value: { rows: [{ n: 1 }] } });

  const renamed = await t0.owner.api.post(`v0/sites/${changed.site.id}`, { json: { name: 'renamed' } });
  t.is(renamed.statusCode, 200);
  await changedLine.closed;
  t.like(
    await keptLine.ask('SELECT 2 AS n'),
    { ok: true, value: { rows: [{ n: 2 }] } },
    'the other site’s line still serves',
  );
});
