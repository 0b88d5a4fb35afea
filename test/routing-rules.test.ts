// web/_redirects and web/_headers as Netlify's documentation writes them: each case of it parsed and
// answered, the cases Berth does not support refused at their line and column, and the limits.
import test from 'ava';
import { RouteTable } from '../control-plane/routing/route-table.ts';
import { parseHeaders, parseRedirects } from '../control-plane/routing/rules-files.ts';

/** The table of `redirects` and `headers`, which must parse without a problem. */
function table(redirects: string, headers = ''): RouteTable {
  const r = parseRedirects(redirects);
  const h = parseHeaders(headers);
  if (r.problems.length || h.problems.length) throw new Error(JSON.stringify([...r.problems, ...h.problems]));
  return new RouteTable(r.rules, h.rules);
}

const segments = (path: string) => path.slice(1).split('/');

/** What the table answers for `url` where `files` answer, as "status to", or null. */
function route(routes: RouteTable, url: string, files: string[] = []): string | null {
  const [path, query = ''] = url.split('?');
  const seg = segments(path!);
  for (const rule of routes.redirectsFor(seg)) {
    if (!routes.forced(rule) && files.includes(path!)) continue;
    const answer = routes.answer(rule, seg, query ? `?${query}` : '');
    return `${answer.status} ${answer.to}`;
  }
  return null;
}

test('redirects, splats, placeholders and query strings as Netlify documents them', (t) => {
  const routes = table(`
# Redirects from what the browser requests to what we serve
/home              /
/blog/my-post.php  /blog/my-post
/news              /blog
/cuties            https://www.petsofnetlify.com
/old               /new                302
/moved             /elsewhere          307
/news/*            /blog/:splat
/articles/:month/:date/:year/:slug  /blog/:year/:month/:date/:slug  308
/go/:name          https://example.com/users/:name?from=berth  303
`);
  t.is(route(routes, '/home'), '301 /');
  t.is(route(routes, '/home/'), '301 /', 'a trailing slash is the same path');
  t.is(route(routes, '/blog/my-post.php'), '301 /blog/my-post');
  t.is(route(routes, '/news'), '301 /blog');
  t.is(route(routes, '/cuties'), '301 https://www.petsofnetlify.com');
  t.is(route(routes, '/old?page=2'), '302 /new?page=2', 'the query string is kept');
  t.is(route(routes, '/moved'), '307 /elsewhere');
  t.is(route(routes, '/news/2024/berth'), '301 /blog/2024/berth');
  t.is(route(routes, '/articles/02/10/2024/hello'), '308 /blog/2024/02/10/hello');
  t.is(route(routes, '/articles/02/10/2024'), null, 'a placeholder matches one segment, all of them');
  t.is(route(routes, '/go/ana%20b?x=1'.replace('%20', ' ')), '303 https://example.com/users/ana%20b?from=berth&x=1');
  t.is(route(routes, '/nothing'), null);
});

test('rewrites: the single-page app fallback, shadowing by files, forced rules and custom 404 pages', (t) => {
  const routes = table(`
/app/   /app/index.html   200!
/en/*   /en/404.html      404
/api-old/:fn  /api/:fn    200
/*      /index.html       200
`);
  const files = ['/index.html', '/app/index.html', '/styles.css', '/app'];
  t.is(route(routes, '/dashboard/settings', files), '200 /index.html', 'a deep link of the app');
  t.is(route(routes, '/styles.css', files), null, 'a file answers before a rule that is not forced');
  t.is(route(routes, '/app', files), '200 /app/index.html', 'a forced rule applies where a file answers');
  t.is(route(routes, '/en/missing', files), '404 /en/404.html');
  t.is(route(routes, '/api-old/contact?x=1', files), '200 /api/contact?x=1');
  t.is(route(routes, '/', files), '200 /index.html', '"/*" matches the root where no file answers');
});

test('the first matching rule in the file’s order answers, however many rules there are', (t) => {
  const many = Array.from({ length: 1999 }, (_, i) => `/page-${i} /to-${i}`).join('\n');
  const routes = table(`/page-5 /first\n${many}`);
  t.is(route(routes, '/page-5'), '301 /first');
  t.is(route(routes, '/page-1998'), '301 /to-1998');
  t.deepEqual(parseRedirects(`${many}\n/a /b\n/c /d`).problems, [
    { line: 2001, column: 1, message: 'more than 2000 rules: a site may have 2000' },
  ]);
});

