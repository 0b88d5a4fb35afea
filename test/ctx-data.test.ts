// ctx.data from real functions: reads and writes under data/, visible as file versions, with clear
// errors for bad calls, and never another site's data.
import test from 'ava';
import { type TestBerth, createSite, deployFixture, json, putFile, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

const call = async (subdomain: string, op: string) => {
  const res = await t0.site(subdomain).get('api/data', { searchParams: { op } });
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, any> };
};

test('writes are new file versions under data/, and reads see them', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'data');
  const wrote = await call(site.subdomain, 'write');
  t.is(wrote.status, 200);
  t.is(wrote.body.json.path, 'data/notes/a.json');
  t.is(wrote.body.text.path, 'data/notes/b.txt');

  const read = await call(site.subdomain, 'read');
  t.is(read.status, 200);
  t.deepEqual(read.body.json, { hello: 'world' });
  t.is(read.body.text, 'plain text');
  t.deepEqual(read.body.lines, [{ n: 1 }, { n: 2 }]);
  t.is(read.body.missing, null);
  t.is(read.body.siteId, site.id);
  t.deepEqual(
    read.body.list.map((f: { path: string; bytes: number }) => [f.path, f.bytes]),
    [
      ['data/notes/a.json', 17],
      ['data/notes/b.txt', 10],
    ],
  );

  // The file API sees the same files, each write a version.
  const file = await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/data/notes/a.json`, {
    responseType: 'text',
  });
  t.is(file.headers['content-type'], 'application/json');
  t.is(file.body, '{"hello":"world"}');
  const events = json<{ files: Array<{ id: string }> }>(
    await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects`, { searchParams: { path: 'data/events.jsonl' } }),
  ).files[0]!;
  const versions = json<{ versions: unknown[] }>(await t0.owner.read.get(`v0/files/${events.id}/versions`));
  t.is(versions.versions.length, 2);
});

test('bad calls answer the function with clear, stable codes', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'data');
  await putFile(t0.owner, site.bucketId, 'data/notes/b.txt', 'not json');
  const cases: Array<[string, string]> = [
    ['traversal', 'DATA_INVALID_PATH'],
    ['badArgs', 'CTX_INVALID_ARGUMENT'],
    ['unknown', 'CTX_UNKNOWN_METHOD'],
    ['notJson', 'DATA_INVALID_JSON'],
  ];
  for (const [op, code] of cases) {
    const res = await call(site.subdomain, op);
    t.is(res.status, 418, op);
    t.is(res.body.error.code, code, op);
    t.is(res.body.error.name, 'BerthContextError');
    t.truthy(res.body.error.message);
  }
});

test('a function only ever reaches its own site’s data', async (t) => {
  const a = await createSite(t0.owner);
  const b = await createSite(t0.owner);
  await deployFixture(t0.owner, a.bucketId, 'data');
  await deployFixture(t0.owner, b.bucketId, 'data');
  t.is((await call(a.subdomain, 'write')).status, 200);
  const fromB = await call(b.subdomain, 'read');
  t.is(fromB.body.json, null);
  t.deepEqual(fromB.body.list, []);
  t.is(fromB.body.siteId, b.id);
});
