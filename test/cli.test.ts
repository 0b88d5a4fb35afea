// The `berth` client commands, run as a user runs them: a child process pointed at a real server by
// BERTH_URL and BERTH_API_KEY.
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { freePort } from './helpers/ports.ts';
import { startTcpProxy } from './helpers/tcp-proxy.ts';
import { until } from './helpers/until.ts';
import { siteWithDatabase } from './helpers/databases.ts';

/** The diff of a deployment whose deno.lock pins no npm package, before or after. */
const NO_PACKAGE_CHANGES = { added: [], removed: [], changed: [] };

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

interface Deployment {
  id: string;
  shortId: string;
  kind: string;
  status: string;
  current: boolean;
  message: string | null;
  previewUrl: string;
  fileList: Array<{ path: string; versionId: string | null }>;
  diff: { added: string[]; changed: string[]; removed: string[] };
}

interface DeployJson {
  deployment: Deployment | null;
  uploaded: Array<{ path: string; bytes: number }>;
  unchanged: string[];
  deleted: string[];
  failed: unknown[];
  errors: Array<{ path: string; line: number; column: number; message: string }>;
}

async function history(siteId: string): Promise<Deployment[]> {
  return json<{ deployments: Deployment[] }>(await t0.owner.read.get(`v0/sites/${siteId}/deployments`)).deployments;
}

test('init, then deploy: the page and the functions that share lib/ answer; later deploys send only what changed', async (t) => {
  const dir = path.join(scratch, 'hello-project');
  const init = await berth(['init', dir]);
  t.is(init.code, 0, init.stderr);
  for (const file of [
    'web/index.html',
    'api/hello.ts',
    'lib/greeting.ts',
    'deno.json',
    'migrations/0001_init.sql',
    'README.md',
  ])
    await t.notThrowsAsync(fs.access(path.join(dir, file)));

  const site = await createSite(t0.owner);
  const first = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.is(first.code, 0, first.stderr);
  const deployed = JSON.parse(first.stdout) as DeployJson;
  const template = ['api/goodbye.ts', 'api/hello.ts', 'deno.json', 'lib/greeting.ts', 'web/index.html'];
  t.deepEqual(
    deployed.uploaded.map((f) => f.path),
    template,
  );
  t.like(deployed.deployment, { status: 'PUBLISHED', kind: 'DEPLOY', current: true });
  t.regex(first.stderr, /uploaded web\/index\.html/);

  const page = await t0.site(site.subdomain).get('');
  t.is(page.statusCode, 200);
  t.is(page.headers['content-type'], 'text/html; charset=utf-8');
  t.regex(page.body, /Hello from Berth/);
  const hello = await t0.site(site.subdomain).get('api/hello', { responseType: 'json' });
  t.is(hello.statusCode, 200);
  t.like(hello.body as object, { hello: 'world', visits: 1, site: site.id });
  t.is((await t0.site(site.subdomain).get('api/goodbye')).statusCode, 200);

  const again = await berth(['deploy', dir, '--site', site.id, '--json']);
  t.is(again.code, 0, again.stderr);
  t.like(JSON.parse(again.stdout) as DeployJson, { uploaded: [], deployment: null }, 'nothing changed: no deployment');

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
  t.deepEqual(
    result.unchanged,
    template.filter((file) => file !== 'web/index.html'),
  );
  const after = await remoteVersions(site.bucketId);
  t.is(after['api/hello.ts'], before['api/hello.ts']);
  t.not(after['web/index.html'], before['web/index.html']);
  t.is(
    after['web/index.html'],
    result.deployment!.fileList.find((f) => f.path === 'web/index.html')?.versionId ?? undefined,
  );
  t.deepEqual(result.deployment!.diff, {
    packages: NO_PACKAGE_CHANGES,
    added: [],
    changed: ['web/index.html'],
    removed: [],
  });
  t.is((await t0.site(site.subdomain).get('')).body, '<h1>Changed</h1>\n');
});

