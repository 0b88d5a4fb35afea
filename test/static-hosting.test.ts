// Hosted web files at <subdomain>.<site host>: index files, conditional and range requests, custom
// 404 pages, immediate changes, archived and private sites, and what is never served.
import test from 'ava';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

async function siteWith(files: Record<string, [string, string?]>, body: Record<string, unknown> = {}) {
  const site = await createSite(t0.owner, body);
  for (const [p, [content, type]] of Object.entries(files)) await putFile(t0.owner, site.bucketId, p, content, type);
  return { ...site, get: t0.site(site.subdomain) };
}

test('/ serves web/index.html, /a/ web/a/index.html, other paths web/<path>', async (t) => {
  const site = await siteWith({
    'web/index.html': ['<h1>home</h1>', 'text/html; charset=utf-8'],
    'web/docs/index.html': ['docs home', 'text/html'],
    'web/pricing.html': ['pricing', 'text/html'],
    'web/a b.txt': ['spaced', 'text/plain'],
    'web/style.css': ['body{}', 'text/css'],
  });
  const home = await site.get.get('');
  t.is(home.statusCode, 200);
  t.is(home.body, '<h1>home</h1>');
  t.is(home.headers['content-type'], 'text/html; charset=utf-8');
  t.is(home.headers['x-content-type-options'], 'nosniff');
  t.is((await site.get.get('docs/')).body, 'docs home');
  t.is((await site.get.get('pricing.html')).body, 'pricing');
  t.is((await site.get.get('a%20b.txt')).body, 'spaced');
  t.is((await site.get.get('style.css')).headers['content-type'], 'text/css');

  const redirect = await site.get.get('docs?x=1');
  t.is(redirect.statusCode, 308);
  t.is(redirect.headers.location, '/docs/?x=1');
});

test('ETag revalidation, HEAD and byte ranges', async (t) => {
  const site = await siteWith({ 'web/data.txt': ['0123456789', 'text/plain'] });
  const first = await site.get.get('data.txt');
  const etag = first.headers.etag!;
  t.regex(etag, /^"[0-9a-f]{64}"$/);
  t.is(first.headers['accept-ranges'], 'bytes');
  t.is(first.headers['cache-control'], 'public, no-cache');
  t.truthy(first.headers['last-modified']);

  const cached = await site.get.get('data.txt', { headers: { 'if-none-match': etag } });
  t.is(cached.statusCode, 304);
  t.is(cached.body, '');

  const head = await site.get.head('data.txt');
  t.is(head.statusCode, 200);
  t.is(head.headers['content-length'], '10');
  t.is(head.body, '');

  const part = await site.get.get('data.txt', { headers: { range: 'bytes=2-5' } });
  t.is(part.statusCode, 206);
  t.is(part.body, '2345');
  t.is(part.headers['content-range'], 'bytes 2-5/10');
  const suffix = await site.get.get('data.txt', { headers: { range: 'bytes=-3' } });
  t.is(suffix.body, '789');
  const outside = await site.get.get('data.txt', { headers: { range: 'bytes=50-' } });
  t.is(outside.statusCode, 416);
  t.is(outside.headers['content-range'], 'bytes */10');
  const staleRange = await site.get.get('data.txt', { headers: { range: 'bytes=0-1', 'if-range': '"other"' } });
  t.is(staleRange.statusCode, 200);
  t.is(staleRange.body, '0123456789');
});

test('large files stream from disk, whole or in ranges', async (t) => {
  const big = Buffer.alloc(1024 * 1024, 'abcdefghij');
  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'web/big.bin', big, 'application/octet-stream');
  const whole = await t0.site(site.subdomain).get('big.bin', { responseType: 'buffer' });
  t.is(whole.statusCode, 200);
  t.true(whole.body.equals(big));
  const tail = await t0
    .site(site.subdomain)
    .get('big.bin', { responseType: 'buffer', headers: { range: 'bytes=1048570-' } });
  t.is(tail.statusCode, 206);
  t.true(tail.body.equals(big.subarray(1048570)));
});

test('short ranges of a large file, within a block, across blocks and to its end, are its bytes, and a new version’s ranges are its own', async (t) => {
  const first = Buffer.from(Array.from({ length: 700 * 1024 }, (_, i) => (i * 7) % 251));
  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'web/movie.bin', first, 'application/octet-stream');
  const get = (range: string) =>
    t0.site(site.subdomain).get('movie.bin', { responseType: 'buffer', headers: { range: `bytes=${range}` } });
  const expect = async (data: Buffer, start: number, end: number) => {
    for (let read = 0; read < 2; read++) {
      const part = await get(`${start}-${end}`);
      t.is(part.statusCode, 206);
      t.is(part.headers['content-range'], `bytes ${start}-${end}/${data.length}`);
      t.true(part.body.equals(data.subarray(start, end + 1)), `${start}-${end}, read ${read + 1}`);
    }
  };
  for (const [start, end] of [
    [65536, 131071],
    [65000, 66000],
    [0, 99],
    [first.length - 1000, first.length - 1],
  ] as const)
    await expect(first, start, end);

  const second = Buffer.from(first.map((byte) => byte ^ 0xff));
  await putFile(t0.owner, site.bucketId, 'web/movie.bin', second, 'application/octet-stream');
  await expect(second, 65536, 131071);
  await expect(second, 65000, 66000);
});

