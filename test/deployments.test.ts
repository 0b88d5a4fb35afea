// Deployments through real HTTP: a set declared by digest, only the bytes the account lacks uploaded,
// published all at once (files, functions and cron jobs together), a failing function failing the
// whole deployment with the site unchanged byte for byte, prune, the history with its diffs, promote
// (rollback), restore to an instant and its snapshot, writes through the file API in the history, and
// readers that never see an old file after a new one while deployments are published and rolled back.
import crypto from 'node:crypto';
import test from 'ava';
import { type TestBerth, createSite, putFile, startTestBerth } from './helpers/berth.ts';
import { until } from './helpers/until.ts';

/** The diff of a deployment whose deno.lock pins no npm package, before or after. */
const NO_PACKAGE_CHANGES = { added: [], removed: [], changed: [] };

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type Account = TestBerth['owner'];

interface Deployment {
  id: string;
  shortId: string;
  kind: string;
  status: string;
  current: boolean;
  missing: string[];
  files: number;
  bytes: number;
  author: string;
  message: string | null;
  publishedAt: string | null;
  previewUrl: string;
  errors: Array<{ path: string; message: string; line: number; column: number }> | null;
  fileList?: Array<{ path: string; sha256: string | null }>;
  diff?: { added: string[]; changed: string[]; removed: string[] };
}

const sha = (body: string | Buffer) => crypto.createHash('sha256').update(body).digest('hex');

type Files = Record<string, string | { body: string; type: string }>;

const typeOf = (path: string) =>
  path.endsWith('.html')
    ? 'text/html'
    : path.endsWith('.js')
      ? 'text/javascript'
      : path.endsWith('.ts')
        ? 'text/typescript'
        : 'text/plain';

/** Declares `files`, uploads what is missing and publishes; the publish answer. */
async function deploy(
  account: Account,
  siteId: string,
  files: Files,
  options: { prune?: boolean; message?: string } = {},
) {
  const entries = Object.entries(files).map(([path, value]) => {
    const body = typeof value === 'string' ? value : value.body;
    return {
      path,
      body,
      sha256: sha(body),
      size: Buffer.byteLength(body),
      contentType: typeof value === 'string' ? typeOf(path) : value.type,
    };
  });
  const created = await account.api.post(`v0/sites/${siteId}/deployments`, {
    json: { files: entries.map(({ body: _, ...e }) => e), ...options },
  });
  if (created.statusCode !== 201) throw new Error(`create: ${created.statusCode} ${JSON.stringify(created.body)}`);
  const { deployment } = created.body as unknown as { deployment: Deployment };
  for (const digest of deployment.missing) {
    const entry = entries.find((e) => e.sha256 === digest)!;
    const put = await account.api.put(`v0/sites/${siteId}/deployments/${deployment.id}/files/${digest}`, {
      body: entry.body,
    });
    if (put.statusCode !== 200) throw new Error(`upload: ${put.statusCode} ${JSON.stringify(put.body)}`);
  }
  const published = await account.api.post(`v0/sites/${siteId}/deployments/${deployment.id}/publish`);
  return { created: deployment, published };
}

const body = <T>(res: { body: unknown }) => res.body as unknown as T;

const VERSION_FN = (build: string) => `export default () => new Response('${build}');\n`;