test('--delete removes remote files gone locally, and leaves alone the folders the project does not have', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'home', 'web/old.html': 'old' });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  await putFile(t0.owner, site.bucketId, 'data/visits.json', '3', 'application/json');
  await putFile(
    t0.owner,
    site.bucketId,
    'api/kept.ts',
    'export default () => new Response("kept");\n',
    'text/typescript',
  );
  await fs.rm(path.join(dir, 'web/old.html'));

  const kept = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.deepEqual((JSON.parse(kept.stdout) as DeployJson).deleted, []);
  const pruned = await berth(['deploy', dir, '--site', site.subdomain, '--delete', '--json']);
  t.is(pruned.code, 0, pruned.stderr);
  const result = JSON.parse(pruned.stdout) as DeployJson;
  t.deepEqual(result.deleted, ['web/old.html']);
  t.deepEqual(result.deployment!.diff.removed, ['web/old.html'], 'removed in the deployment itself');
  t.deepEqual(Object.keys(await remoteVersions(site.bucketId)).sort(), [
    'api/kept.ts',
    'data/visits.json',
    'web/index.html',
  ]);
  t.is((await t0.site(site.subdomain).get('old.html')).statusCode, 404);
  t.is((await t0.site(site.subdomain).get('api/kept')).body, 'kept');
});

// The tests of lib/, deno.json and deno.lock run one at a time, before the rest of the file: its dozens
// of CLI processes starting at once on a loaded machine can hold a watcher's start past its wait.
const LIB_GREETING = "export const greeting = (name: string): string => 'hello, ' + name;\n";

