// Functions that import, built at deploy against a real npm registry (Verdaccio, test/helpers/npm-
// registry.ts, with no uplink): the site's own modules, npm packages with their dependencies through
// deno.json's import map or npm: specifiers, the real hono and zod, the lock Berth keeps with the
// deployment, and every way a build fails, each with its place and its own words. Hostile packages
// are in test/security/hostile-packages.test.ts.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { type TestBerth, createSite, json, makeDataDir, putFile, startTestBerth } from './helpers/berth.ts';
import { startServe } from './helpers/process.ts';
import { ownerOf, siteOn } from './helpers/served.ts';
import { until } from './helpers/until.ts';
import { createDeployment, deployFiles } from './helpers/deployments.ts';
import { type NpmRegistry, fixturePackage, publishRealPackages, startNpmRegistry } from './helpers/npm-registry.ts';

let registry: NpmRegistry;
let t0: TestBerth;

test.before(async () => {
  registry = await startNpmRegistry();
  for (const name of ['berth-fixture-shout', 'berth-fixture-greet', 'berth-fixture-postinstall'])
    await registry.publish(fixturePackage(name));
  await publishRealPackages(registry);
  t0 = await startTestBerth({ npmRegistry: registry.url, npmMinAgeMinutes: 0 });
});
test.after.always(async () => {
  await t0?.dispose();
  await registry?.stop();
});

interface Failure {
  error: {
    code: string;
    message: string;
    details: { errors: Array<{ path: string; line: number; column: number; message: string }> };
  };
  deployment: { status: string };
}

/** Declares `files` and publishes them; the answer, whatever it is. */
async function publish(berth: TestBerth, siteId: string, files: Record<string, string>) {
  const created = await createDeployment(berth.owner, siteId, files);
  return berth.owner.api.post(`v0/sites/${siteId}/deployments/${created.id}/publish`);
}

const read = async (berth: TestBerth, bucketId: string, file: string) =>
  (await berth.owner.read.get(`v0/buckets/${bucketId}/objects/${file}`, { responseType: 'text' })).body as string;