test('a deployment uploads only what the account lacks, then goes live all at once', async (t) => {
  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'web/old.html', 'old page', 'text/html');
  // Bytes of this test alone: the account holds none of them from another test.
  const build = `one ${crypto.randomUUID()}`;
  const first = await deploy(
    t0.owner,
    site.id,
    {
      'web/index.html': `<p>${build}</p>`,
      'web/app.js': `console.log('${build}')`,
      'api/version.ts': VERSION_FN(build),
    },
    { message: 'first' },
  );
  t.is(first.created.status, 'UPLOADING');
  t.is(first.created.missing.length, 3);
  t.regex(
    first.created.previewUrl,
    new RegExp(`^http://${first.created.shortId}--${site.subdomain}\\.localhost:\\d+/$`),
  );
  t.is(first.published.statusCode, 200);
  t.like(body<{ deployment: Deployment }>(first.published).deployment, {
    status: 'PUBLISHED',
    kind: 'DEPLOY',
    current: true,
    files: 3,
    message: 'first',
  });
  t.is((await t0.site(site.subdomain).get('index.html')).body, `<p>${build}</p>`);
  t.is((await t0.site(site.subdomain).get('api/version')).body, build);
  t.is((await t0.site(site.subdomain).get('old.html')).body, 'old page', 'without prune, other files stay');

  // The same bytes again: nothing to upload.
  const again = await deploy(t0.owner, site.id, {
    'web/index.html': `<p>${build}</p>`,
    'web/app.js': `console.log('${build}', 2)`,
    'api/version.ts': VERSION_FN(build),
  });
  t.is(again.created.missing.length, 1, 'only the changed file is asked for');
  const detail = body<{ deployment: Deployment }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${again.created.id}`),
  ).deployment;
  t.deepEqual(detail.diff, {
    packages: NO_PACKAGE_CHANGES,
    added: [],
    changed: ['web/app.js'],
    removed: [],
  });
});

test('one broken function fails the deployment with its place, and the site is unchanged byte for byte', async (t) => {
  const site = await createSite(t0.owner);
  await deploy(t0.owner, site.id, { 'web/index.html': '<p>good</p>', 'api/version.ts': VERSION_FN('good') });
  const broken = await deploy(t0.owner, site.id, {
    'web/index.html': '<p>broken build</p>',
    'api/version.ts': VERSION_FN('broken'),
    'api/bad.ts': 'export default function (\n  oops',
    'cron/tick.ts': 'export const schedule = "not a schedule";\nexport default () => {};\n',
  });
  t.is(broken.published.statusCode, 422);
  const error = body<{ error: { code: string; message: string; details: { errors: Deployment['errors'] } } }>(
    broken.published,
  ).error;
  t.is(error.code, 'deployment_failed');
  const paths = error.details.errors!.map((e) => e.path).sort();
  t.deepEqual(paths, ['api/bad.ts', 'cron/tick.ts']);
  const bad = error.details.errors!.find((e) => e.path === 'api/bad.ts')!;
  t.true(bad.line >= 1 && bad.column >= 1, 'a place in the file');
  t.is((await t0.site(site.subdomain).get('index.html')).body, '<p>good</p>');
  t.is((await t0.site(site.subdomain).get('api/version')).body, 'good');
  const listed = body<{ deployments: Deployment[] }>(await t0.owner.read.get(`v0/sites/${site.id}/deployments`));
  t.is(listed.deployments[0]!.status, 'FAILED');
  t.is(listed.deployments.filter((d) => d.current).length, 1);
  // A failed deployment takes no more uploads or publishes.
  const retry = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${broken.created.id}/publish`);
  t.is(retry.statusCode, 409);
  t.is(body<{ error: { code: string } }>(retry).error.code, 'deployment_not_open');
});

test('uploads are checked against their digest, and a deployment with bytes missing is not published', async (t) => {
  const site = await createSite(t0.owner);
  const text = 'the declared bytes';
  const created = body<{ deployment: Deployment }>(
    await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
      json: {
        files: [{ path: 'web/a.txt', sha256: sha(text), size: Buffer.byteLength(text), contentType: 'text/plain' }],
      },
    }),
  ).deployment;
  const publish = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${created.id}/publish`);
  t.is(publish.statusCode, 409);
  t.is(body<{ error: { code: string; details: { missing: string[] } } }>(publish).error.code, 'deployment_incomplete');
  const wrong = await t0.owner.api.put(`v0/sites/${site.id}/deployments/${created.id}/files/${sha(text)}`, {
    body: 'other bytes, same len',
  });
  t.is(wrong.statusCode, 400);
  t.is(body<{ error: { code: string } }>(wrong).error.code, 'digest_mismatch');
  const undeclared = await t0.owner.api.put(`v0/sites/${site.id}/deployments/${created.id}/files/${sha('x')}`, {
    body: 'x',
  });
  t.is(undeclared.statusCode, 404);
  t.is(
    (await t0.owner.api.put(`v0/sites/${site.id}/deployments/${created.id}/files/${sha(text)}`, { body: text }))
      .statusCode,
    200,
  );
  t.is((await t0.owner.api.post(`v0/sites/${site.id}/deployments/${created.id}/publish`)).statusCode, 200);
  t.is((await t0.site(site.subdomain).get('a.txt')).body, text);

  const invalid = await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
    json: { files: [{ path: 'data/x.json', content: '{}' }] },
  });
  t.is(invalid.statusCode, 400);
  t.is(body<{ error: { code: string } }>(invalid).error.code, 'invalid_path');
  const twice = await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
    json: {
      files: [
        { path: 'web/a', content: '1' },
        { path: 'web/./a', content: '2' },
      ],
    },
  });
  t.is(twice.statusCode, 400);
});

test('prune removes the site’s web, api and cron files the set lacks, and never data/', async (t) => {
  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'web/gone.html', 'gone', 'text/html');
  await putFile(t0.owner, site.bucketId, 'data/kept.json', '{}', 'application/json');
  await deploy(t0.owner, site.id, { 'web/index.html': 'v1', 'api/version.ts': VERSION_FN('v1') });
  const pruned = await deploy(t0.owner, site.id, { 'web/index.html': 'v2' }, { prune: true });
  t.is(pruned.published.statusCode, 200);
  t.is((await t0.site(site.subdomain).get('gone.html')).statusCode, 404);
  t.is((await t0.site(site.subdomain).get('api/version')).statusCode, 404, 'the function went with its source');
  t.is((await t0.owner.api.get(`v0/buckets/${site.bucketId}/objects/data/kept.json`)).statusCode, 200);
  const detail = body<{ deployment: Deployment }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${pruned.created.id}`),
  ).deployment;
  t.deepEqual(detail.diff, {
    packages: NO_PACKAGE_CHANGES,
    added: [],
    changed: ['web/index.html'],
    removed: ['api/version.ts', 'web/gone.html'],
  });
});

