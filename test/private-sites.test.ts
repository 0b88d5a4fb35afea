// PRIVATE sites through real HTTP: the gate, sign-in at the control plane, the single-use token
// exchanged on the site's own host for a cookie of that host, members and non-members, replayed,
// expired and misdirected tokens, open-redirect attempts, and signing out of the site.
import test from 'ava';
import got from 'got';
import { type TestBerth, createSite, putFile, startTestBerth } from './helpers/berth.ts';
import { createUser } from '../control-plane/services/users.ts';

let now = Date.now();
let t0: TestBerth;
const PASSWORD = 'a long enough password';
test.before(async () => {
  t0 = await startTestBerth({}, { now: () => new Date(now) });
});
test.after.always(async () => {
  await t0?.dispose();
});

const control = () =>
  got.extend({ prefixUrl: t0.url, throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });
const cookie = (res: { headers: Record<string, string | string[] | undefined> }, name: string) =>
  (res.headers['set-cookie'] as string[] | undefined)?.find((c) => c.startsWith(`${name}=`));

async function privateSite() {
  const site = await createSite(t0.owner, { access: 'PRIVATE' });
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<p>members only</p>', 'text/html');
  return site;
}

/** Signs in at the control plane for `site` and follows the redirect to the site's host. */
async function signInFor(email: string, site: { id: string }, next = '/') {
  const res = await control().post('login', { form: { email, password: PASSWORD, site: site.id, next } });
  return res;
}

/** The path and query of a redirect to a site host, and the Host header to send it with. */
function onSite(location: string) {
  const url = new URL(location);
  return { path: `${url.pathname.slice(1)}${url.search}`, host: url.host };
}

test('a member signs in through the gate and reads the site; the token works once and for that site only', async (t) => {
  const site = await privateSite();
  const other = await privateSite();
  await createUser(t0.berth.deps, {
    email: 'member@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });

  const gate = await t0.site(site.subdomain).get('docs/page.html?x=1');
  t.is(gate.statusCode, 401);
  const href = /<a href="([^"]+)">Sign in<\/a>/.exec(gate.body)![1]!.replace(/&amp;/g, '&');
  const signInUrl = new URL(href);
  t.is(signInUrl.pathname, '/login');
  t.is(signInUrl.searchParams.get('site'), site.id);
  t.is(signInUrl.searchParams.get('next'), '/docs/page.html?x=1');

  const signedIn = await signInFor('member@example.com', site, '/index.html');
  t.is(signedIn.statusCode, 303);
  const { path, host } = onSite(signedIn.headers.location!);
  t.true(host.startsWith(`${site.subdomain}.localhost:`), 'sent to the site’s own host');
  t.true(path.startsWith('_berth/session?token='));

  const exchanged = await t0.site(site.subdomain).get(path);
  t.is(exchanged.statusCode, 303);
  t.is(exchanged.headers.location, '/index.html');
  const siteCookie = cookie(exchanged, '_berth_session')!;
  t.regex(siteCookie, /httponly/i);
  t.regex(siteCookie, /samesite=lax/i);
  t.notRegex(siteCookie, /domain=/i, 'a cookie of this host only');
  const pair = siteCookie.split(';')[0]!;

  const page = await t0.site(site.subdomain).get('', { headers: { cookie: pair } });
  t.is(page.statusCode, 200);
  t.is(page.body, '<p>members only</p>');
  t.is(
    (await t0.site(other.subdomain).get('', { headers: { cookie: pair } })).statusCode,
    401,
    'the cookie is worth nothing on another site',
  );

  t.is((await t0.site(site.subdomain).get(path)).statusCode, 400, 'a token is spent by its first use');
  const forOther = onSite((await signInFor('member@example.com', site)).headers.location!);
  t.is((await t0.site(other.subdomain).get(forOther.path)).statusCode, 400, 'a token is bound to its site');

  const out = await signOutOf(site.subdomain, pair);
  t.is(out.statusCode, 303);
  t.is(out.headers.location, '/');
  t.regex(cookie(out, '_berth_session')!, /expires=Thu, 01 Jan 1970/i);
  t.is(
    (await t0.site(site.subdomain).get('', { headers: { cookie: pair } })).statusCode,
    401,
    'signed out of the site',
  );
});

/** What the sign-out page's button does: POST the anti-forgery token the page holds. */
async function signOutOf(subdomain: string, pair: string) {
  const form = await t0.site(subdomain).get('_berth/logout', { headers: { cookie: pair } });
  const csrf = /name="csrf" value="([^"]+)"/.exec(form.body)![1]!;
  return t0.site(subdomain).post('_berth/logout', { headers: { cookie: pair }, form: { csrf } });
}

