// The `berth` client commands, run as a user runs them: a child process pointed at a real server by
// BERTH_URL and BERTH_API_KEY.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { freePort } from './helpers/ports.ts';
import { until } from './helpers/until.ts';

const BIN = path.resolve(import.meta.dirname, '../control-plane/cli/berth.js');

let t0: TestBerth;
let scratch: string;
test.before(async () => {
  t0 = await startTestBerth();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-cli-'));
});
test.after.always(async () => {
  await t0?.dispose();
  if (scratch) await fs.rm(scratch, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment a user would export, with a digest cache of the test's own. */
const userEnv = (cache = path.join(scratch, 'cache')) => ({
  BERTH_URL: t0.url,
  BERTH_API_KEY: t0.owner.writeKey,
  XDG_CACHE_HOME: cache,
  BERTH_CONFIG_DIR: path.join(scratch, 'config'),
});

function start(args: string[], env: Record<string, string> = userEnv(), input = '') {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end(input);
  const run: Run = { code: null, stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (run.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (run.stderr += chunk.toString()));
  const exited = new Promise<Run>((resolve) => child.once('close', (code) => resolve({ ...run, code })));
  return { child, run, exited };
}

const berth = (args: string[], options: { env?: Record<string, string>; input?: string } = {}) =>
  start(args, options.env, options.input).exited;

async function project(files: Record<string, string>): Promise<string> {
  const dir = await fs.mkdtemp(path.join(scratch, 'project-'));
  for (const [file, text] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await fs.writeFile(path.join(dir, file), text);
  }
  return dir;
}

async function remoteVersions(bucketId: string): Promise<Record<string, string>> {
  const res = await t0.owner.api.get(`v0/buckets/${bucketId}/objects`, { searchParams: { limit: 200 } });
  const { files } = json<{ files: Array<{ path: string; currentVersionId: string }> }>(res);
  return Object.fromEntries(files.map((f) => [f.path, f.currentVersionId]));
}

const STACK_TRACE = /^\s+at .+:\d+:\d+\)?$/m;

interface DeployJson {
  uploaded: Array<{
    path: string;
    versionId: string;
    deployment?: { status: string; error?: { line: number; column: number } };
  }>;
  unchanged: string[];
  deleted: string[];
  failed: unknown[];
}

test('init, then deploy: the page and the function answer; later deploys send only what changed', async (t) => {
  const dir = path.join(scratch, 'hello-project');
  const init = await berth(['init', dir]);
  t.is(init.code, 0, init.stderr);
  for (const file of ['web/index.html', 'api/hello.ts', 'migrations/0001_init.sql', 'README.md'])
    await t.notThrowsAsync(fs.access(path.join(dir, file)));

  const site = await createSite(t0.owner);
  const first = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.is(first.code, 0, first.stderr);
  const deployed = JSON.parse(first.stdout) as DeployJson;
  t.deepEqual(
    deployed.uploaded.map((f) => f.path),
    ['api/hello.ts', 'web/index.html'],
  );
  t.is(deployed.uploaded[0]!.deployment?.status, 'READY');
  t.regex(first.stderr, /uploaded web\/index\.html/);

  const page = await t0.site(site.subdomain).get('');
  t.is(page.statusCode, 200);
  t.is(page.headers['content-type'], 'text/html; charset=utf-8');
  t.regex(page.body, /Hello from Berth/);
  const hello = await t0.site(site.subdomain).get('api/hello', { responseType: 'json' });
  t.is(hello.statusCode, 200);
  t.like(hello.body as object, { hello: 'world', visits: 1, site: site.id });

  const again = await berth(['deploy', dir, '--site', site.id, '--json']);
  t.is(again.code, 0, again.stderr);
  t.deepEqual((JSON.parse(again.stdout) as DeployJson).uploaded, []);

  // A machine that has never seen the site learns the digests by reading the files, and agrees.
  const before = await remoteVersions(site.bucketId);
  await fs.writeFile(path.join(dir, 'web/index.html'), '<h1>Changed</h1>\n');
  const changed = await berth(['deploy', dir, '--site', site.subdomain, '--json'], {
    env: userEnv(path.join(scratch, 'fresh-cache')),
  });
  t.is(changed.code, 0, changed.stderr);
  const result = JSON.parse(changed.stdout) as DeployJson;
  t.deepEqual(
    result.uploaded.map((f) => f.path),
    ['web/index.html'],
  );
  t.deepEqual(result.unchanged, ['api/hello.ts']);
  const after = await remoteVersions(site.bucketId);
  t.is(after['api/hello.ts'], before['api/hello.ts']);
  t.not(after['web/index.html'], before['web/index.html']);
  t.is(after['web/index.html'], result.uploaded[0]!.versionId);
  t.is((await t0.site(site.subdomain).get('')).body, '<h1>Changed</h1>\n');
});

test('--delete removes remote files gone locally, and leaves alone the folders the project does not have', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'home', 'web/old.html': 'old' });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  await putFile(t0.owner, site.bucketId, 'data/visits.json', '3', 'application/json');
  await fs.rm(path.join(dir, 'web/old.html'));

  const kept = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.deepEqual((JSON.parse(kept.stdout) as DeployJson).deleted, []);
  const pruned = await berth(['deploy', dir, '--site', site.subdomain, '--delete', '--json']);
  t.is(pruned.code, 0, pruned.stderr);
  t.deepEqual((JSON.parse(pruned.stdout) as DeployJson).deleted, ['web/old.html']);
  t.deepEqual(Object.keys(await remoteVersions(site.bucketId)).sort(), ['data/visits.json', 'web/index.html']);
  t.is((await t0.site(site.subdomain).get('old.html')).statusCode, 404);
});

