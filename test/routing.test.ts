// A site's routing rules served: web/_redirects (redirects, rewrites with the single-page-app fallback,
// splats, placeholders, forced rules, a custom 404, rewrites to functions for any method) and
// web/_headers (Cache-Control, CSP and the like, merged), clean URLs with one canonical form each, a
// preview's own rules, and broken rules refused at deploy and at a file write with nothing changed.
import test from 'ava';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { createDeployment, deployFiles } from './helpers/deployments.ts';
import { memberOf } from './helpers/site-member.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

const FN = (text: string) =>
  `export default async (req: Request) => new Response(${JSON.stringify(text)} + " " + req.method + " " + new URL(req.url).pathname + " " + (req.method === "POST" ? await req.text() : ""));\n`;

async function siteWith(files: Record<string, string>) {
  const site = await createSite(t0.owner);
  await deployFiles(t0.owner, site.id, files);
  return { ...site, get: t0.site(site.subdomain) };
}

test('a single-page app answers its deep links with its index.html, and its files as they are', async (t) => {
  const site = await siteWith({
    'web/index.html': '<div id="app"></div>',
    'web/app.js': 'console.log("app")',
    'web/_redirects': '# the app routes on the client\n/*  /index.html  200\n',
  });
  const deep = await site.get.get('dashboard/settings?tab=2');
  t.is(deep.statusCode, 200);
  t.is(deep.body, '<div id="app"></div>');
  t.is(deep.headers['content-type'], 'text/html');
  t.is((await site.get.get('app.js')).body, 'console.log("app")');
  t.is((await site.get.get('')).body, '<div id="app"></div>');
});

test('redirects with their statuses, splats and placeholders, the query string kept; a forced rule over a file', async (t) => {
  const site = await siteWith({
    'web/index.html': 'home',
    'web/old.html': 'the old page, shadowed only by a forced rule',
    'web/kept.html': 'a file answers before a rule that is not forced',
    'web/_redirects': [
      '/home          /',
      '/found         /elsewhere     302',
      '/see           /other         303',
      '/temporary     /t             307',
      '/permanent     /p             308',
      '/news/*        /blog/:splat',
      '/posts/:year/:slug  /blog/:year/:slug  301',
      '/old.html      /new           301!',
      '/kept.html     /never',
      '/away          https://example.com/landing?from=berth  302',
    ].join('\n'),
  });
  const expect = async (path: string, status: number, location: string) => {
    const res = await site.get.get(path);
    t.is(res.statusCode, status, path);
    t.is(res.headers.location, location, path);
  };
  await expect('home', 301, '/');
  await expect('home/', 301, '/');
  await expect('found', 302, '/elsewhere');
  await expect('see', 303, '/other');
  await expect('temporary', 307, '/t');
  await expect('permanent?a=1', 308, '/p?a=1');
  await expect('news/2024/launch?ref=mail', 301, '/blog/2024/launch?ref=mail');
  await expect('posts/2023/hello', 301, '/blog/2023/hello');
  await expect('old.html', 301, '/new');
  await expect('away?x=1', 302, 'https://example.com/landing?from=berth&x=1');
  t.is((await site.get.get('kept.html')).body, 'a file answers before a rule that is not forced');
  t.is((await site.get.get('_redirects')).statusCode, 404, 'the rules are not served');
});

test('rewrites to a function answer every method; a rule’s 404 page; files answer GET and HEAD only', async (t) => {
  const site = await siteWith({
    'web/index.html': 'home',
    'web/en/404.html': 'not here, in English',
    'api/contact.ts': FN('contact'),
    'web/_redirects': '/contact  /api/contact  200\n/en/*  /en/404.html  404\n',
  });
  t.is((await site.get.get('contact')).body, 'contact GET /contact ');
  const posted = await site.get.post('contact', { body: 'hi' });
  t.is(posted.statusCode, 200);
  t.is(posted.body, 'contact POST /contact hi');
  const missing = await site.get.get('en/nothing');
  t.is(missing.statusCode, 404);
  t.is(missing.body, 'not here, in English');
  const refused = await site.get.post('', { body: 'x' });
  t.is(refused.statusCode, 405);
  t.is(refused.headers.allow, 'GET, HEAD');
  t.is(JSON.parse(refused.body).error.code, 'method_not_allowed');
});