test.serial(
  'deploy sends lib/, deno.json and deno.lock with the site’s folders; --delete keeps those the project lacks',
  async (t) => {
    const site = await createSite(t0.owner);
    const dir = await project({
      'web/index.html': 'modules',
      'lib/greeting.ts': LIB_GREETING,
      'lib/words/en.json': '{"hello": "hello"}\n',
      'deno.json': '{"imports": {}}\n',
      'deno.lock': '{"version": "5"}\n',
      'notes.txt': 'not deployed: only deno.json and deno.lock are taken from the root',
    });
    const run = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
    t.is(run.code, 0, run.stderr);
    const deployed = JSON.parse(run.stdout) as DeployJson & { savedLock: unknown };
    t.deepEqual(deployed.deployment!.diff.added, [
      'deno.json',
      'deno.lock',
      'lib/greeting.ts',
      'lib/words/en.json',
      'web/index.html',
    ]);
    t.is(deployed.savedLock, null, 'the site holds the project’s own lock');
    t.deepEqual(Object.keys(await remoteVersions(site.bucketId)).sort(), [
      'deno.json',
      'deno.lock',
      'lib/greeting.ts',
      'lib/words/en.json',
      'web/index.html',
    ]);
    const lib = await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/lib/greeting.ts`, {
      responseType: 'text',
    });
    t.is(lib.body, LIB_GREETING);

    // A project of pages alone, deployed with --delete: the site's lib/, deno.json and deno.lock are not its to remove.
    const pages = await project({ 'web/index.html': 'pages only' });
    const pruned = await berth(['deploy', pages, '--site', site.subdomain, '--delete', '--json']);
    t.is(pruned.code, 0, pruned.stderr);
    const result = JSON.parse(pruned.stdout) as DeployJson & { savedLock: unknown };
    t.deepEqual(result.deployment!.diff, {
      packages: NO_PACKAGE_CHANGES,
      added: [],
      changed: ['web/index.html'],
      removed: [],
    });
    t.is(result.savedLock, null, 'a project of pages alone is not given the lock');
    t.deepEqual(await fs.readdir(pages), ['web']);
    t.deepEqual(Object.keys(await remoteVersions(site.bucketId)).sort(), [
      'deno.json',
      'deno.lock',
      'lib/greeting.ts',
      'lib/words/en.json',
      'web/index.html',
    ]);

    // The same project without lib/words/: --delete removes what is gone from a folder it has.
    await fs.rm(path.join(dir, 'lib/words'), { recursive: true });
    const gone = await berth(['deploy', dir, '--site', site.subdomain, '--delete', '--json']);
    t.is(gone.code, 0, gone.stderr);
    t.deepEqual((JSON.parse(gone.stdout) as DeployJson).deployment!.diff, {
      packages: NO_PACKAGE_CHANGES,
      added: [],
      changed: ['web/index.html'],
      removed: ['lib/words/en.json'],
    });
  },
);

test.serial(
  'deploy saves the site’s deno.lock into a project that has none; a project’s own lock is sent instead',
  async (t) => {
    const site = await createSite(t0.owner);
    const dir = await project({
      'web/index.html': 'one',
      'api/hello.ts': 'export default () => new Response("hello");\n',
    });
    t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
    // The lock the server's build keeps with a site, written here through the file API.
    const siteLock = '{\n  "version": "5",\n  "npm": {}\n}\n';
    await putFile(t0.owner, site.bucketId, 'deno.lock', siteLock, 'application/json');

    await fs.writeFile(path.join(dir, 'web/index.html'), 'two');
    const run = await berth(['deploy', dir, '--site', site.subdomain]);
    t.is(run.code, 0, run.stderr);
    const lockPath = path.join(await fs.realpath(dir), 'deno.lock');
    t.true(run.stdout.includes(`\nsaved the site's deno.lock into ${lockPath}: `), run.stdout);
    t.is(await fs.readFile(lockPath, 'utf8'), siteLock);
    t.deepEqual((await fs.readdir(dir)).sort(), ['api', 'deno.lock', 'web'], 'no temporary file is left');

    // Now the project's lock is the site's: the next deploy has nothing to send and nothing to save.
    const again = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
    t.is(again.code, 0, again.stderr);
    t.like(JSON.parse(again.stdout) as object, { deployment: null, savedLock: null });

    // A lock of the project's own that differs is sent: the site takes it, and nothing is saved (a preview
    // saves nothing either).
    const newer = '{\n  "version": "5",\n  "npm": {"left-pad@1.3.0": "sha512-x"}\n}\n';
    await putFile(t0.owner, site.bucketId, 'deno.lock', newer, 'application/json');
    const own = '{"version": "5"}\n';
    await fs.writeFile(path.join(dir, 'deno.lock'), own);
    await fs.writeFile(path.join(dir, 'web/index.html'), 'three');
    const preview = await berth(['deploy', dir, '--site', site.subdomain, '--preview', '--json']);
    t.is(preview.code, 0, preview.stderr);
    t.like(JSON.parse(preview.stdout) as object, { savedLock: null });
    t.is(await fs.readFile(lockPath, 'utf8'), own);
    const published = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
    t.is(published.code, 0, published.stderr);
    const result = JSON.parse(published.stdout) as DeployJson & { savedLock: unknown };
    t.deepEqual(result.deployment!.diff, {
      packages: { ...NO_PACKAGE_CHANGES, removed: [{ name: 'left-pad', version: '1.3.0', integrity: null }] },
      added: [],
      changed: ['deno.lock', 'web/index.html'],
      removed: [],
    });
    t.is(result.savedLock, null);
    t.is(await fs.readFile(lockPath, 'utf8'), own);
    const onSite = await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/deno.lock`, { responseType: 'text' });
    t.is(onSite.body, own);
  },
);

test('a broken function fails the deployment with each file’s line and column, and the site stays as it was', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({
    'web/index.html': 'good page',
    'api/ok.ts': 'export default () => new Response("ok");\n',
  });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  const before = await remoteVersions(site.bucketId);

  await fs.writeFile(path.join(dir, 'web/index.html'), 'new page');
  await fs.writeFile(
    path.join(dir, 'api/broken.ts'),
    'export default async function (req: Request) {\n  const answer = ;\n  return new Response(answer);\n}\n',
  );
  await fs.writeFile(path.join(dir, 'api/ok.ts'), 'export default () => new Response("ok, )\n');
  const run = await berth(['deploy', dir, '--site', site.subdomain]);
  t.is(run.code, 1);
  t.regex(run.stdout, /^api\/broken\.ts:2:18: syntax error/m);
  t.regex(run.stdout, /^api\/ok\.ts:\d+:\d+: syntax error/m);
  t.regex(run.stdout, /^deployment [a-z0-9]{8} FAILED: nothing about the site changed$/m);
  t.notRegex(run.stdout + run.stderr, STACK_TRACE);
  t.deepEqual(await remoteVersions(site.bucketId), before, 'no file of the site changed');
  t.is((await t0.site(site.subdomain).get('')).body, 'good page');
  t.is((await t0.site(site.subdomain).get('api/ok')).body, 'ok');
  t.is((await history(site.id))[0]!.status, 'FAILED');

  // Deploying again without a fix fails again, with the same places.
  const again = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.is(again.code, 1);
  const failed = JSON.parse(again.stdout) as DeployJson;
  t.is(failed.deployment!.status, 'FAILED');
  t.like(
    failed.errors.find((e) => e.path === 'api/broken.ts'),
    { line: 2, column: 18 },
  );
  await fs.writeFile(path.join(dir, 'api/broken.ts'), 'export default () => new Response("fixed");\n');
  await fs.writeFile(path.join(dir, 'api/ok.ts'), 'export default () => new Response("ok");\n');
  const fixed = await berth(['deploy', dir, '--site', site.subdomain, '--json']);
  t.is(fixed.code, 0, fixed.stdout);
  t.is((await t0.site(site.subdomain).get('api/broken')).body, 'fixed');
  t.is((await t0.site(site.subdomain).get('')).body, 'new page');
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

test('watch deploys each batch of changes as one deployment until it is interrupted', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'first', 'web/other.html': 'other' });
  const watch = start(['watch', dir, '--site', site.subdomain]);
  t.teardown(() => watch.child.kill('SIGKILL'));
  await until(() => watch.run.stderr.includes('watching'), 'the watcher to start');
  t.is((await t0.site(site.subdomain).get('')).body, 'first');

  await fs.writeFile(path.join(dir, 'web/index.html'), 'second');
  await fs.mkdir(path.join(dir, 'api'));
  // Saved as editors save, whole under a name the watcher ignores and renamed: a batch taken on a slow machine
  // between the file's creation and its bytes would declare an empty file and upload another.
  await fs.writeFile(path.join(dir, 'api/.when.ts.swp'), 'export default () => new Response("now");\n');
  await fs.rename(path.join(dir, 'api/.when.ts.swp'), path.join(dir, 'api/when.ts'));
  await fs.rm(path.join(dir, 'web/other.html'));
  await until(async () => (await t0.site(site.subdomain).get('')).body === 'second', 'the edit to be served');
  await until(async () => (await t0.site(site.subdomain).get('api/when')).body === 'now', 'the new function');
  await until(() => (watch.run.stdout.match(/^deployment [a-z0-9]{8} published/gm) ?? []).length >= 2, 'the reports');
  t.is((await t0.site(site.subdomain).get('other.html')).body, 'other', 'no prune without --delete');

  watch.child.kill('SIGINT');
  const ended = await watch.exited;
  t.is(ended.code, 0, ended.stderr);
  const deployments = await history(site.id);
  t.true(deployments.length >= 2);
  t.true(
    deployments.every((d) => d.kind === 'DEPLOY' && d.status === 'PUBLISHED'),
    `each batch one deployment: ${JSON.stringify(deployments.map((d) => [d.kind, d.status, d.message]))}; the watcher said: ${watch.run.stderr.slice(-2000)}`,
  );
  t.regex(deployments.at(-1)!.message ?? '', /^berth watch/);
});

test.serial('watch deploys changes to lib/ and deno.json, and nothing else at the project’s root', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'home', 'deno.json': '{"imports": {}}\n' });
  const watch = start(['watch', dir, '--site', site.subdomain]);
  t.teardown(() => watch.child.kill('SIGKILL'));
  await until(() => watch.run.stderr.includes('watching'), 'the watcher to start');

  const text = async (file: string) =>
    (await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/${file}`, { responseType: 'text' })).body;
  await fs.writeFile(path.join(dir, 'notes.txt'), 'not deployed');
  await fs.mkdir(path.join(dir, 'lib'));
  await fs.writeFile(path.join(dir, 'lib/greeting.ts'), LIB_GREETING);
  await fs.writeFile(path.join(dir, 'deno.json'), '{"imports": {"greet": "./lib/greeting.ts"}}\n');
  await until(async () => (await remoteVersions(site.bucketId))['lib/greeting.ts'] !== undefined, 'lib/ deployed');
  await until(async () => (await text('deno.json')).includes('greet'), 'the new deno.json deployed');
  t.is(await text('lib/greeting.ts'), LIB_GREETING);

  watch.child.kill('SIGINT');
  const ended = await watch.exited;
  t.is(ended.code, 0, ended.stderr);
  t.deepEqual(Object.keys(await remoteVersions(site.bucketId)).sort(), [
    'deno.json',
    'lib/greeting.ts',
    'web/index.html',
  ]);
});

