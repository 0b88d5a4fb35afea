// Functions that import, built at deploy: the site's own modules under lib/ and in "_" files of api/,
// bundled into one module per function; a change of a module rebuilds the functions built from it.
import test from 'ava';
import { type TestBerth, createSite, json, startTestBerth } from './helpers/berth.ts';
import { deployFiles } from './helpers/deployments.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

test('functions share modules of lib/ and "_" files; a change of a module rebuilds both', async (t) => {
  const site = await createSite(t0.owner);
  const files = {
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
  };
  await deployFiles(t0.owner, site.id, files);
  t.is((await t0.site(site.subdomain).get('api/hello')).body, 'HELLO BERTH!');
  t.is((await t0.site(site.subdomain).get('api/plain')).body, 'hello plain');
  t.is((await t0.site(site.subdomain).get('api/_shared/shout')).statusCode, 404, 'a module is no endpoint');

  await deployFiles(t0.owner, site.id, { 'lib/greeting.ts': 'export const greet = (name: string) => "hi " + name;\n' });
  t.is((await t0.site(site.subdomain).get('api/hello')).body, 'HI BERTH!');
  t.is((await t0.site(site.subdomain).get('api/plain')).body, 'hi plain');
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