test('lib/, deno.json and deno.lock are a deployment’s: prune removes them when the set lacks them, a rollback brings them back', async (t) => {
  const site = await createSite(t0.owner);
  const modules = {
    'lib/greeting.ts': "export const greeting = (name: string) => 'hello, ' + name;\n",
    'lib/words/en.json': '{"hello": "hello"}\n',
    'deno.json': '{"imports": {}}\n',
    'deno.lock': '{"version": "5"}\n',
  };
  const first = await deploy(t0.owner, site.id, { 'web/index.html': 'v1', 'notes.txt': 'a root file', ...modules });
  t.is(first.published.statusCode, 200);
  const files = async () =>
    body<{ files: Array<{ path: string }> }>(
      await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects`, { searchParams: { limit: 100 } }),
    )
      .files.map((f) => f.path)
      .sort();
  t.deepEqual(await files(), [
    'deno.json',
    'deno.lock',
    'lib/greeting.ts',
    'lib/words/en.json',
    'notes.txt',
    'web/index.html',
  ]);

  const pruned = await deploy(t0.owner, site.id, { 'web/index.html': 'v2' }, { prune: true });
  t.is(pruned.published.statusCode, 200);
  // Other root files keep the answer they always had: prune leaves them.
  t.deepEqual(await files(), ['notes.txt', 'web/index.html']);
  const detail = body<{ deployment: Deployment }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${pruned.created.id}`),
  ).deployment;
  t.deepEqual(detail.diff, {
    packages: NO_PACKAGE_CHANGES,
    added: [],
    changed: ['web/index.html'],
    removed: ['deno.json', 'deno.lock', 'lib/greeting.ts', 'lib/words/en.json'],
  });

  const back = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${first.created.id}/promote`);
  t.is(back.statusCode, 200);
  t.deepEqual(await files(), [
    'deno.json',
    'deno.lock',
    'lib/greeting.ts',
    'lib/words/en.json',
    'notes.txt',
    'web/index.html',
  ]);
  for (const [path, text] of Object.entries(modules))
    t.is(
      (await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/${path}`, { responseType: 'text' })).body,
      text,
      path,
    );
});