test('functions share modules of lib/ and "_" files; a change of a module rebuilds every function built from it', async (t) => {
  const site = await createSite(t0.owner);
  await deployFiles(t0.owner, site.id, {
    'lib/greeting.ts': 'export const greet = (name: string) => "hello " + name;\n',
    'api/_shared/shout.ts': 'export const shout = (s: string) => s.toUpperCase();\n',
    'lib/config.json': '{"punctuation": "!"}\n',
    'api/hello.ts': [
      "import { greet } from '../lib/greeting.ts';",
      "import { shout } from './_shared/shout.ts';",
      "import config from '../lib/config.json' with { type: 'json' };",
      "export default () => new Response(shout(greet('berth')) + config.punctuation);",
      '',
    ].join('\n'),
    'api/plain.ts': "import { greet } from '../lib/greeting.ts';\nexport default () => new Response(greet('plain'));\n",
  });
  const on = t0.site(site.subdomain);
  t.is((await on.get('api/hello')).body, 'HELLO BERTH!');
  t.is((await on.get('api/plain')).body, 'hello plain');
  t.is((await on.get('api/_shared/shout')).statusCode, 404, 'a module is no endpoint');

  await deployFiles(t0.owner, site.id, { 'lib/greeting.ts': 'export const greet = (name: string) => "hi " + name;\n' });
  t.is((await on.get('api/hello')).body, 'HI BERTH!');
  t.is((await on.get('api/plain')).body, 'hi plain');

  // The one-file write path builds too, and a module written through it rebuilds the functions.
  await putFile(
    t0.owner,
    site.bucketId,
    'lib/greeting.ts',
    'export const greet = (n: string) => "hey " + n;\n',
    'text/typescript',
  );
  t.is((await on.get('api/plain')).body, 'hey plain');
  const listed = json<{ functions: Array<{ path: string; status: string }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/functions`),
  ).functions;
  t.deepEqual(
    listed.map((f) => [f.path, f.status]),
    [
      ['api/hello.ts', 'ACTIVE'],
      ['api/plain.ts', 'ACTIVE'],
    ],
  );
});

test('npm packages with their dependencies, by deno.json import map or npm: specifier; the lock Berth writes is kept with the deployment and pins the next one', async (t) => {
  const site = await createSite(t0.owner);
  const files = {
    'deno.json': JSON.stringify({ imports: { greet: 'npm:berth-fixture-greet@^1.0.0' } }),
    'api/greet.ts': "import { greet } from 'greet';\nexport default () => new Response(greet('berth'));\n",
    'api/shout.ts':
      "import { shout } from 'npm:berth-fixture-shout@1';\nimport { installed } from 'npm:berth-fixture-postinstall@1';\nexport default () => new Response(shout(installed));\n",
  };
  await deployFiles(t0.owner, site.id, files);
  const on = t0.site(site.subdomain);
  t.is((await on.get('api/greet')).body, 'HELLO BERTH!');
  t.is((await on.get('api/shout')).body, 'BERTH-FIXTURE-POSTINSTALL!');
  t.false(fs.existsSync(path.join(os.tmpdir(), 'berth-postinstall-ran')), 'no install script ran');

  const lock = JSON.parse(await read(t0, site.bucketId, 'deno.lock')) as { npm: Record<string, { integrity: string }> };
  t.deepEqual(Object.keys(lock.npm).sort(), [
    'berth-fixture-greet@1.0.0',
    'berth-fixture-postinstall@1.0.0',
    'berth-fixture-shout@1.0.0',
  ]);
  t.regex(lock.npm['berth-fixture-shout@1.0.0']!.integrity, /^sha512-/);

  // A newer version in the registry changes nothing: the kept lock names 1.0.0.
  await registry.publish({
    name: 'berth-fixture-shout',
    version: '1.1.0',
    files: { 'index.js': 'export function shout(s) { return s.toUpperCase() + "?!"; }\n' },
  });
  await deployFiles(t0.owner, site.id, {
    ...files,
    'api/greet.ts': `${files['api/greet.ts']}// again\n`,
    'deno.lock': JSON.stringify(lock),
  });
  t.is((await on.get('api/greet')).body, 'HELLO BERTH!');

  // A function that asks for the new version by name: the build moves the site to it (greet's ^1.0.0
  // takes it too), the lock it ends with is kept, every function is built with that lock, and the
  // deployment lists its packages and what it changed of them.
  const moved = (await deployFiles(t0.owner, site.id, {
    ...files,
    'api/shout.ts':
      "import { shout } from 'npm:berth-fixture-shout@1.1.0';\nexport default () => new Response(shout('x'));\n",
    'deno.lock': JSON.stringify(lock),
  })) as unknown as {
    packages: Array<{ name: string; version: string; integrity: string }>;
    diff: { packages: { changed: Array<{ name: string; from: string[]; to: string[] }> } };
  };
  t.is((await on.get('api/shout')).body, 'X?!');
  t.is((await on.get('api/greet')).body, 'HELLO BERTH?!', 'built again with the lock kept');
  t.deepEqual(
    moved.packages.map((p) => `${p.name}@${p.version}`),
    ['berth-fixture-greet@1.0.0', 'berth-fixture-postinstall@1.0.0', 'berth-fixture-shout@1.1.0'],
  );
  t.true(moved.packages.every((p) => p.integrity.startsWith('sha512-')));
  t.deepEqual(moved.diff.packages.changed, [{ name: 'berth-fixture-shout', from: ['1.0.0'], to: ['1.1.0'] }]);
  t.truthy(
    (JSON.parse(await read(t0, site.bucketId, 'deno.lock')) as typeof lock).npm['berth-fixture-shout@1.1.0'],
    'the site keeps the lock the build ended with',
  );

  // A second site using the same packages builds its own functions from the same package cache.
  const other = await createSite(t0.owner);
  await deployFiles(t0.owner, other.id, {
    'api/greet.ts': files['api/greet.ts'],
    'deno.json': files['deno.json'],
    'deno.lock': JSON.stringify(lock),
  });
  t.is((await t0.site(other.subdomain).get('api/greet')).body, 'HELLO BERTH!');
});