test.serial('watch saves the site’s deno.lock after a batch that changed nothing else, and says so', async (t) => {
  const site = await createSite(t0.owner);
  const fn = 'export default () => new Response("hi");\n';
  const dir = await project({ 'api/hi.ts': fn });
  const watch = start(['watch', dir, '--site', site.subdomain]);
  t.teardown(() => watch.child.kill('SIGKILL'));
  await until(() => watch.run.stderr.includes('watching'), 'the watcher to start');

  const siteLock = `{"version": "5", "test": "${crypto.randomUUID()}"}\n`;
  await putFile(t0.owner, site.bucketId, 'deno.lock', siteLock, 'application/json');
  await fs.writeFile(path.join(dir, 'api/hi.ts'), fn); // saved again, unchanged
  await until(() => watch.run.stdout.includes("saved the site's deno.lock"), 'the report of the saved lock');
  t.is(await fs.readFile(path.join(dir, 'deno.lock'), 'utf8'), siteLock);

  watch.child.kill('SIGINT');
  const ended = await watch.exited;
  t.is(ended.code, 0, ended.stderr);
  t.is((await history(site.id)).filter((d) => d.kind === 'DEPLOY').length, 1, 'the batch deployed nothing');
});

const VERSION_FN = (build: string) => `export default () => new Response('${build}');\n`;