test('another page cannot sign a visitor out: a GET shows a button, a POST needs the token of that page', async (t) => {
  const site = await privateSite();
  await createUser(t0.berth.deps, {
    email: 'visitor@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });
  const { path } = onSite((await signInFor('visitor@example.com', site)).headers.location!);
  const pair = cookie(await t0.site(site.subdomain).get(path), '_berth_session')!.split(';')[0]!;
  const signedIn = async () =>
    (await t0.site(site.subdomain).get('', { headers: { cookie: pair } })).statusCode === 200;

  // What an <img src> or a link on any page makes the browser send.
  const shown = await t0.site(site.subdomain).get('_berth/logout', { headers: { cookie: pair } });
  t.is(shown.statusCode, 200);
  t.regex(shown.body, /<form method="post" action="\/_berth\/logout">/);
  t.regex(shown.headers['content-security-policy'] as string, /form-action 'self'/);
  t.true(await signedIn(), 'a GET signs nobody out');

  // A form of another page, which cannot read the token.
  const noToken = await t0.site(site.subdomain).post('_berth/logout', { headers: { cookie: pair }, form: {} });
  t.is(noToken.statusCode, 403);
  const wrongToken = await t0
    .site(site.subdomain)
    .post('_berth/logout', { headers: { cookie: pair }, form: { csrf: 'x'.repeat(43) } });
  t.is(wrongToken.statusCode, 403);
  const csrf = /name="csrf" value="([^"]+)"/.exec(shown.body)![1]!;
  const otherOrigin = await t0
    .site(site.subdomain)
    .post('_berth/logout', { headers: { cookie: pair, origin: 'http://evil.example' }, form: { csrf } });
  t.is(otherOrigin.statusCode, 403);
  t.is(JSON.parse(otherOrigin.body).error.code, 'forbidden');
  t.true(await signedIn(), 'still signed in after every forged sign-out');

  t.is((await t0.site(site.subdomain).put('_berth/logout', { headers: { cookie: pair } })).statusCode, 405);
  t.is((await signOutOf(site.subdomain, pair)).statusCode, 303);
  t.false(await signedIn());
  // Signed out, the page says so, and a POST without a session just goes home.
  t.regex((await t0.site(site.subdomain).get('_berth/logout')).body, /not signed in/);
  t.is((await t0.site(site.subdomain).post('_berth/logout', { form: {} })).statusCode, 303);
});

test('a signed-in non-member gets a 403 page, not the site', async (t) => {
  const site = await privateSite();
  const stranger = await t0.newAccount();
  await createUser(t0.berth.deps, {
    email: 'stranger@example.com',
    accountId: stranger.id,
    role: 'ADMIN',
    password: PASSWORD,
  });
  const { path } = onSite((await signInFor('stranger@example.com', site)).headers.location!);
  const pair = cookie(await t0.site(site.subdomain).get(path), '_berth_session')!.split(';')[0]!;
  const refused = await t0.site(site.subdomain).get('', { headers: { cookie: pair } });
  t.is(refused.statusCode, 403);
  t.notRegex(refused.body, /members only/);
});

test('after sign-in the browser goes only to a path of the site, whatever next says', async (t) => {
  const site = await privateSite();
  await createUser(t0.berth.deps, {
    email: 'redirect@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });
  for (const next of [
    '//evil.example/',
    'https://evil.example/',
    '/\\evil.example',
    'javascript:alert(1)',
    '/%0d%0aSet-Cookie:x',
  ]) {
    const { path } = onSite((await signInFor('redirect@example.com', site, next)).headers.location!);
    const location = (await t0.site(site.subdomain).get(path)).headers.location!;
    t.true(location.startsWith('/') && !location.startsWith('//') && !location.includes('\\'), `${next} → ${location}`);
  }
});

// Serial: it moves the server's clock, which would expire the tokens of tests running beside it.
test.serial('a token is good for a minute, and a browser signed in already goes straight back', async (t) => {
  const site = await privateSite();
  await createUser(t0.berth.deps, {
    email: 'quick@example.com',
    accountId: t0.owner.id,
    role: 'MEMBER',
    password: PASSWORD,
  });
  const signedIn = await signInFor('quick@example.com', site);
  const console = cookie(signedIn, '__Host-berth_console')!.split(';')[0]!;
  const late = onSite(signedIn.headers.location!);
  now += 61_000;
  t.is((await t0.site(site.subdomain).get(late.path)).statusCode, 400, 'expired after 60 seconds');

  const again = await control().get('login', {
    searchParams: { site: site.id, next: '/' },
    headers: { cookie: console },
  });
  t.is(again.statusCode, 303, 'no second sign-in while the control-plane session lasts');
  const fresh = onSite(again.headers.location!);
  t.is((await t0.site(site.subdomain).get(fresh.path)).statusCode, 303);
});