test('a one-file write keeps the lock its build ended with, and the next one-file build resolves the same versions', async (t) => {
  const own = await startNpmRegistry();
  t.teardown(() => own.stop());
  await own.publish(fixturePackage('berth-fixture-shout'));
  const berth = await startTestBerth({ npmRegistry: own.url, npmMinAgeMinutes: 0 });
  t.teardown(() => berth.dispose());
  const site = await createSite(berth.owner);
  const source =
    "import { shout } from 'npm:berth-fixture-shout@1';\nexport default () => new Response(shout('one'));\n";
  const written = await putFile(berth.owner, site.bucketId, 'api/one.ts', source, 'text/typescript');
  t.is(written.deployment?.status, 'READY');
  const lock = JSON.parse(await read(berth, site.bucketId, 'deno.lock')) as { npm: Record<string, unknown> };
  t.deepEqual(Object.keys(lock.npm), ['berth-fixture-shout@1.0.0']);

  // A newer version in the registry: a later one-file build keeps to the version the lock pins.
  await own.publish({
    name: 'berth-fixture-shout',
    version: '1.1.0',
    files: { 'index.js': 'export function shout(s) { return s.toUpperCase() + "?!"; }\n' },
  });
  await putFile(berth.owner, site.bucketId, 'api/two.ts', source.replace("'one'", "'two'"), 'text/typescript');
  t.is((await berth.site(site.subdomain).get('api/two')).body, 'TWO!');
  t.deepEqual(Object.keys((JSON.parse(await read(berth, site.bucketId, 'deno.lock')) as typeof lock).npm), [
    'berth-fixture-shout@1.0.0',
  ]);
});

test('a function routes with Hono and validates with zod', async (t) => {
  const site = await createSite(t0.owner);
  await deployFiles(t0.owner, site.id, {
    'deno.json': JSON.stringify({ imports: { hono: 'npm:hono@^4.13.0', zod: 'npm:zod@^4.6.0' } }),
    'api/app.ts': [
      "import { Hono } from 'hono';",
      "import { z } from 'zod';",
      'const Greeting = z.object({ name: z.string().min(1) });',
      'const app = new Hono();',
      "app.get('/api/app', (c) => c.json({ hello: c.req.query('name') }));",
      "app.post('/api/app', async (c) => {",
      '  const parsed = Greeting.safeParse(await c.req.json());',
      "  return parsed.success ? c.json({ hi: parsed.data.name }) : c.json({ error: 'invalid' }, 400);",
      '});',
      'export default app.fetch;',
      '',
    ].join('\n'),
  });
  const on = t0.site(site.subdomain);
  t.deepEqual((await on.get('api/app?name=berth', { responseType: 'json' })).body, { hello: 'berth' });
  t.deepEqual((await on.post('api/app', { json: { name: 'berth' }, responseType: 'json' })).body, { hi: 'berth' });
  const invalid = await on.post('api/app', { json: { name: '' }, responseType: 'json' });
  t.is(invalid.statusCode, 400);
  t.deepEqual(invalid.body, { error: 'invalid' });
  t.is((await on.delete('api/app')).statusCode, 404, "Hono's own not-found answer");
});

