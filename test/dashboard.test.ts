// The dashboard as served: the page to browsers, the JSON description to API clients at the same /,
// the bundle built at start, and the headers that keep everything on this instance.
import test from 'ava';
import got from 'got';
import { type TestBerth, startTestBerth } from './helpers/berth.ts';
import { DASHBOARD_CSP } from '../control-plane/http/dashboard.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

const control = () =>
  got.extend({ prefixUrl: t0.url, throwHttpErrors: false, retry: { limit: 0 }, followRedirect: false });
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

test('a browser gets the dashboard page at /, under a strict CSP', async (t) => {
  const res = await control().get('', { headers: { accept: BROWSER_ACCEPT } });
  t.is(res.statusCode, 200);
  t.regex(res.headers['content-type']!, /^text\/html/);
  t.is(res.headers['content-security-policy'], DASHBOARD_CSP);
  t.is(res.headers['x-content-type-options'], 'nosniff');
  t.is(res.headers['referrer-policy'], 'no-referrer');
  t.regex(res.body, /<script defer src="\/dashboard\/app.js"><\/script>/);
  t.notRegex(res.body, /https?:\/\//, 'nothing is loaded from elsewhere');
  for (const directive of [
    "default-src 'none'",
    "script-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "connect-src 'self'",
  ]) {
    t.true(DASHBOARD_CSP.includes(directive), directive);
  }
});

test('the script takes its types from the server’s schemas without bundling zod', async (t) => {
  // control-plane/dashboard/types.ts infers its types from control-plane/schemas.ts with `import type`; a
  // value import there would put zod (some 470 kB) in the script.
  const js = await control().get('dashboard/app.js');
  t.is(js.statusCode, 200);
  t.false(js.body.includes('ZodError'), 'no zod error class');
  t.false(js.body.includes('_zod'), 'no zod schema internals');
});

test('API clients keep getting the service description at /', async (t) => {
  for (const accept of [undefined, '*/*', 'application/json']) {
    const res = await control().get('', { headers: accept ? { accept } : {}, responseType: 'json' });
    t.is(res.statusCode, 200, String(accept));
    t.like(res.body as object, { service: 'berth', api: '/v0' });
  }
});

test('the script is bundled on first use and served with the stylesheet, revalidated by ETag', async (t) => {
  const js = await control().get('dashboard/app.js');
  t.is(js.statusCode, 200);
  t.regex(js.headers['content-type']!, /^text\/javascript/);
  t.is(js.headers['content-security-policy'], DASHBOARD_CSP);
  t.true(js.body.length > 1000);
  t.notRegex(js.body, /\bimport\s*[{*]|\brequire\(/, 'one self-contained script');
  t.notRegex(js.body, /innerHTML|insertAdjacentHTML|outerHTML|document\.write/, 'never parses HTML from data');
  const again = await control().get('dashboard/app.js', { headers: { 'if-none-match': js.headers.etag! } });
  t.is(again.statusCode, 304);

  const css = await control().get('dashboard/app.css');
  t.is(css.statusCode, 200);
  t.regex(css.headers['content-type']!, /^text\/css/);
  t.notRegex(css.body, /url\(\s*['"]?https?:|@import/, 'no outside fonts or images');
});