test('past their bounds: the 1,001st header rule and a line over 1,000 characters, each at its line', (t) => {
  const headerRules = Array.from({ length: 1000 }, (_, i) => `/area-${i}/*\n  X-Area: ${i}`).join('\n');
  t.deepEqual(parseHeaders(headerRules).problems, [], '1,000 header rules are allowed');
  t.deepEqual(parseHeaders(`${headerRules}\n/one-more/*\n  X-Area: more`).problems, [
    { line: 2001, column: 1, message: 'more than 1000 rules: a site may have 1000' },
  ]);
  const longTarget = `/from /${'a'.repeat(994)}`;
  t.is(longTarget.length, 1001);
  t.deepEqual(parseRedirects(`/a /b\n${longTarget}`).problems, [
    { line: 2, column: 1001, message: 'a rule may be 1000 characters long' },
  ]);
  t.deepEqual(parseRedirects(`/from /${'a'.repeat(993)}`).problems, [], 'a line of 1,000 characters is allowed');
  t.deepEqual(parseHeaders(`/a\n  X-Long: ${'v'.repeat(1000)}`).problems, [
    { line: 2, column: 1001, message: 'a line may be 1000 characters long' },
  ]);
});

test('what Berth does not support is refused at its line and column, by name', (t) => {
  const { problems } = parseRedirects(
    [
      '/store id=:id  /blog/:id  301',
      '/  /anz  302  Country=au,nz',
      '/admin/*  /admin  200!  Role=admin',
      'http://blog.example.com/*  https://www.example.com/blog/:splat  301',
      '/blog/*  https://blog.example.com/:splat  200',
      '/a  /b  418',
      '/a  /b  30x',
      '/a/*/b  /c',
      '/a  /b/:slug',
      '/lonely',
      '/a  //evil.example/x  200',
      'relative  /b',
      '/a  /über',
    ].join('\n'),
  );
  t.deepEqual(
    problems.map((p) => `${p.line}:${p.column}: ${p.message.split(':')[0]}`),
    [
      '1:8: id=',
      '2:15: Country=au,nz',
      '3:25: Role=admin',
      '4:1: http',
      '5:10: https',
      '6:9: 418',
      '7:9: 30x',
      '8:4: /a/*/b',
      '9:8: ',
      '10:8: a rule names a destination after its path',
      '11:5: //evil.example/x',
      '12:1: relative',
      '13:5: /über',
    ],
  );
  t.regex(problems[4]!.message, /never with another host/);
  t.regex(problems[8]!.message, /^:slug is not a placeholder of this rule's path$/);
});

test('headers: every matching rule, in order, several values joined, and "! Name" taking one off', (t) => {
  const routes = table(
    '',
    `
# Every page
/*
  X-Frame-Options: DENY
  X-XSS-Protection: 1; mode=block
  Cache-Control: public, max-age=0
/assets/*
  ! Cache-Control
  Cache-Control: public, max-age=31536000, immutable
/templates/index2.html
  X-Frame-Options: SAMEORIGIN
/basic/:page
  Link: </style.css>; rel=preload; as=style
  Link: </app.js>; rel=preload; as=script
`,
  );
  t.deepEqual(routes.headersFor(segments('/index.html')), [
    ['X-Frame-Options', 'DENY'],
    ['X-XSS-Protection', '1; mode=block'],
    ['Cache-Control', 'public, max-age=0'],
  ]);
  t.deepEqual(routes.headersFor(segments('/assets/app.js')), [
    ['X-Frame-Options', 'DENY'],
    ['X-XSS-Protection', '1; mode=block'],
    ['Cache-Control', 'public, max-age=31536000, immutable'],
  ]);
  t.deepEqual(routes.headersFor(segments('/templates/index2.html'))[0], ['X-Frame-Options', 'DENY, SAMEORIGIN']);
  t.deepEqual(routes.headersFor(segments('/basic/about')).at(-1), [
    'Link',
    '</style.css>; rel=preload; as=style, </app.js>; rel=preload; as=script',
  ]);
});

test('headers Berth sets itself, cookies, and lines out of place are refused at their line and column', (t) => {
  const { problems } = parseHeaders(
    [
      '  X-Early: 1',
      '/*',
      '  Content-Length: 5',
      '  Set-Cookie: a=b',
      '  Berth-Request-Id: x',
      '  Bad Name: x',
      '  NoColon',
      '/a /b',
      'https://example.com/*',
      '  X-Under-Broken: 1',
    ].join('\n'),
  );
  t.deepEqual(
    problems.map((p) => `${p.line}:${p.column}`),
    ['1:3', '3:3', '4:3', '5:3', '6:3', '7:3', '8:4', '9:1'],
  );
  t.regex(problems[1]!.message, /^Content-Length: Berth sets this header itself/);
  t.regex(problems[2]!.message, /^Set-Cookie: Berth sets this header itself/);
});

test('a rules file past 100 KiB is refused whole', (t) => {
  const big = `${'# padding\n'.repeat(11 * 1024)}/a /b\n`;
  t.deepEqual(parseRedirects(big).problems, [
    {
      line: 1,
      column: 1,
      message: `web/_redirects is ${Buffer.byteLength(big)} bytes, more than the 102400 it may be`,
    },
  ]);
  t.is(parseHeaders(big).problems.length, 1);
});