test('imports a function may not make fail the deployment at their place, and nothing changes', async (t) => {
  const site = await createSite(t0.owner);
  await deployFiles(t0.owner, site.id, { 'api/ok.ts': 'export default () => new Response("ok");\n' });
  const cases: Array<[Record<string, string>, { path: string; line: number; column: number }, RegExp]> = [
    [
      { 'api/a.ts': "import x from 'https://example.com/x.ts';\nexport default () => new Response(x);\n" },
      { path: 'api/a.ts', line: 1, column: 15 },
      /cannot import a remote module: https: and jsr: imports are not allowed/,
    ],
    [
      { 'api/a.ts': "import { join } from 'jsr:@std/path@1';\nexport default () => new Response(join('a'));\n" },
      { path: 'api/a.ts', line: 1, column: 22 },
      /cannot import a remote module/,
    ],
    [
      {
        'api/a.ts':
          "import x from '../../../../../../../../etc/hostname.json' with { type: 'json' };\nexport default () => new Response(x);\n",
      },
      { path: 'api/a.ts', line: 1, column: 15 },
      /cannot import a file outside the site/,
    ],
    [
      {
        'api/a.ts': "import { b } from './b.ts';\nexport default () => new Response(b);\n",
        'api/b.ts': 'export const b = "b";\nexport default () => new Response(b);\n',
      },
      { path: 'api/a.ts', line: 1, column: 19 },
      /cannot import api\/b\.ts: a function imports only the site's modules/,
    ],
    [
      { 'api/a.ts': "import pad from 'npm:berth-fixture-shout@^99';\nexport default () => new Response(pad);\n" },
      { path: 'api/a.ts', line: 1, column: 17 },
      /^npm:berth-fixture-shout@\^99: no version matches$/,
    ],
    [
      { 'deno.json': '{"imports": ', 'api/a.ts': "import x from 'x';\nexport default () => new Response(x);\n" },
      { path: 'deno.json', line: 1, column: 1 },
      /deno.json is not valid JSON/,
    ],
  ];
  for (const [files, place, message] of cases) {
    const res = await publish(t0, site.id, files);
    t.is(res.statusCode, 422, JSON.stringify(files));
    const body = res.body as unknown as Failure;
    t.is(body.error.code, 'deployment_failed');
    t.is(body.deployment.status, 'FAILED');
    t.like(body.error.details.errors[0], place, JSON.stringify(files));
    t.regex(body.error.details.errors[0]!.message, message);
    t.false(body.error.message.includes(t0.dataDir), 'no host path in the answer');
  }
  t.is((await t0.site(site.subdomain).get('api/ok')).body, 'ok', 'the site serves what it served');
  const paths = json<{ files: Array<{ path: string }> }>(
    await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects`),
  ).files;
  t.deepEqual(
    paths.map((f) => f.path),
    ['api/ok.ts'],
  );
});

test('a package younger than BERTH_NPM_MIN_AGE_MINUTES is refused with a message that says so', async (t) => {
  // A package of this test's own: other tests publish versions of the shared fixtures meanwhile.
  await registry.publish({
    name: 'berth-fixture-young',
    version: '1.0.0',
    files: { 'index.js': 'export function shout(s) { return s; }\n' },
  });
  const strict = await startTestBerth({ npmRegistry: registry.url, npmMinAgeMinutes: 1440 });
  t.teardown(() => strict.dispose());
  const site = await createSite(strict.owner);
  const res = await publish(strict, site.id, {
    'api/a.ts':
      "import { shout } from 'npm:berth-fixture-young@1.0.0';\nexport default () => new Response(shout('x'));\n",
  });
  t.is(res.statusCode, 422);
  const body = res.body as unknown as Failure;
  t.is(body.error.code, 'deployment_failed');
  t.like(body.error.details.errors[0], { path: 'api/a.ts', line: 1, column: 23 });
  t.regex(
    body.error.details.errors[0]!.message,
    /^npm:berth-fixture-young@1\.0\.0: no version old enough: packages are used once published for 1440 minutes \(BERTH_NPM_MIN_AGE_MINUTES\), and 1\.0\.0 \(published .+\) is younger$/,
  );
});

test('a registry that does not answer fails the deployment with registry_unavailable and leaves the running functions alone', async (t) => {
  // A registry that takes connections and never answers, then one that refuses them.
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as net.AddressInfo).port;
  const cut = await startTestBerth({
    npmRegistry: `http://127.0.0.1:${port}/`,
    npmMinAgeMinutes: 0,
    buildTimeoutMs: 2000,
  });
  t.teardown(async () => {
    await cut.dispose();
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const site = await createSite(cut.owner);
  await deployFiles(cut.owner, site.id, { 'api/a.ts': 'export default () => new Response("running");\n' });
  const files = {
    'api/a.ts': "import { shout } from 'npm:berth-fixture-shout@1';\nexport default () => new Response(shout('x'));\n",
  };

  const waited = await publish(cut, site.id, files);
  t.is(waited.statusCode, 503);
  const slow = waited.body as unknown as Failure;
  t.is(slow.error.code, 'registry_unavailable');
  t.regex(
    slow.error.message,
    /did not answer within the build's 2000 ms \(BERTH_BUILD_TIMEOUT_MS\): nothing was built or changed/,
  );
  t.is(slow.deployment.status, 'FAILED');

  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => silent.close(() => resolve()));
  const refused = await publish(cut, site.id, files);
  t.is(refused.statusCode, 503);
  t.is((refused.body as unknown as Failure).error.code, 'registry_unavailable');
  t.is((await cut.site(site.subdomain).get('api/a')).body, 'running');
  t.deepEqual(fs.readdirSync(path.join(cut.dataDir, 'runtime', 'builds', 'work')), [], 'no build folder is left');
});