test('deploy publishes the folder as one deployment, prints its id and preview URL, then writes data/ through the file API', async (t) => {
  const site = await createSite(t0.owner);
  // Bytes of this test alone: the account holds no copy another test uploaded, so all three are sent.
  const build = `one ${crypto.randomUUID()}`;
  const dir = await project({
    'web/index.html': `<p>${build}</p>`,
    'web/app.js': `console.log("${build}");`,
    'api/version.ts': VERSION_FN(build),
    'data/seed.json': '{"n":1}',
  });
  const run = await berth(['deploy', dir, '--site', site.subdomain, '--message', 'first']);
  t.is(run.code, 0, run.stderr);
  const [, shortId] =
    /^deployment ([a-z0-9]{8}) published: 3 added, 0 changed, 0 removed, 0 unchanged; 3 uploaded \(\d+ B\)$/m.exec(
      run.stdout,
    ) ?? [];
  t.truthy(shortId, run.stdout);
  t.regex(run.stdout, new RegExp(`^preview: http://${shortId}--${site.subdomain}\\.localhost:\\d+/$`, 'm'));
  t.regex(run.stdout, /^data\/ \(through the file API\): 1 uploaded, 0 unchanged$/m);
  t.regex(run.stderr, new RegExp(`^deployment ${shortId}: 3 of 3 files to upload$`, 'm'));

  // One entry in the history with every file: they went live together, not one by one.
  const [deployment, ...others] = await history(site.id);
  t.like(deployment, { shortId, kind: 'DEPLOY', status: 'PUBLISHED', current: true, files: 3, message: 'first' });
  t.deepEqual(others, []);
  t.is((await t0.site(site.subdomain).get('index.html')).body, `<p>${build}</p>`);
  t.is((await t0.site(site.subdomain).get('app.js')).body, `console.log("${build}");`);
  t.is((await t0.site(site.subdomain).get('api/version')).body, build);
  const seed = await t0.owner.api.get(`v0/buckets/${site.bucketId}/objects/data/seed.json`, { responseType: 'text' });
  t.is(seed.body, '{"n":1}');
});