test('headers by path: several rules merged, Berth’s own defaults replaced, on 200 and 304 alike', async (t) => {
  const site = await siteWith({
    'web/index.html': 'home',
    'web/assets/app.js': 'js',
    'web/_headers': [
      '/*',
      "  Content-Security-Policy: default-src 'self'",
      '  X-Frame-Options: DENY',
      '/assets/*',
      '  Cache-Control: public, max-age=31536000, immutable',
      '  X-Frame-Options: SAMEORIGIN',
    ].join('\n'),
  });
  const page = await site.get.get('');
  t.is(page.headers['content-security-policy'], "default-src 'self'");
  t.is(page.headers['x-frame-options'], 'DENY');
  t.is(page.headers['cache-control'], 'public, no-cache');
  const asset = await site.get.get('assets/app.js');
  t.is(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
  t.is(asset.headers['x-frame-options'], 'DENY, SAMEORIGIN');
  const again = await site.get.get('assets/app.js', { headers: { 'if-none-match': asset.headers.etag } });
  t.is(again.statusCode, 304);
  t.is(again.headers['cache-control'], 'public, max-age=31536000, immutable');
  t.is((await site.get.get('_headers')).statusCode, 404, 'the rules are not served');
});

test('clean URLs: /about serves about.html, and each page has one URL the other form is sent to', async (t) => {
  const site = await siteWith({
    'web/about.html': 'about',
    'web/docs/index.html': 'docs',
  });
  t.is((await site.get.get('about')).body, 'about');
  const slash = await site.get.get('about/?x=1');
  t.is(slash.statusCode, 308);
  t.is(slash.headers.location, '/about?x=1');
  const docs = await site.get.get('docs');
  t.is(docs.statusCode, 308);
  t.is(docs.headers.location, '/docs/');
  t.is((await site.get.get('docs/')).body, 'docs');
});

test('broken rules fail the deployment at their line and column and change nothing; a file write is refused the same way', async (t) => {
  const site = await siteWith({ 'web/index.html': 'home', 'web/_redirects': '/a  /b  302\n' });
  const created = await createDeployment(t0.owner, site.id, {
    'web/index.html': 'changed',
    'web/_redirects': '/a  /b  302\n/c  https://example.com/  200\n',
    'web/_headers': '/*\n  Set-Cookie: a=b\n',
  });
  const failed = await t0.owner.api.post(`v0/sites/${site.id}/deployments/${created.id}/publish`);
  t.is(failed.statusCode, 422);
  const body = json<{
    error: { code: string; details: { errors: Array<{ path: string; line: number; column: number }> } };
  }>(failed);
  t.is(body.error.code, 'deployment_failed');
  t.deepEqual(
    body.error.details.errors.map((e) => `${e.path}:${e.line}:${e.column}`),
    ['web/_headers:2:3', 'web/_redirects:2:5'],
  );
  t.is((await site.get.get('')).body, 'home');
  t.is((await site.get.get('a')).statusCode, 302);

  const write = await t0.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/_redirects`, {
    body: '/a  /b  302\n/x\n',
    headers: { 'content-type': 'text/plain' },
  });
  t.is(write.statusCode, 422);
  const refused = json<{ error: { code: string; message: string } }>(write);
  t.is(refused.error.code, 'invalid_routing_rules');
  t.is(refused.error.message, 'web/_redirects:2:3: a rule names a destination after its path');
  t.is((await site.get.get('a')).headers.location, '/b', 'the rules in force are still the old ones');
  await putFile(t0.owner, site.bucketId, 'web/_redirects', '/a  /c  307\n', 'text/plain');
  const moved = await site.get.get('a');
  t.is(moved.statusCode, 307);
  t.is(moved.headers.location, '/c', 'a good file written through the API applies at once');
});

test('a preview answers with its own deployment’s rules', async (t) => {
  const site = await siteWith({ 'web/index.html': 'live', 'web/_redirects': '/go  /live-target  302\n' });
  const next = await createDeployment(t0.owner, site.id, {
    'web/_redirects': '/go  /preview-target  302\n',
    'web/_headers': '/*\n  X-Robots-Tag: all\n  X-Preview: yes\n',
  });
  const preview = await memberOf(t0, t0.owner.id, site.id, `${next.shortId}--${site.subdomain}`);
  t.is((await preview.get('go')).headers.location, '/preview-target');
  t.is((await site.get.get('go')).headers.location, '/live-target');
  const page = await preview.get('');
  t.is(page.headers['x-preview'], 'yes');
  t.is(page.headers['x-robots-tag'], 'noindex', 'a rule does not make a preview indexable');
});