test('packages are kept once in the blob store: a build with no package cache and no registry takes them from there; a tarball changed after its lock fails the deployment', async (t) => {
  const own = await startNpmRegistry();
  t.teardown(() => own.stop());
  await own.publish(fixturePackage('berth-fixture-shout'));
  await own.publish(fixturePackage('berth-fixture-greet'));
  const a = await startTestBerth({ npmRegistry: own.url, npmMinAgeMinutes: 0 });
  t.teardown(() => a.dispose());
  const site = await createSite(a.owner);
  const files = {
    'deno.json': JSON.stringify({ imports: { greet: 'npm:berth-fixture-greet@^1.0.0' } }),
    'lib/name.ts': 'export const name = "berth";\n',
    'api/greet.ts':
      "import { greet } from 'greet';\nimport { name } from '../lib/name.ts';\nexport default () => new Response(greet(name));\n",
  };
  await deployFiles(a.owner, site.id, files);
  const lock = await read(a, site.bucketId, 'deno.lock');
  const stored = (await a.berth.deps
    .db('npm_packages')
    .orderBy('name')
    .select('name', 'version', 'integrity')) as Array<{
    name: string;
    version: string;
    integrity: string;
  }>;
  const locked = JSON.parse(lock) as { npm: Record<string, { integrity: string }> };
  t.deepEqual(
    stored.map((p) => [`${p.name}@${p.version}`, p.integrity]),
    Object.entries(locked.npm).map(([key, value]) => [key, value.integrity]),
    'each package version once, with the integrity the lock pins',
  );

  // A tarball replaced in the registry after the lock was written: a Berth that has never fetched it refuses it.
  await own.replaceTarball('berth-fixture-shout', '1.0.0', {
    name: 'berth-fixture-shout',
    version: '1.0.0',
    files: { 'index.js': 'export function shout(s) { return "pwned"; }\n' },
  });
  const b = await startTestBerth({ npmRegistry: own.url, npmMinAgeMinutes: 0 });
  t.teardown(() => b.dispose());
  const elsewhere = await createSite(b.owner);
  const refused = await publish(b, elsewhere.id, { ...files, 'deno.lock': lock });
  t.is(refused.statusCode, 422);
  const failure = refused.body as unknown as Failure;
  t.is(failure.error.code, 'deployment_failed');
  t.regex(failure.error.details.errors[0]!.message, /berth-fixture-shout@1\.0\.0.*integrity/i);

  // The registry gone and the package cache empty: A builds a change from the packages it keeps.
  await own.stop();
  fs.rmSync(path.join(a.dataDir, 'runtime', 'builds', 'cache', 'npm'), { recursive: true, force: true });
  await deployFiles(a.owner, site.id, { ...files, 'lib/name.ts': 'export const name = "again";\n' });
  t.is((await a.site(site.subdomain).get('api/greet')).body, 'HELLO AGAIN!');
  // The bytes served are the ones kept, not the registry's replacement.
  const newPackage = await publish(a, site.id, {
    'api/other.ts':
      "import { installed } from 'npm:berth-fixture-postinstall@1';\nexport default () => new Response(installed);\n",
  });
  t.is(newPackage.statusCode, 503);
  t.is((newPackage.body as unknown as Failure).error.code, 'registry_unavailable');
});

