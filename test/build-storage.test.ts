// What builds keep and what they cost: built modules and npm package tarballs count against the
// account's storage once per blob, are held while the site's functions or its kept deployments use
// them, and are forgotten and swept after; a build past the storage limit fails with quota_exceeded.
// Promote and restore reuse the builds with the registry stopped, and a module past 10 MiB is refused
// at deploy.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { setStorageLimit } from '../control-plane/services/storage-quota.ts';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { createDeployment, deployFiles } from './helpers/deployments.ts';
import { type NpmRegistry, fixturePackage, startNpmRegistry } from './helpers/npm-registry.ts';
import { until } from './helpers/until.ts';

let registry: NpmRegistry;
let t0: TestBerth;

test.before(async () => {
  registry = await startNpmRegistry();
  for (const name of ['berth-fixture-shout', 'berth-fixture-greet']) await registry.publish(fixturePackage(name));
  // Two kept deployments, and builds no site holds forgotten after half a second unused.
  t0 = await startTestBerth({ npmRegistry: registry.url, npmMinAgeMinutes: 0, deploymentsKept: 2, blobSweepMs: 500 });
});
test.after.always(async () => {
  await t0?.dispose();
  await registry?.stop();
});

const GREET_CONFIG = JSON.stringify({ imports: { greet: 'npm:berth-fixture-greet@^1.0.0' } });
const greeter = (name: string) =>
  `import { greet } from 'greet';\nexport default () => new Response(greet(${JSON.stringify(name)}));\n`;
const bytes = (...texts: string[]) => texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0);

async function usedBytes(berth: TestBerth): Promise<number> {
  return json<{ usage: { storage: { usedBytes: number } } }>(await berth.owner.read.get('v0/accounts/current/usage'))
    .usage.storage.usedBytes;
}

const readFile = async (berth: TestBerth, bucketId: string, file: string) =>
  (await berth.owner.read.get(`v0/buckets/${bucketId}/objects/${file}`, { responseType: 'text' })).body as string;

/** The module the function at `file` is served from, as its build row has it. */
async function moduleOf(berth: TestBerth, siteId: string, file: string) {
  const row = (await berth.berth.deps
    .db('functions')
    .join('builds', 'builds.module_sha256', 'functions.module_sha256')
    .where({ 'functions.site_id': siteId, 'functions.path': file })
    .first('builds.module_sha256 as sha256', 'builds.module_bytes as bytes')) as
    | { sha256: string; bytes: number | string }
    | undefined;
  if (!row) throw new Error(`${file} is not served from a build`);
  return { sha256: row.sha256, bytes: Number(row.bytes) };
}

async function tarballs(berth: TestBerth) {
  return (
    (await berth.berth.deps
      .db('npm_packages')
      .whereIn('name', ['berth-fixture-greet', 'berth-fixture-shout'])
      .select('tarball_sha256', 'tarball_bytes')) as Array<{ tarball_sha256: string; tarball_bytes: number | string }>
  ).map((row) => ({ sha256: row.tarball_sha256, bytes: Number(row.tarball_bytes) }));
}

test.serial(
  'built modules and package tarballs count once against the account, and go once no kept deployment holds them',
  async (t) => {
    const { deps } = t0.berth;
    const a = await createSite(t0.owner);
    const before = await usedBytes(t0);
    const filesA = { 'deno.json': GREET_CONFIG, 'api/greet.ts': greeter('a') };
    await deployFiles(t0.owner, a.id, filesA);
    const lock = await readFile(t0, a.bucketId, 'deno.lock');
    const moduleA = await moduleOf(t0, a.id, 'api/greet.ts');
    const packages = await tarballs(t0);
    t.is(packages.length, 2, 'greet and the package it depends on');
    const packageBytes = packages.reduce((sum, p) => sum + p.bytes, 0);
    const afterA = await usedBytes(t0);
    t.is(afterA - before, bytes(GREET_CONFIG, filesA['api/greet.ts'], lock) + moduleA.bytes + packageBytes);

    // A second site with the same packages: only its own file and module are new to the account.
    const b = await createSite(t0.owner);
    const hello = greeter('b');
    await deployFiles(t0.owner, b.id, { 'deno.json': GREET_CONFIG, 'deno.lock': lock, 'api/hello.ts': hello });
    const moduleB = await moduleOf(t0, b.id, 'api/hello.ts');
    t.not(moduleB.sha256, moduleA.sha256);
    const afterB = await usedBytes(t0);
    t.is(afterB - afterA, bytes(hello) + moduleB.bytes);

    // The function goes: the deployment that had it is still one of the two kept, and holds its module.
    const page = '<h1>a</h1>';
    await deployFiles(t0.owner, a.id, { 'web/index.html': page }, true);
    t.is(await usedBytes(t0), afterB + bytes(page));
    // One more, and no kept deployment of A holds the module: it no longer counts, and is swept.
    const again = '<h1>again</h1>';
    await deployFiles(t0.owner, a.id, { 'web/index.html': again }, true);
    t.is(await usedBytes(t0), afterB + bytes(page, again) - moduleA.bytes);
    await until(
      async () => !(await deps.db('builds').where({ module_sha256: moduleA.sha256 }).first()),
      "the build of A's function forgotten",
    );
    await until(async () => !(await deps.blobs.has(moduleA.sha256)), "the module of A's function swept");
    // B still holds the packages: they stay, and B still serves.
    t.is((await tarballs(t0)).length, 2);
    t.is((await t0.site(b.subdomain).get('api/hello')).body, 'HELLO B!');

    // Once B's kept deployments hold them no more either, the packages go too.
    const usedNow = await usedBytes(t0);
    await deployFiles(t0.owner, b.id, { 'web/index.html': page }, true);
    await deployFiles(t0.owner, b.id, { 'web/index.html': again }, true);
    t.is(await usedBytes(t0), usedNow - moduleB.bytes - packageBytes);
    await until(async () => (await tarballs(t0)).length === 0, 'the packages forgotten');
    for (const p of packages) await until(async () => !(await deps.blobs.has(p.sha256)), 'a package tarball swept');
  },
);