test('deploy --preview changes nothing live; deployments publish makes it live later', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'live', 'data/n.json': '1' });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  await fs.writeFile(path.join(dir, 'web/index.html'), 'next');
  await fs.writeFile(path.join(dir, 'data/n.json'), '2');

  const run = await berth(['deploy', dir, '--site', site.subdomain, '--preview']);
  t.is(run.code, 0, run.stderr);
  t.regex(run.stdout, /^deployment [a-z0-9]{8} uploaded, not published: 0 added, 1 changed, 0 removed, 0 unchanged/m);
  const [, shortId] = new RegExp(
    `^publish: berth deployments publish ([a-z0-9]{8}) --site ${site.subdomain}$`,
    'm',
  ).exec(run.stdout) ?? [''];
  t.regex(run.stdout, new RegExp(`^preview: http://${shortId}--${site.subdomain}\\.localhost:\\d+/$`, 'm'));
  t.is((await t0.site(site.subdomain).get('')).body, 'live');
  t.like((await history(site.id))[0], { shortId, status: 'UPLOADING', current: false });
  const data = await t0.owner.api.get(`v0/buckets/${site.bucketId}/objects/data/n.json`, { responseType: 'text' });
  t.is(data.body, '1', 'a preview writes no data/');

  const published = await berth(['deployments', 'publish', shortId!, '--site', site.subdomain]);
  t.is(published.code, 0, published.stderr);
  t.regex(published.stdout, new RegExp(`^deployment ${shortId} published: 0 added, 1 changed, 0 removed$`, 'm'));
  t.is((await t0.site(site.subdomain).get('')).body, 'next');
  const again = await berth(['deployments', 'publish', shortId!, '--site', site.subdomain, '--json']);
  t.is(again.code, 1);
  t.is(JSON.parse(again.stdout).error.code, 'deployment_not_open');
});

test('deployments ls lists the history and get shows a deployment’s diff', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'v1', 'web/a.txt': 'a' });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  await fs.writeFile(path.join(dir, 'web/index.html'), 'v2');
  await fs.rm(path.join(dir, 'web/a.txt'));
  await fs.writeFile(path.join(dir, 'web/b.txt'), 'b');
  const second = await berth(['deploy', dir, '--site', site.subdomain, '--delete', '--message', 'second', '--json']);
  t.is(second.code, 0, second.stderr);
  const { deployment } = JSON.parse(second.stdout) as DeployJson;

  const ls = await berth(['deployments', 'ls', '--site', site.subdomain]);
  t.is(ls.code, 0, ls.stderr);
  const rows = ls.stdout.trimEnd().split('\n');
  t.is(rows.length, 3, ls.stdout);
  t.regex(rows[1]!, new RegExp(`^\\* +${deployment!.shortId} +DEPLOY +PUBLISHED .+ second$`));
  const listed = await berth(['deployments', 'ls', '--site', site.subdomain, '--json']);
  t.deepEqual(
    JSON.parse(listed.stdout).deployments.map((d: Deployment) => d.message),
    ['second', null],
  );

  const get = await berth(['deployments', 'get', deployment!.shortId, '--site', site.subdomain]);
  t.is(get.code, 0, get.stderr);
  t.regex(
    get.stdout,
    /^diff: 1 added, 1 changed, 1 removed\n {2}\+ web\/b\.txt\n {2}~ web\/index\.html\n {2}- web\/a\.txt$/m,
  );
  const byId = await berth(['deployments', 'get', deployment!.id, '--site', site.subdomain, '--json']);
  t.deepEqual(JSON.parse(byId.stdout).deployment.diff, {
    packages: NO_PACKAGE_CHANGES,
    added: ['web/b.txt'],
    changed: ['web/index.html'],
    removed: ['web/a.txt'],
  });
  const unknown = await berth(['deployments', 'get', 'zzzzzzzz', '--site', site.subdomain]);
  t.is(unknown.code, 1);
  t.regex(unknown.stderr, /^berth: no deployment zzzzzzzz on /m);
});

