// Hostile npm packages run under a function worker's unchanged permissions: one that runs a command, one
// that reads a host file through node:fs and one that fetches a private address as it is imported each
// fail as a one-file function doing the same does, and a package loads nothing at run time that its
// build did not take in (a URL, another package, a host file, a module of the site).
import test from 'ava';
import { type TestBerth, createSite, startTestBerth } from '../helpers/berth.ts';
import { deployFiles } from '../helpers/deployments.ts';
import { type NpmRegistry, fixturePackage, startNpmRegistry } from '../helpers/npm-registry.ts';

let registry: NpmRegistry;
let t0: TestBerth;

test.before(async () => {
  registry = await startNpmRegistry();
  for (const name of [
    'berth-fixture-shout',
    'berth-fixture-spawn',
    'berth-fixture-passwd',
    'berth-fixture-fetch-private',
    'berth-fixture-dynamic',
  ])
    await registry.publish(fixturePackage(name));
  t0 = await startTestBerth({ npmRegistry: registry.url, npmMinAgeMinutes: 0 });
});
test.after.always(async () => {
  await t0?.dispose();
  await registry?.stop();
});

test('hostile packages run under the worker’s permissions: no command, no host file, no private address', async (t) => {
  const site = await createSite(t0.owner);
  const call = (name: string, body: string) =>
    [
      `import * as hostile from 'npm:${name}@1';`,
      'export default () => {',
      `  try { return new Response(String(${body})); } catch (err) { return new Response(String(err), { status: 500 }); }`,
      '};',
      '',
    ].join('\n');
  await deployFiles(t0.owner, site.id, {
    'api/spawn.ts': call('berth-fixture-spawn', 'hostile.run()'),
    'api/passwd.ts': call('berth-fixture-passwd', 'hostile.read()'),
    'api/fetch.ts': call('berth-fixture-fetch-private', 'hostile.outcome'),
  });
  const on = t0.site(site.subdomain);
  const spawn = await on.get('api/spawn');
  t.is(spawn.statusCode, 500);
  t.regex(String(spawn.body), /NotCapable/);
  const passwd = await on.get('api/passwd');
  t.is(passwd.statusCode, 500);
  t.regex(String(passwd.body), /NotCapable/);
  t.notRegex(String(passwd.body), /root:/);
  const fetched = await on.get('api/fetch');
  t.regex(String(fetched.body), /^refused: /, 'the metadata address is refused at import time');
});

test('a package loads nothing at run time that its build did not hold', async (t) => {
  const site = await createSite(t0.owner);
  await deployFiles(t0.owner, site.id, {
    'api/load.ts': [
      "import { load } from 'npm:berth-fixture-dynamic@1';",
      'export default async (req: Request) => new Response(await load(new URL(req.url).searchParams.get("m")!));',
      '',
    ].join('\n'),
  });
  const on = t0.site(site.subdomain);
  for (const specifier of [
    'https://deno.land/std/path/mod.ts',
    'npm:berth-fixture-shout@1',
    'file:///etc/passwd',
    '../lib/anything.ts',
  ]) {
    const res = await on.get('api/load', { searchParams: { m: specifier } });
    t.is(res.statusCode, 200);
    t.regex(res.body, /^refused: /, specifier);
  }
});