test.serial('a build past the storage limit fails its deployment, and a one-file write its function', async (t) => {
  const { deps } = t0.berth;
  // The packages and the lock are the account's already (another site holds them): only the function's
  // source and its module are new.
  const holder = await createSite(t0.owner);
  await deployFiles(t0.owner, holder.id, { 'deno.json': GREET_CONFIG, 'api/greet.ts': greeter('holder') });
  const lock = await readFile(t0, holder.bucketId, 'deno.lock');
  const site = await createSite(t0.owner);
  await deployFiles(t0.owner, site.id, { 'api/plain.ts': 'export default () => new Response("plain");\n' });
  const source = greeter('quota');
  // Room for the source, not for its module.
  await setStorageLimit(deps, deps.config, t0.owner.id, (await usedBytes(t0)) + bytes(source) + 16);
  t.teardown(() => setStorageLimit(deps, deps.config, t0.owner.id, null));
  const created = await createDeployment(t0.owner, site.id, {
    'deno.json': GREET_CONFIG,
    'deno.lock': lock,
    'api/greet.ts': source,
  });
  const refused = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${created.id}/publish`);
  t.is(refused.statusCode, 422);
  const failure = json<{
    error: { code: string; details: { errors: Array<{ message: string }> } };
    deployment: { status: string };
  }>(refused);
  t.is(failure.error.code, 'deployment_failed');
  t.regex(failure.error.details.errors[0]!.message, /^this account stores .* limit, and the write needs/);
  t.is(failure.deployment.status, 'FAILED');
  t.is((await t0.site(site.subdomain).get('api/greet')).statusCode, 404, 'nothing changed');

  const oneFile =
    "import { greet } from 'npm:berth-fixture-greet@1.0.0';\nexport default () => new Response(greet('one file'));\n";
  await setStorageLimit(deps, deps.config, t0.owner.id, (await usedBytes(t0)) + bytes(oneFile) + 16);
  const written = await putFile(t0.owner, site.bucketId, 'api/plain.ts', oneFile, 'text/typescript');
  t.is(written.deployment?.status, 'FAILED');
  t.regex(written.deployment?.error?.message ?? '', /^this account stores .* limit/);
  t.is((await t0.site(site.subdomain).get('api/plain')).body, 'plain', 'the last good version stays');
});

test.serial('promote and restore reuse the builds they bring back, with the registry stopped', async (t) => {
  const own = await startNpmRegistry();
  t.teardown(() => own.stop());
  await own.publish(fixturePackage('berth-fixture-shout'));
  await own.publish(fixturePackage('berth-fixture-greet'));
  const berth = await startTestBerth({ npmRegistry: own.url, npmMinAgeMinutes: 0 });
  t.teardown(() => berth.dispose());
  const site = await createSite(berth.owner);
  const files = (name: string) => ({
    'deno.json': GREET_CONFIG,
    'lib/name.ts': `export const name = ${JSON.stringify(name)};\n`,
    'api/greet.ts':
      "import { greet } from 'greet';\nimport { name } from '../lib/name.ts';\nexport default () => new Response(greet(name));\n",
  });
  const first = await deployFiles(berth.owner, site.id, files('one'));
  const lock = await readFile(berth, site.bucketId, 'deno.lock');
  await deployFiles(berth.owner, site.id, { ...files('two'), 'deno.lock': lock });
  const afterTwo = new Date().toISOString();
  await deployFiles(berth.owner, site.id, { ...files('three'), 'deno.lock': lock });
  const on = berth.site(site.subdomain);
  t.is((await on.get('api/greet')).body, 'HELLO THREE!');

  await own.stop();
  fs.rmSync(path.join(berth.dataDir, 'runtime', 'builds', 'cache'), { recursive: true, force: true });
  const promoted = await berth.owner.api.post(`v0/sites/${site.id}/deployments/${first.id}/promote`);
  t.is(promoted.statusCode, 200, JSON.stringify(promoted.body));
  t.is((await on.get('api/greet')).body, 'HELLO ONE!');
  const restored = await berth.owner.api.post(`v0/sites/${site.id}/restore`, { json: { at: afterTwo } });
  t.is(restored.statusCode, 200, JSON.stringify(restored.body));
  t.is((await on.get('api/greet')).body, 'HELLO TWO!');
});

test.serial('a built module past 10 MiB fails its deployment at its function', async (t) => {
  const site = await createSite(t0.owner);
  await putFile(
    t0.owner,
    site.bucketId,
    'lib/big.js',
    `export const big = "${'x'.repeat(10.5 * 1024 * 1024)}";\n`,
    'text/javascript',
  );
  const created = await createDeployment(t0.owner, site.id, {
    'api/big.ts': "import { big } from '../lib/big.js';\nexport default () => new Response(String(big.length));\n",
  });
  const refused = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${created.id}/publish`);
  t.is(refused.statusCode, 422);
  const failure = json<{ error: { code: string; details: { errors: Array<{ path: string; message: string }> } } }>(
    refused,
  );
  t.is(failure.error.code, 'deployment_failed');
  t.is(failure.error.details.errors[0]!.path, 'api/big.ts');
  t.regex(
    failure.error.details.errors[0]!.message,
    /^the built module is \d+ bytes, more than the 10485760 a function may be$/,
  );
  t.is((await t0.site(site.subdomain).get('api/big')).statusCode, 404);
});