test('rollback goes back one deployment at a time, to a given one, or to an instant', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({ 'web/index.html': 'one', 'api/version.ts': VERSION_FN('one') });
  const served = async () =>
    [
      (await t0.site(site.subdomain).get('')).body,
      (await t0.site(site.subdomain).get('api/version')).body,
      (await t0.site(site.subdomain).get('extra.html')).statusCode,
    ].join(' ');
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  const afterOne = new Date().toISOString();
  await new Promise((resolve) => setTimeout(resolve, 20));
  await fs.writeFile(path.join(dir, 'web/index.html'), 'two');
  await fs.writeFile(path.join(dir, 'web/extra.html'), 'extra');
  await fs.writeFile(path.join(dir, 'api/version.ts'), VERSION_FN('two'));
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  await fs.writeFile(path.join(dir, 'web/index.html'), 'three');
  await fs.writeFile(path.join(dir, 'api/version.ts'), VERSION_FN('three'));
  const third = JSON.parse((await berth(['deploy', dir, '--site', site.subdomain, '--json'])).stdout) as DeployJson;
  t.is(await served(), 'three three 200');

  const back = await berth(['rollback', '--site', site.subdomain]);
  t.is(back.code, 0, back.stderr);
  t.regex(
    back.stdout,
    new RegExp(`^${site.subdomain} is back to [a-z0-9]{8}, before ${third.deployment!.shortId} `, 'm'),
  );
  t.is(await served(), 'two two 200');
  const further = await berth(['rollback', '--site', site.subdomain, '--json']);
  t.is(further.code, 0, further.stderr);
  t.like(JSON.parse(further.stdout).deployment, { kind: 'PROMOTE', status: 'PUBLISHED', current: true });
  t.is(await served(), 'one one 404', 'a second rollback goes further back, not forward again');

  t.is((await berth(['rollback', third.deployment!.shortId, '--site', site.subdomain])).code, 0);
  t.is(await served(), 'three three 200');
  const restored = await berth(['rollback', '--to', afterOne, '--site', site.subdomain]);
  t.is(restored.code, 0, restored.stderr);
  t.is(await served(), 'one one 404');
  t.is((await history(site.id))[0]!.kind, 'RESTORE');

  const early = await berth(['rollback', '--to', '2001-01-01T00:00:00Z', '--site', site.subdomain]);
  t.is(early.code, 1);
  t.regex(early.stderr, /\(before_history\)/);
  const both = await berth(['rollback', third.deployment!.shortId, '--to', afterOne, '--site', site.subdomain]);
  t.is(both.code, 2);
  const fresh = await createSite(t0.owner);
  const nothing = await berth(['rollback', '--site', fresh.subdomain]);
  t.is(nothing.code, 1);
  t.regex(nothing.stderr, /has no deployment to roll back/);
});