test('a function that does not deploy fails the deploy, with its line and column', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({
    'api/ok.ts': 'export default () => new Response("ok");\n',
    'api/broken.ts':
      'export default async function (req: Request) {\n  const answer = ;\n  return new Response(answer);\n}\n',
  });
  const run = await berth(['deploy', dir, '--site', site.subdomain]);
  t.is(run.code, 1);
  t.regex(run.stdout, /^api\/broken\.ts:2:18: deployment FAILED: syntax error/m);
  t.regex(run.stdout, /^api\/ok\.ts: deployed$/m);
  t.notRegex(run.stdout + run.stderr, STACK_TRACE);

  // Deploying again without a fix sends nothing, and still fails: the function is still broken.
  const again = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.is(again.code, 1);
  const unchanged = JSON.parse(again.stdout) as DeployJson & {
    failing: Array<{ path: string; error: { line: number; column: number } }>;
  };
  t.deepEqual(unchanged.uploaded, []);
  t.like(unchanged.failing, [{ path: 'api/broken.ts', error: { line: 2, column: 18 } }]);
  await fs.writeFile(path.join(dir, 'api/broken.ts'), 'export default () => new Response("fixed");\n');
  const fixed = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.is(fixed.code, 0, fixed.stdout);
  t.is((await t0.site(site.subdomain).get('api/broken')).body, 'fixed');
});

test('a link that leads outside the folder is refused before anything is uploaded', async (t) => {
  const site = await createSite(t0.owner);
  const outside = path.join(scratch, 'private.txt');
  await fs.writeFile(outside, 'not for the web');
  const dir = await project({ 'web/index.html': 'home' });
  await fs.symlink(outside, path.join(dir, 'web/notes.txt'));
  await fs.symlink('..', path.join(dir, 'web/up'));

  const run = await berth(['deploy', dir, '--site', site.subdomain]);
  t.is(run.code, 1);
  t.regex(run.stderr, /^berth: web\/(notes\.txt|up) links to .+, outside .+/m);
  t.notRegex(run.stderr, STACK_TRACE);
  t.deepEqual(await remoteVersions(site.bucketId), {});

  // Links that stay inside are followed.
  await fs.rm(path.join(dir, 'web/notes.txt'));
  await fs.rm(path.join(dir, 'web/up'));
  await fs.symlink('index.html', path.join(dir, 'web/home.html'));
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  t.is((await t0.site(site.subdomain).get('home.html')).body, 'home');
});

test('watch deploys each change until it is interrupted', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'first' });
  const watch = start(['watch', dir, '--site', site.subdomain]);
  t.teardown(() => watch.child.kill('SIGKILL'));
  await until(() => watch.run.stderr.includes('watching'), 'the watcher to start');
  t.is((await t0.site(site.subdomain).get('')).body, 'first');

  await fs.writeFile(path.join(dir, 'web/index.html'), 'second');
  await fs.mkdir(path.join(dir, 'api'));
  await fs.writeFile(path.join(dir, 'api/when.ts'), 'export default () => new Response("now");\n');
  await until(async () => (await t0.site(site.subdomain).get('')).body === 'second', 'the edit to be served');
  await until(async () => (await t0.site(site.subdomain).get('api/when')).body === 'now', 'the new function');
  await until(() => watch.run.stdout.includes('api/when.ts: deployed'), 'the deployment report');

  watch.child.kill('SIGINT');
  const ended = await watch.exited;
  t.is(ended.code, 0, ended.stderr);
});