test('changes are visible on the very next request', async (t) => {
  const site = await siteWith({ 'web/index.html': ['v1', 'text/html'] });
  t.is((await site.get.get('')).body, 'v1');
  const v2 = await putFile(t0.owner, site.bucketId, 'web/index.html', 'v2', 'text/html');
  t.is((await site.get.get('')).body, 'v2');
  await t0.owner.api.delete(`v0/buckets/${site.bucketId}/objects/web/index.html`);
  t.is((await site.get.get('')).statusCode, 404);
  const versions = json<{ versions: Array<{ id: string }> }>(await t0.owner.read.get(`v0/files/${v2.fileId}/versions`));
  await t0.owner.api.post(`v0/files/${v2.fileId}/restore`, {
    json: { versionId: versions.versions.at(-1)!.id, currentVersionId: null },
  });
  t.is((await site.get.get('')).body, 'v1');
});

test('missing pages answer 404, with web/404.html when the site has one', async (t) => {
  const plain = await siteWith({ 'web/index.html': ['home', 'text/html'] });
  const missing = await plain.get.get('nope.html');
  t.is(missing.statusCode, 404);
  t.regex(missing.body, /Page not found/);
  const custom = await siteWith({ 'web/404.html': ['<p>custom lost</p>', 'text/html'] });
  const res = await custom.get.get('nope/deeper.html');
  t.is(res.statusCode, 404);
  t.is(res.body, '<p>custom lost</p>');
  t.is(res.headers['content-type'], 'text/html');
});

test('unknown subdomains and archived sites answer 404; private sites show the sign-in gate', async (t) => {
  const unknown = await t0.site('no-such-site').get('');
  t.is(unknown.statusCode, 404);
  t.regex(unknown.body, /Site not found/);
  t.is((await t0.site('a.b').get('')).statusCode, 404);

  const site = await siteWith({ 'web/index.html': ['open', 'text/html'] });
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  t.is((await site.get.get('')).statusCode, 404);
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ACTIVE', access: 'PRIVATE' } });
  const gate = await site.get.get('');
  t.is(gate.statusCode, 401);
  t.regex(gate.headers['content-type']!, /text\/html/);
  t.regex(gate.body, /private/i);
  t.false(gate.body.includes('open'));
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { access: 'PUBLIC' } });
  t.is((await site.get.get('')).body, 'open');
});

test('nothing outside web/ is ever served, however the path is spelled', async (t) => {
  const site = await siteWith({
    'web/index.html': ['home', 'text/html'],
    'data/secret.json': ['{"secret":true}', 'application/json'],
    'api/hello.ts': ['export default () => new Response("fn")', 'text/typescript'],
    'private/notes.txt': ['private notes', 'text/plain'],
  });
  for (const p of [
    'data/secret.json',
    'api/hello.ts',
    'private/notes.txt',
    '%2e%2e/data/secret.json',
    '..%2Fdata%2Fsecret.json',
    'web/index.html',
    '_berth/x',
  ]) {
    const res = await site.get.get(p);
    t.true(res.statusCode >= 400 && res.statusCode < 500, `${p} answered ${res.statusCode}`);
    t.false(res.body.includes('secret'), p);
    t.false(res.body.includes('private notes'), p);
    t.false(res.body.includes('new Response'), p);
  }
});

test('web files answer GET and HEAD only', async (t) => {
  const site = await siteWith({ 'web/index.html': ['home', 'text/html'] });
  const res = await site.get.post('', { body: 'x' });
  t.is(res.statusCode, 405);
  t.is(res.headers.allow, 'GET, HEAD');
  t.is(JSON.parse(res.body).error.code, 'method_not_allowed');
});

test('the control-plane host is not a site', async (t) => {
  const res = await t0.anonymous.get('', { headers: { host: `localhost:${t0.berth.port}` } });
  t.is(res.statusCode, 200);
  t.is(json<{ service: string }>(res).service, 'berth');
});

test('every answer carries its own request id, and a cached file answers with the same head as the first', async (t) => {
  const site = await siteWith({
    'web/index.html': ['home', 'text/html'],
    'web/docs/index.html': ['docs', 'text/html'],
    'web/404.html': ['lost', 'text/html'],
  });
  const first = await site.get.get('index.html');
  const again = await site.get.get('index.html');
  const withoutId = (headers: Record<string, unknown>) => {
    const { date: _date, 'berth-request-id': _id, ...rest } = headers;
    return rest;
  };
  t.deepEqual(withoutId(again.headers), withoutId(first.headers));
  const etag = first.headers.etag!;
  const answers = [
    first,
    again,
    await site.get.get('index.html', { headers: { 'if-none-match': etag } }),
    await site.get.head('index.html'),
    await site.get.get('index.html', { headers: { range: 'bytes=0-1' } }),
    await site.get.get('index.html', { headers: { range: 'bytes=50-' } }),
    await site.get.get('docs'),
    await site.get.get('nope'),
    await site.get.post('', { body: 'x' }),
    await t0.site('no-such-site').get(''),
  ];
  t.deepEqual(
    answers.map((res) => res.statusCode),
    [200, 200, 304, 200, 206, 416, 308, 404, 405, 404],
  );
  const ids = answers.map((res) => String(res.headers['berth-request-id']));
  for (const id of ids) t.regex(id, /^[0-9a-f-]{36}$/);
  t.is(new Set(ids).size, ids.length);
});