test('rollback --to --with-database puts the site and its database back to one second, and prints how to undo it', async (t) => {
  const { site, base, query } = await siteWithDatabase(t0.owner);
  const dir = await project({ 'web/index.html': 'one' });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  t.is((await query('CREATE TABLE notes (body TEXT)')).status, 200);
  t.is((await query("INSERT INTO notes VALUES ('then')")).status, 200);
  const replicatedSince = async (since: number) =>
    until(async () => {
      const points = json<{ latest: string | null }>(await t0.owner.read.get(`${base}/restore-points`));
      return points.latest !== null && Date.parse(points.latest) > since;
    }, 'the writes to reach the replica');
  await replicatedSince(Date.now());
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const instant = new Date().toISOString();
  await new Promise((resolve) => setTimeout(resolve, 1100));
  await fs.writeFile(path.join(dir, 'web/index.html'), 'two');
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  t.is((await query("INSERT INTO notes VALUES ('later')")).status, 200);
  await replicatedSince(Date.now());

  const alone = await berth(['rollback', '--with-database', '--site', site.subdomain]);
  t.is(alone.code, 2);
  t.regex(alone.stderr, /--with-database goes with --to/);
  const restored = await berth(['rollback', '--to', instant, '--with-database', '--site', site.subdomain]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, new RegExp(`^${site.subdomain} is back to .*, its database too`, 'm'));
  const undo = /^undo: +(berth rollback .*)$/m.exec(restored.stdout);
  t.truthy(undo, restored.stdout);
  t.is((await t0.site(site.subdomain).get('')).body, 'one');
  const rows = async () => {
    const answer = await query('SELECT body FROM notes ORDER BY rowid');
    if (!answer.body.result?.[0]) throw new Error(JSON.stringify(answer));
    return answer.body.result[0].results.map((row) => row.body);
  };
  t.deepEqual(await rows(), ['then']);
  await replicatedSince(Date.now());
  const again = await berth([...undo![1]!.split(' ').slice(1)]);
  t.is(again.code, 0, again.stderr);
  t.is((await t0.site(site.subdomain).get('')).body, 'two');
  t.deepEqual(await rows(), ['then', 'later']);
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

test('stats prints a site’s traffic with a chart, or the analytics as JSON', async (t) => {
  const site = await createSite(t0.owner, { name: 'Stats' });
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<h1>counted</h1>', 'text/html');
  for (let i = 0; i < 6; i++) t.is((await t0.site(site.subdomain).get('index.html')).statusCode, 200);
  t.is((await t0.site(site.subdomain).get('gone.html')).statusCode, 404);

  const text = await berth(['stats', '--site', site.subdomain, '--since', '2h']);
  t.is(text.code, 0, text.stderr);
  t.regex(text.stdout, /requests +7 +2xx 6 +3xx 0 +4xx 1 +5xx 0/);
  t.regex(text.stdout, /requests \(tallest: 7\)\n│[ ▁▂▃▄▅▆▇█]*█[ ▁▂▃▄▅▆▇█]*│/);
  t.regex(text.stdout, /top paths\n +6 +\/index\.html\n +1 +\/gone\.html/);
  const asJson = await berth(['stats', '--site', site.subdomain, '--since', '2h', '--step', 'minute', '--json']);
  const stats = JSON.parse(asJson.stdout) as { step: string; totals: { requests: number }; series: unknown[] };
  t.is(stats.step, 'minute');
  t.is(stats.totals.requests, 7);
  t.true(stats.series.length >= 120);
  const wrong = await berth(['stats', '--site', site.subdomain, '--since', 'yesterday']);
  t.is(wrong.code, 2);
  t.regex(wrong.stderr, /--since takes an RFC 3339 time/);
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

test('logs --follow prints lines logged after it started, filtered, through a dropped connection, until Ctrl-C', async (t) => {
  const site = await createSite(t0.owner);
  const dir = await project({
    'api/say.ts':
      'export default (req: Request) => { const q = new URL(req.url).searchParams; (console as any)[q.get("level")!](q.get("m")); return new Response("ok"); };\n',
  });
  t.is((await berth(['deploy', dir, '--site', site.subdomain])).code, 0);
  const say = async (m: string, level: string) =>
    t.is((await t0.site(site.subdomain).get('api/say', { searchParams: { m, level } })).body, 'ok');
  await say('recent warning', 'warn');
  await until(
    async () => JSON.stringify((await t0.owner.read.get(`v0/sites/${site.id}/logs`)).body).includes('recent warning'),
    'the first line stored',
  );
  // Through a proxy whose line the test cuts, as a network drop does.
  const proxy = await startTcpProxy('127.0.0.1', t0.berth.port);
  t.teardown(() => proxy.close());
  const follow = start(['logs', '--follow', '--level', 'warn', '--site', site.subdomain], {
    ...userEnv(),
    BERTH_URL: `http://127.0.0.1:${proxy.port}`,
  });
  t.teardown(() => follow.child.kill('SIGKILL'));
  await until(() => follow.run.stdout.includes('recent warning'), 'the recent lines');
  await say('an info line', 'info');
  await say('a live warning', 'warn');
  await until(() => follow.run.stdout.includes('a live warning'), 'the line logged while following', { ms: 5000 });
  proxy.cut();
  await say('logged while cut', 'warn');
  proxy.mend();
  await until(() => follow.run.stdout.includes('logged while cut'), 'the line logged while the connection was down');
  follow.child.kill('SIGINT');
  const ended = await follow.exited;
  t.is(ended.code, 0, ended.stderr);
  const printed = ended.stdout.trim().split('\n');
  t.is(printed.length, 3, ended.stdout);
  t.regex(printed[0]!, /warn +api\/say\.ts +recent warning$/);
  t.regex(printed[1]!, /warn +api\/say\.ts +a live warning$/);
  t.regex(printed[2]!, /warn +api\/say\.ts +logged while cut$/);
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
    ['rollback'],
    ['deployments', 'publish'],
    ['deployments', 'ls'],
    ['deployments'],
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