test('a server killed during a build leaves the site as it was, and its next start removes what the build left', async (t) => {
  // A registry that takes connections and never answers keeps the build waiting.
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const env = {
    BERTH_DATA_DIR: await makeDataDir(t),
    BERTH_NPM_REGISTRY: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/`,
    BERTH_NPM_MIN_AGE_MINUTES: '0',
  };
  const first = await startServe(env);
  const owner = ownerOf(first);
  const site = json<{ id: string; subdomain: string }>(
    await owner.api.post('v0/sites', { json: { accountId: owner.id, name: 'killed' } }),
  );
  await deployFiles(owner, site.id, { 'api/a.ts': 'export default () => new Response("before");\n' });
  const created = await createDeployment(owner, site.id, {
    'api/a.ts':
      "import { shout } from 'npm:berth-fixture-shout@1';\nexport default () => new Response(shout('after'));\n",
  });
  const publishing = owner.api.post(`v0/sites/${site.id}/deployments/${created.id}/publish`).catch(() => null);
  const work = path.join(env.BERTH_DATA_DIR, 'runtime', 'builds', 'work');
  await until(async () => sockets.size > 0 && fs.readdirSync(work).length > 0, 'the build to wait on the registry');
  first.child.kill('SIGKILL');
  await first.exited;
  await publishing;

  const second = await startServe(env);
  t.teardown(() => {
    second.child.kill('SIGKILL');
  });
  t.is((await siteOn(second, site.subdomain).get('api/a')).body, 'before');
  t.deepEqual(fs.readdirSync(work), [], 'the interrupted build left nothing');
  const deployment = json<{ deployment: { status: string } }>(
    await ownerOf(first, second.url).read.get(`v0/sites/${site.id}/deployments/${created.id}`),
  ).deployment;
  t.is(deployment.status, 'UPLOADING', 'the deployment is as it was before its publish: open, not published');
});

test('a start empties a builder package cache grown past 2 GiB, and keeps a smaller one', async (t) => {
  const env = { BERTH_DATA_DIR: await makeDataDir(t) };
  const cache = path.join(env.BERTH_DATA_DIR, 'runtime', 'builds', 'cache');
  const restart = async () => {
    const served = await startServe(env);
    served.child.kill('SIGTERM');
    await served.exited;
  };
  await restart();
  fs.mkdirSync(path.join(cache, 'npm', 'npm.registry.berth', 'small'), { recursive: true });
  fs.writeFileSync(path.join(cache, 'npm', 'npm.registry.berth', 'small', 'index.js'), 'export {};\n');
  await restart();
  t.true(fs.existsSync(path.join(cache, 'npm', 'npm.registry.berth', 'small', 'index.js')), 'a small cache is kept');
  // A file of 3 GiB that takes no disk.
  const big = path.join(cache, 'npm', 'npm.registry.berth', 'big.tgz');
  fs.writeFileSync(big, '');
  fs.truncateSync(big, 3 * 1024 ** 3);
  await restart();
  t.false(fs.existsSync(path.join(cache, 'npm')), 'the cache past its bound is emptied');
  t.true(fs.existsSync(cache), 'the rest of the builder’s cache stays');
});

test('a lock’s tarball addresses reach nothing but the registry: not a loopback server, not one named as a path of the registry', async (t) => {
  const hits: string[] = [];
  const trap = net.createServer((socket) => {
    socket.once('data', (chunk) => hits.push(chunk.toString().split('\r\n')[0]!));
    socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
  t.teardown(() => trap.close());
  const port = (trap.address() as net.AddressInfo).port;
  const fresh = await startTestBerth({ npmRegistry: registry.url, npmMinAgeMinutes: 0 });
  t.teardown(() => fresh.dispose());
  const site = await createSite(fresh.owner);
  const integrity = (
    (await fetch(`${registry.url}berth-fixture-shout`).then((r) => r.json())) as {
      versions: Record<string, { dist: { integrity: string } }>;
    }
  ).versions['1.0.0']!.dist.integrity;
  for (const tarball of [
    `http://127.0.0.1:${port}/berth-fixture-shout-1.0.0.tgz`,
    `http://npm.registry.berth/http://127.0.0.1:${port}/berth-fixture-shout-1.0.0.tgz`,
  ]) {
    const lock = {
      version: '5',
      specifiers: { 'npm:berth-fixture-shout@1.0.0': '1.0.0' },
      npm: { 'berth-fixture-shout@1.0.0': { integrity, tarball } },
    };
    const res = await publish(fresh, site.id, {
      'deno.lock': JSON.stringify(lock),
      'api/a.ts':
        "import { shout } from 'npm:berth-fixture-shout@1.0.0';\nexport default () => new Response(shout('x'));\n",
    });
    t.is(res.statusCode, 422, tarball);
    t.is((res.body as unknown as Failure).error.code, 'deployment_failed');
    t.deepEqual(hits, [], `nothing reached the loopback server for ${tarball}`);
  }
});