test('db migrate applies a folder of migrations once, however often it runs', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({
    'migrations/0001_notes.sql': 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);',
    'migrations/0002_tags.sql': 'ALTER TABLE notes ADD COLUMN tag TEXT;\nCREATE INDEX notes_tag ON notes (tag);',
  });
  const first = await berth(['db', 'migrate', dir, '--site', site.subdomain, '--json']);
  t.is(first.code, 0, first.stderr);
  t.like(JSON.parse(first.stdout), { createdDatabase: true, appliedNames: ['0001_notes.sql', '0002_tags.sql'] });

  const second = await berth(['db', 'migrate', path.join(dir, 'migrations'), '--site', site.subdomain]);
  t.is(second.code, 0, second.stderr);
  t.regex(second.stdout, /up to date/);

  const { databases } = json<{ databases: Array<{ id: string }> }>(
    await t0.owner.api.get(`v0/sites/${site.id}/databases`),
  );
  const receipts = json<{ applied: Array<{ name: string }> }>(
    await t0.owner.api.get(`v0/sites/${site.id}/databases/${databases[0]!.id}/migrations`),
  );
  t.deepEqual(
    receipts.applied.map((r) => r.name),
    ['0001_notes.sql', '0002_tags.sql'],
  );

  await fs.writeFile(path.join(dir, 'migrations/0003_broken.sql'), 'ALTER TABLE nowhere ADD COLUMN x;');
  const failed = await berth(['db', 'migrate', dir, '--site', site.subdomain]);
  t.is(failed.code, 1);
  t.regex(failed.stderr, /^berth: 0003_broken\.sql failed .*\(migration_failed\)$/m);
  t.notRegex(failed.stderr, STACK_TRACE);
});

test('db export saves a dump that loads into SQLite', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({
    'migrations/0001_notes.sql': 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);',
  });
  t.is((await berth(['db', 'migrate', dir, '--site', site.subdomain])).code, 0);
  const { databases } = json<{ databases: Array<{ id: string }> }>(
    await t0.owner.api.get(`v0/sites/${site.id}/databases`),
  );
  await t0.owner.api.post(`v0/sites/${site.id}/databases/${databases[0]!.id}/query`, {
    json: { sql: 'INSERT INTO notes (body) VALUES (?)', params: ["it's exported"] },
  });

  const out = path.join(scratch, `${site.subdomain}.sql`);
  const run = await berth(['db', 'export', '--site', site.subdomain, '--out', out, '--json']);
  t.is(run.code, 0, run.stderr);
  t.like(JSON.parse(run.stdout), { file: out });
  const dump = await fs.readFile(out, 'utf8');
  const db = new Database(':memory:');
  t.teardown(() => db.close());
  db.exec(dump);
  t.deepEqual(db.prepare('SELECT body FROM notes').all(), [{ body: "it's exported" }]);
});

test('db delete needs a confirmation: --yes, or a terminal to ask on', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'migrations/0001_a.sql': 'CREATE TABLE a (id INTEGER);' });
  t.is((await berth(['db', 'migrate', dir, '--site', site.subdomain])).code, 0);

  const refused = await berth(['db', 'delete', '--site', site.subdomain]);
  t.is(refused.code, 2);
  t.regex(refused.stderr, /--yes/);
  const deleted = await berth(['db', 'delete', '--site', site.subdomain, '--yes', '--json']);
  t.is(deleted.code, 0, deleted.stderr);
  t.is(JSON.parse(deleted.stdout).deleted, true);
  t.deepEqual(json<{ databases: unknown[] }>(await t0.owner.api.get(`v0/sites/${site.id}/databases`)).databases, []);
});