test('promote puts an earlier deployment back in one step; restore puts the site back to any instant', async (t) => {
  const site = await createSite(t0.owner);
  const one = await deploy(t0.owner, site.id, { 'web/index.html': 'one', 'api/version.ts': VERSION_FN('one') });
  const afterOne = new Date().toISOString();
  await new Promise((resolve) => setTimeout(resolve, 20));
  await deploy(
    t0.owner,
    site.id,
    { 'web/index.html': 'two', 'web/extra.html': 'extra', 'api/version.ts': VERSION_FN('two') },
    { prune: true },
  );
  await putFile(t0.owner, site.bucketId, 'web/index.html', 'two and a half', 'text/html');
  t.is((await t0.site(site.subdomain).get('index.html')).body, 'two and a half');

  const promoted = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${one.created.id}/promote`);
  t.is(promoted.statusCode, 200);
  const back = body<{ deployment: Deployment }>(promoted).deployment;
  t.like(back, { kind: 'PROMOTE', status: 'PUBLISHED', current: true });
  t.is((await t0.site(site.subdomain).get('index.html')).body, 'one');
  t.is((await t0.site(site.subdomain).get('extra.html')).statusCode, 404);
  t.is((await t0.site(site.subdomain).get('api/version')).body, 'one');

  // The instant between the two deployments: what the snapshot lists is what restore makes live.
  const snapshot = body<{ files: Array<{ path: string }>; snapshot: { files: number } }>(
    await t0.owner.read.get(`v0/sites/${site.id}/snapshot`, { searchParams: { at: afterOne } }),
  );
  t.deepEqual(
    snapshot.files.map((f) => f.path),
    ['api/version.ts', 'web/index.html'],
  );
  await deploy(t0.owner, site.id, { 'web/index.html': 'three', 'web/extra.html': 'extra' });
  const restored = await t0.owner.api.post(`v0/sites/${site.id}/restore`, { json: { at: afterOne } });
  t.is(restored.statusCode, 200);
  t.is(body<{ deployment: Deployment }>(restored).deployment.kind, 'RESTORE');
  t.is((await t0.site(site.subdomain).get('index.html')).body, 'one');
  t.is((await t0.site(site.subdomain).get('extra.html')).statusCode, 404);

  const early = await t0.owner.api.post(`v0/sites/${site.id}/restore`, { json: { at: '2001-01-01T00:00:00Z' } });
  t.is(early.statusCode, 422);
  t.is(body<{ error: { code: string } }>(early).error.code, 'before_history');

  // Every change is in the history, newest first: the file API's write as a one-file change.
  const history = body<{ deployments: Deployment[] }>(await t0.owner.read.get(`v0/sites/${site.id}/deployments`));
  t.deepEqual(
    history.deployments.map((d) => d.kind),
    ['RESTORE', 'DEPLOY', 'PROMOTE', 'FILE', 'DEPLOY', 'DEPLOY'],
  );
  t.is(history.deployments[3]!.files, 1);
  t.regex(history.deployments[3]!.author, /.+/);
});

test('readers never get an old file after a new one while deployments are published and rolled back', async (t) => {
  const site = await createSite(t0.owner);
  const build = (n: number) => ({
    'web/index.html': `build ${n}`,
    'web/app.js': `build ${n}`,
    'api/version.ts': VERSION_FN(`build ${n}`),
  });
  const first = await deploy(t0.owner, site.id, build(0));
  let stop = false;
  const seen: number[] = [];
  const odd: string[] = [];
  const reader = (async () => {
    while (!stop) {
      for (const path of ['index.html', 'app.js', 'api/version']) {
        const res = await t0.site(site.subdomain).get(path);
        const build = /^build (\d+)$/.exec(res.body)?.[1];
        if (build === undefined) odd.push(`${path}: ${res.statusCode} ${res.body.slice(0, 200)}`);
        else seen.push(Number(build));
      }
    }
  })();
  for (let n = 1; n <= 5; n++) await deploy(t0.owner, site.id, build(n));
  await until(async () => seen.at(-1) === 5, 'the reader sees the last build');
  stop = true;
  await reader;
  t.deepEqual(odd, [], 'every answer was a build');
  // Builds only ever go forward for a reader.
  const backwards = seen.findIndex((n, i) => i > 0 && n < seen[i - 1]!);
  t.is(backwards, -1, `went back at ${backwards}: ${seen.slice(Math.max(0, backwards - 3), backwards + 3).join(', ')}`);
  t.true(new Set(seen).size >= 2, 'the reader saw the switches happen');
  // A rollback is one step back for every reader too.
  const promoted = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${first.created.id}/promote`);
  t.is(promoted.statusCode, 200);
  for (const path of ['index.html', 'app.js', 'api/version'])
    t.is((await t0.site(site.subdomain).get(path)).body, 'build 0', path);
});

