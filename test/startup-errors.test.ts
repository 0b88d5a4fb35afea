// What an operator sees when Berth cannot start or an admin command is pointed at the wrong place:
// one line saying what is wrong and what to do, a non-zero exit, no stack trace.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import { makeDataDir } from './helpers/berth.ts';
import { runBerth, startServe } from './helpers/process.ts';
import { asAdmin, databaseFor, databaseOf, onPostgres } from './helpers/postgres.ts';

/** One line on stderr, no stack trace. */
function oneLine(
  t: { is: (a: unknown, b: unknown, m?: string) => void; false: (v: boolean, m?: string) => void },
  stderr: string,
) {
  t.is(stderr.trim().split('\n').length, 1, stderr);
  t.false(/\n\s+at /.test(stderr), 'no stack trace');
}

test('a port in use is named, with what to do', async (t) => {
  const busy = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => busy.once('listening', resolve));
  t.teardown(() => busy.close());
  const port = (busy.address() as net.AddressInfo).port;
  const run = await runBerth(['serve'], { BERTH_DATA_DIR: await makeDataDir(t), BERTH_PORT: String(port) });
  t.is(run.code, 1);
  t.regex(
    run.stderr,
    new RegExp(
      `^berth: port ${port} on 127\\.0\\.0\\.1 is already in use by another program: stop that program, or set BERTH_PORT to a free port`,
    ),
  );
  oneLine(t, run.stderr);
});

test('an HTTPS port in use is named by its own setting', async (t) => {
  const busy = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => busy.once('listening', resolve));
  t.teardown(() => busy.close());
  const port = (busy.address() as net.AddressInfo).port;
  const run = await runBerth(['serve'], {
    BERTH_DATA_DIR: await makeDataDir(t),
    BERTH_PORT: '0',
    BERTH_TLS: 'acme',
    BERTH_TLS_BIND: '127.0.0.1',
    BERTH_HTTP_PORT: String(port),
    BERTH_HTTPS_PORT: String(port + 1 === 65536 ? port - 1 : port + 1),
  });
  t.is(run.code, 1);
  t.regex(
    run.stderr,
    new RegExp(
      `^berth: port ${port} on 127\\.0\\.0\\.1 is already in use by another program: stop that program, or set BERTH_HTTP_PORT to a free port`,
    ),
  );
  oneLine(t, run.stderr);
});

test('a data dir that cannot be a directory is named', async (t) => {
  const parent = await makeDataDir(t);
  const file = path.join(parent, 'a-file');
  fs.writeFileSync(file, 'not a directory');
  const run = await runBerth(['serve'], { BERTH_DATA_DIR: path.join(file, 'data'), BERTH_PORT: '0' });
  t.is(run.code, 1);
  t.regex(run.stderr, /^berth: the data dir .*a-file\/data is not a directory \(or a part of its path is a file\)/);
  oneLine(t, run.stderr);
});

test('a data dir this user may not create is named', async (t) => {
  // sysfs refuses new entries even to root, so this holds wherever the tests run.
  const run = await runBerth(['serve'], { BERTH_DATA_DIR: '/sys/berth-test-data', BERTH_PORT: '0' });
  t.is(run.code, 1);
  t.regex(run.stderr, /^berth: the data dir \/sys\/berth-test-data is not writable by this user/);
  oneLine(t, run.stderr);
});

test('a data dir a newer Berth migrated is left alone', async (t) => {
  const dataDir = await makeDataDir(t);
  const first = await startServe({ BERTH_DATA_DIR: dataDir });
  first.child.kill('SIGTERM');
  t.is(await first.exited, 0);
  if (onPostgres) {
    await asAdmin(
      (client) =>
        client.query(
          "INSERT INTO knex_migrations (name, batch, migration_time) VALUES ('9999_from_the_future', 99, now())",
        ),
      databaseOf(dataDir),
    );
  } else {
    const db = new Database(path.join(dataDir, 'meta.sqlite'));
    db.prepare('INSERT INTO knex_migrations (name, batch, migration_time) VALUES (?, ?, ?)').run(
      '9999_from_the_future',
      99,
      Date.now(),
    );
    db.close();
  }
  const run = await runBerth(['serve'], { BERTH_DATA_DIR: dataDir, BERTH_PORT: '0' });
  t.is(run.code, 1);
  const where = onPostgres ? `PostgreSQL at .*, database ${databaseOf(dataDir)}` : 'the data dir .*';
  t.regex(
    run.stderr,
    new RegExp(
      `^berth: ${where} was last used by a newer Berth \\(its metadata has schema step 9999_from_the_future, unknown to .*\\): run that version or a newer one`,
    ),
  );
  oneLine(t, run.stderr);
});

test('a missing Deno binary is named, with what to do', async (t) => {
  const run = await runBerth(['serve'], {
    BERTH_DATA_DIR: await makeDataDir(t),
    BERTH_PORT: '0',
    BERTH_DENO: '/nonexistent/deno',
  });
  t.is(run.code, 1);
  t.regex(run.stderr, /^berth: BERTH_DENO is \/nonexistent\/deno, which is not an executable file/);
  oneLine(t, run.stderr);
});

test('admin refuses a data dir that does not exist or holds no Berth data, unless asked to create it', async (t) => {
  if (onPostgres) {
    // The metadata is in the database: an empty one is the wrong address, unless asked to start there.
    const dataDir = await makeDataDir(t);
    const env = { BERTH_DATA_DIR: dataDir, BERTH_DATABASE_URL: await databaseFor(dataDir) };
    const empty = await runBerth(['admin', 'create-account', '--name', 'Team'], env);
    t.is(empty.code, 1);
    t.is(
      empty.stderr,
      `berth: PostgreSQL at 127.0.0.1:${new URL(env.BERTH_DATABASE_URL).port}, database ${databaseOf(dataDir)} holds no Berth metadata: point BERTH_DATABASE_URL at the server's database, or add --create-data-dir to start a new instance there\n`,
    );
    const tables = await asAdmin(
      (client) => client.query("SELECT 1 FROM pg_tables WHERE schemaname = 'public'"),
      databaseOf(dataDir),
    );
    t.is(tables.rowCount, 0, 'nothing was created');
    const created = await runBerth(['admin', 'create-account', '--name', 'Team', '--create-data-dir', '--json'], env);
    t.is(created.code, 0, created.stderr);
    return;
  }
  const parent = await makeDataDir(t);
  const missing = path.join(parent, 'nowhere');
  const run = await runBerth(['admin', 'list-keys', '--account', crypto.randomUUID()], { BERTH_DATA_DIR: missing });
  t.is(run.code, 1);
  t.is(
    run.stderr,
    `berth: there is no data dir at ${missing}: set BERTH_DATA_DIR to the server's data dir, or add --create-data-dir to make a new one\n`,
  );
  t.false(fs.existsSync(missing), 'nothing was created');

  const empty = await runBerth(['admin', 'create-account', '--name', 'Team'], { BERTH_DATA_DIR: parent });
  t.is(empty.code, 1);
  t.regex(empty.stderr, /holds no Berth data \(no meta\.sqlite\)/);
  t.false(fs.existsSync(path.join(parent, 'meta.sqlite')));

  const created = await runBerth(['admin', 'create-account', '--name', 'Team', '--create-data-dir', '--json'], {
    BERTH_DATA_DIR: missing,
  });
  t.is(created.code, 0, created.stderr);
  t.true(fs.existsSync(path.join(missing, 'meta.sqlite')));
});