test('secrets set reads the value from stdin', async (t) => {
  const site = await createSite(t0.owner);
  const run = await berth(['secrets', 'set', 'API_TOKEN', '--site', site.subdomain], {
    input: 'tok-123 with spaces\n',
  });
  t.is(run.code, 0, run.stderr);
  t.false((run.stdout + run.stderr).includes('tok-123'));
  const read = await t0.owner.api.get(`v0/sites/${site.id}/secrets/API_TOKEN`);
  t.is(json<{ secret: { value: string } }>(read).secret.value, 'tok-123 with spaces');

  const empty = await berth(['secrets', 'set', 'EMPTY', '--site', site.subdomain]);
  t.is(empty.code, 2);
  t.regex(empty.stderr, /no value for EMPTY/);
});

test('logs prints what functions wrote, oldest first', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({
    'api/talk.ts':
      'export default (req: Request) => { console.log("first"); console.warn("second"); return new Response("ok"); };\n',
  });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  t.is((await t0.site(site.subdomain).get('api/talk')).body, 'ok');

  const logs = await until(async () => {
    const run = await berth(['logs', '--site', site.subdomain]);
    return run.stdout.includes('second') ? run : undefined;
  }, 'the log lines');
  t.is(logs.code, 0);
  t.regex(logs.stdout, /info +api\/talk\.ts +first\n.*warn +api\/talk\.ts +second/);
  const asJson = await berth(['logs', '--site', site.subdomain, '--lines', '1', '--json']);
  t.deepEqual(
    JSON.parse(asJson.stdout).logs.map((l: { message: string }) => l.message),
    ['second'],
  );
});

test('failures a user can cause are explained, with exit codes 1, 2 and 3 and no stack trace', async (t) => {
  const dir = await project({ 'web/index.html': 'home' });
  const closed = await freePort();
  const unreachable = await berth(['deploy', dir, '--site', 'anything'], {
    env: { ...userEnv(), BERTH_URL: `http://127.0.0.1:${closed}` },
  });
  t.is(unreachable.code, 3);
  t.regex(unreachable.stderr, new RegExp(`cannot reach Berth at http://127\\.0\\.0\\.1:${closed}`));
  t.regex(unreachable.stderr, /BERTH_URL/);

  const badKey = await berth(['logs', '--site', 'anything'], {
    env: { ...userEnv(), BERTH_API_KEY: 'berth_not-a-key' },
  });
  t.is(badKey.code, 3);
  t.regex(badKey.stderr, /refused the API key .*\(unauthorized\)/);
  t.regex(badKey.stderr, /berth admin create-key/);

  const noKey = await berth(['logs', '--site', 'anything'], { env: { ...userEnv(), BERTH_API_KEY: '' } });
  t.is(noKey.code, 3);
  t.regex(noKey.stderr, /BERTH_API_KEY is not set/);

  const unknownSite = await berth(['deploy', dir, '--site', 'no-such-site']);
  t.is(unknownSite.code, 1);
  t.regex(unknownSite.stderr, /no site with subdomain "no-such-site"/);
  const unknownId = await berth(['deploy', dir, '--site', crypto.randomUUID(), '--json']);
  t.is(unknownId.code, 1);
  t.is(JSON.parse(unknownId.stdout).error.code, 'site_not_found');

  const site = await createSite(t0.owner);
  const readOnly = await berth(['deploy', dir, '--site', site.subdomain], {
    env: { ...userEnv(), BERTH_API_KEY: t0.owner.readKey },
  });
  t.is(readOnly.code, 1);
  t.regex(readOnly.stdout + readOnly.stderr, /\(forbidden\)/);

  const usage = await berth(['deploy', dir]);
  t.is(usage.code, 2);
  t.regex(usage.stderr, /--site/);
  const notAFolder = await berth(['deploy', path.join(dir, 'missing'), '--site', site.subdomain]);
  t.is(notAFolder.code, 1);
  t.regex(notAFolder.stderr, /is not a folder/);

  for (const run of [unreachable, badKey, noKey, unknownSite, readOnly, usage, notAFolder])
    t.notRegex(run.stdout + run.stderr, STACK_TRACE);
});

test('every command has help with examples', async (t) => {
  for (const command of [
    ['deploy'],
    ['watch'],
    ['init'],
    ['logs'],
    ['secrets', 'set'],
    ['db', 'migrate'],
    ['db', 'export'],
    ['db', 'delete'],
    ['db'],
  ]) {
    const run = await berth([...command, '--help']);
    t.is(run.code, 0, command.join(' '));
    t.regex(run.stdout, /Examples:\n {2}\$ berth /, command.join(' '));
  }
  const root = await berth(['--help']);
  t.regex(root.stdout, /Exit codes:/);
});