test('create_deployment takes files’ text inline, for front doors that carry JSON only', async (t) => {
  const site = await createSite(t0.owner);
  const created = await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
    json: { files: [{ path: 'web/index.html', content: '<p>inline</p>', contentType: 'text/html' }] },
  });
  t.is(created.statusCode, 201);
  const { deployment } = body<{ deployment: Deployment }>(created);
  t.deepEqual(deployment.missing, []);
  t.is((await t0.owner.api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`)).statusCode, 200);
  t.is((await t0.site(site.subdomain).get('')).body, '<p>inline</p>');
});

test('a deployment’s migrations are applied before its switch; a failing one fails it with the database unchanged', async (t) => {
  const site = await createSite(t0.owner);
  const database = body<{ database: { id: string } }>(
    await t0.owner.api.post(`v0/sites/${site.id}/databases`),
  ).database;
  const query = async (sql: string) =>
    body<{ result: Array<{ results: Array<Record<string, unknown>> }> }>(
      await t0.owner.api.post(`v0/sites/${site.id}/databases/${database.id}/query`, { json: { sql } }),
    ).result[0]!.results;
  const tables = async () =>
    (
      await query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%' ORDER BY name",
      )
    ).map((r) => r.name);
  const init = { name: '0001_init.sql', sql: 'CREATE TABLE notes (body TEXT);' };
  const declare = (files: Array<Record<string, string>>, migrations: Array<{ name: string; sql: string }>) =>
    t0.owner.api.post(`v0/sites/${site.id}/deployments`, { json: { files, migrations } });

  const first = body<{ deployment: Deployment }>(
    await declare([{ path: 'web/index.html', content: 'with notes', contentType: 'text/html' }], [init]),
  ).deployment;
  t.is((await t0.owner.api.post(`v0/sites/${site.id}/deployments/${first.id}/publish`)).statusCode, 200);
  t.deepEqual(await tables(), ['notes']);
  const published = body<{ deployment: { appliedMigrations: string[] | null } }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${first.id}`),
  ).deployment;
  t.deepEqual(published.appliedMigrations, ['0001_init.sql'], 'its record names the migrations it applied');

  const second = body<{ deployment: Deployment }>(
    await declare(
      [{ path: 'web/index.html', content: 'with more', contentType: 'text/html' }],
      [
        init,
        { name: '0002_more.sql', sql: 'CREATE TABLE tags (name TEXT);' },
        { name: '0003_bad.sql', sql: 'CREATE TABLEX oops;' },
      ],
    ),
  ).deployment;
  const failed = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${second.id}/publish`);
  t.is(failed.statusCode, 422);
  const error = body<{ error: { code: string; details: { errors: Array<{ path: string; message: string }> } } }>(
    failed,
  ).error;
  t.is(error.code, 'deployment_failed');
  t.is(error.details.errors[0]!.path, 'migrations/');
  t.regex(
    error.details.errors[0]!.message,
    /one of 0002_more\.sql, 0003_bad\.sql failed and everything was rolled back/,
  );
  t.deepEqual(await tables(), ['notes'], 'neither pending migration was applied');
  t.is((await t0.site(site.subdomain).get('')).body, 'with notes', 'the files did not change either');
});

test('a deployment cancelled while its migrations run says the schema changed, and its record names them', async (t) => {
  const site = await createSite(t0.owner);
  const database = body<{ database: { id: string } }>(
    await t0.owner.api.post(`v0/sites/${site.id}/databases`),
  ).database;
  // A migration that takes a while: long enough for a cancel to come in while it runs.
  const slow = {
    name: '0001_numbers.sql',
    sql: 'CREATE TABLE numbers AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1500000) SELECT x FROM c;',
  };
  const { deployment } = body<{ deployment: Deployment }>(
    await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
      json: { files: [{ path: 'web/index.html', content: 'numbers', contentType: 'text/html' }], migrations: [slow] },
    }),
  );
  const publishing = t0.owner.api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`);
  await until(
    async () => Boolean(await t0.berth.deps.db('migration_leases').where({ database_id: database.id }).first()),
    'the migration under way',
  );
  t.is((await t0.owner.api.delete(`v0/sites/${site.id}/deployments/${deployment.id}`)).statusCode, 200);

  const failed = await publishing;
  t.is(failed.statusCode, 422);
  const error = body<{ error: { code: string; details: { appliedMigrations: string[] } } }>(failed).error;
  t.is(error.code, 'deployment_failed_after_migrations');
  t.deepEqual(error.details.appliedMigrations, ['0001_numbers.sql']);
  const record = body<{ deployment: Deployment & { appliedMigrations: string[] | null } }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments/${deployment.id}`),
  ).deployment;
  t.is(record.status, 'FAILED', 'cancelled');
  t.deepEqual(record.appliedMigrations, ['0001_numbers.sql']);
  t.not((await t0.site(site.subdomain).get('')).body, 'numbers', 'the files did not change');
});

test('pruning a file’s versions keeps those of the site’s kept deployments; older ones go', async (t) => {
  const site = await createSite(t0.owner);
  // A second instance keeps one deployment only, to see both sides of the setting.
  const kept = await startTestBerth({ deploymentsKept: 1 });
  t.teardown(() => kept.dispose());
  const own = await createSite(kept.owner);
  for (const [berth, target] of [
    [t0, site],
    [kept, own],
  ] as const) {
    await deploy(berth.owner, target.id, { 'web/index.html': 'first' });
    await deploy(berth.owner, target.id, { 'web/index.html': 'second' });
  }
  const versionsOf = async (berth: TestBerth, bucketId: string) => {
    const file = body<{ files: Array<{ id: string }> }>(
      await berth.owner.read.get(`v0/buckets/${bucketId}/objects`, { searchParams: { path: 'web/index.html' } }),
    ).files[0]!;
    const versions = body<{ versions: Array<{ id: string }> }>(
      await berth.owner.read.get(`v0/files/${file.id}/versions`),
    ).versions;
    return { fileId: file.id, oldest: versions.at(-1)!.id };
  };
  // With 20 kept (the default), the first deployment's version is pinned: a prune leaves it (deleting
  // that one version on purpose purges it: site-past.test.ts).
  const pinned = await versionsOf(t0, site.bucketId);
  t.is(
    body<{ deletedVersions: number }>(await t0.owner.api.delete(`v0/files/${pinned.fileId}/versions`)).deletedVersions,
    0,
  );
  // With one kept, it is not.
  const free = await versionsOf(kept, own.bucketId);
  t.is(
    body<{ deletedVersions: number }>(await kept.owner.api.delete(`v0/files/${free.fileId}/versions`)).deletedVersions,
    1,
  );
});

test('a deployment still uploading can be cancelled; the history can be read by kind, in its order', async (t) => {
  const site = await createSite(t0.owner);
  await deploy(t0.owner, site.id, { 'web/index.html': 'kept' });
  await putFile(t0.owner, site.bucketId, 'web/other.html', 'a write', 'text/html');
  const open = body<{ deployment: Deployment }>(
    await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
      json: { files: [{ path: 'web/index.html', content: 'never published', contentType: 'text/html' }] },
    }),
  ).deployment;
  const cancelled = await t0.owner.api.delete(`v0/sites/${site.id}/deployments/${open.id}`);
  t.is(cancelled.statusCode, 200);
  t.like(body<{ deployment: Deployment }>(cancelled).deployment, { status: 'FAILED' });
  const again = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${open.id}/publish`);
  t.is(again.statusCode, 409);
  t.is(body<{ error: { code: string } }>(again).error.code, 'deployment_not_open');
  t.is((await t0.site(site.subdomain).get('')).body, 'kept');

  const only = body<{ deployments: Array<Deployment & { seq: number | null }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments`, { searchParams: { kind: 'DEPLOY' } }),
  ).deployments;
  t.deepEqual(
    only.map((d) => [d.kind, d.status]),
    [
      ['DEPLOY', 'FAILED'],
      ['DEPLOY', 'PUBLISHED'],
    ],
  );
  const all = body<{ deployments: Array<Deployment & { seq: number | null }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/deployments`),
  ).deployments;
  t.deepEqual(
    all.map((d) => d.seq),
    [null, 2, 1],
  );
  const wrong = await t0.owner.read.get(`v0/sites/${site.id}/deployments`, { searchParams: { kind: 'NOPE' } });
  t.is(wrong.statusCode, 400);
});

test('a deployment published twice at once is published once', async (t) => {
  const site = await createSite(t0.owner);
  const { deployment } = body<{ deployment: Deployment }>(
    await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
      // Enough files that every publish has read the deployment as open before the first commits.
      json: {
        files: Array.from({ length: 500 }, (_, i) => ({
          path: `web/p${i}.html`,
          content: `once ${i}`,
          contentType: 'text/html',
        })),
      },
    }),
  );
  const answers = await Promise.all(
    [1, 2, 3].map(() => t0.owner.api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`)),
  );
  t.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 409, 409]);
  for (const refused of answers.filter((a) => a.statusCode === 409))
    t.is(body<{ error: { code: string } }>(refused).error.code, 'deployment_not_open');
  const history = body<{ deployments: Deployment[] }>(await t0.owner.read.get(`v0/sites/${site.id}/deployments`));
  t.is(history.deployments.filter((d) => d.status === 'PUBLISHED').length, 1);
});
