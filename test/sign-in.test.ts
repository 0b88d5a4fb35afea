// Signing in on the control-plane host through real HTTP: the page, the session cookie's flags and
// rotation, sign-out, the same answer for an unknown email and a wrong password, limits on failures,
// and requests from another site refused.
import test from 'ava';
import got from 'got';
import { type TestBerth, startTestBerth } from './helpers/berth.ts';
import { createUser } from '../control-plane/services/users.ts';

let t0: TestBerth;
const PASSWORD = 'a long enough password';
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

const http = () =>
  got.extend({ prefixUrl: t0.url, throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });

async function user(email: string) {
  return createUser(t0.berth.deps, { email, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
}

const form = (email: string, password: string) => ({ form: { email, password } });
const cookieOf = (res: { headers: Record<string, string | string[] | undefined> }) =>
  (res.headers['set-cookie'] as string[] | undefined)?.find((c) => c.startsWith('__Host-berth_console='));

test('the sign-in page has its labelled fields and a strict Content-Security-Policy', async (t) => {
  const res = await http().get('login');
  t.is(res.statusCode, 200);
  t.regex(res.body, /<label for="email">Email<\/label>/);
  t.regex(res.body, /<label for="password">Password<\/label>/);
  t.regex(res.body, /<button type="submit">Sign in<\/button>/);
  t.regex(String(res.headers['content-security-policy']), /default-src 'none'/);
  t.regex(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
});

test('signing in sets an HttpOnly, SameSite=Lax __Host- session cookie, new at every sign-in; signing out ends it', async (t) => {
  await user('sign@example.com');
  const first = await http().post('login', form('Sign@Example.com', PASSWORD));
  t.is(first.statusCode, 303);
  t.is(first.headers.location, '/');
  const cookie = cookieOf(first)!;
  t.regex(cookie, /httponly/i);
  t.regex(cookie, /samesite=lax/i);
  // Browsers keep Secure cookies of loopback names over plain http: the __Host- name works there.
  t.regex(cookie, /; secure/i);
  t.regex(cookie, /; path=\/(;|$)/i);
  t.notRegex(cookie, /domain=/i);
  const token = cookie.split(';')[0]!;
  const session = await http().get('session', { headers: { cookie: token }, responseType: 'json' });
  t.is(session.statusCode, 200);
  t.like((session.body as { user: { email: string; memberships: unknown[] } }).user, {
    email: 'sign@example.com',
    memberships: [{ accountId: t0.owner.id, role: 'ADMIN' }],
  });

  const second = cookieOf(await http().post('login', form('sign@example.com', PASSWORD)))!.split(';')[0]!;
  t.not(second, token, 'every sign-in gets a new session token');

  const forged = await http().post('logout', { headers: { cookie: token } });
  t.is(forged.statusCode, 403, 'signing out needs the session’s anti-forgery token');
  const { csrfToken } = session.body as { csrfToken: string };
  const out = await http().post('logout', { headers: { cookie: token, 'x-csrf-token': csrfToken } });
  t.is(out.statusCode, 303);
  t.is((await http().get('session', { headers: { cookie: token } })).statusCode, 401, 'the session ended at once');
  t.is((await http().get('session', { headers: { cookie: second } })).statusCode, 200, 'other sessions go on');
  const none = await http().get('session', { responseType: 'json' });
  t.is(none.statusCode, 401);
  t.is((none.body as { error: { code: string } }).error.code, 'unauthorized');
});

test('a plain-http control plane reached by a name that is not loopback signs in under berth_console', async (t) => {
  await user('plain@example.com');
  const host = { host: `berth.example.test:${t0.berth.port}` };
  const signedIn = await http().post('login', { ...form('plain@example.com', PASSWORD), headers: host });
  t.is(signedIn.statusCode, 303);
  const cookies = signedIn.headers['set-cookie'] as string[];
  t.is(cookies.length, 1);
  t.regex(cookies[0]!, /^berth_console=[^;]+;/, 'a browser keeps no Secure cookie there: the fallback name');
  t.notRegex(cookies[0]!, /secure/i);
  const token = cookies[0]!.split(';')[0]!.slice('berth_console='.length);
  const read = (cookie: string, headers = host) => http().get('session', { headers: { ...headers, cookie } });
  t.is((await read(`berth_console=${token}`)).statusCode, 200);
  t.is((await read(`__Host-berth_console=${token}`)).statusCode, 401, 'there, only the fallback name counts');
  t.is(
    (await read(`berth_console=${token}`, { host: `127.0.0.1:${t0.berth.port}` })).statusCode,
    401,
    'on loopback, only the __Host- name counts',
  );
  t.is((await read(`__Host-berth_console=${token}`, { host: `127.0.0.1:${t0.berth.port}` })).statusCode, 200);
});

test('an unknown email and a wrong password get the same answer', async (t) => {
  await user('known@example.com');
  const wrong = await http().post('login', {
    json: { email: 'known@example.com', password: 'not the password' },
    responseType: 'json',
  });
  const unknown = await http().post('login', {
    json: { email: 'nobody@example.com', password: 'not the password' },
    responseType: 'json',
  });
  t.is(wrong.statusCode, 401);
  t.is(unknown.statusCode, 401);
  t.deepEqual(wrong.body, unknown.body);
  t.is((wrong.body as { error: { code: string } }).error.code, 'invalid_credentials');
  const page = await http().post('login', form('known@example.com', 'not the password'));
  t.is(page.statusCode, 401);
  t.regex(page.body, /the email or the password is wrong/);
  t.is(cookieOf(page), undefined);
});

test('failed sign-ins are limited per email with 429 and Retry-After, and a right password waits too', async (t) => {
  await user('limited@example.com');
  for (let i = 0; i < 5; i++)
    t.is((await http().post('login', form('limited@example.com', `wrong ${i}`))).statusCode, 401);
  const limited = await http().post('login', form('limited@example.com', PASSWORD));
  t.is(limited.statusCode, 429);
  t.true(Number(limited.headers['retry-after']) > 0);
  t.is(cookieOf(limited), undefined, 'no session while the email is locked');
  const json = await http().post('login', {
    json: { email: 'limited@example.com', password: PASSWORD },
    responseType: 'json',
  });
  t.is((json.body as { error: { code: string } }).error.code, 'too_many_attempts');
});

test('a sign-in or sign-out posted from another site is refused', async (t) => {
  await user('origin@example.com');
  const res = await http().post('login', {
    ...form('origin@example.com', PASSWORD),
    headers: { origin: 'http://evil.example' },
  });
  t.is(res.statusCode, 403);
  t.is(cookieOf(res), undefined);
  const same = await http().post('login', { ...form('origin@example.com', PASSWORD), headers: { origin: t0.url } });
  t.is(same.statusCode, 303);
  const token = cookieOf(same)!.split(';')[0]!;
  t.is((await http().post('logout', { headers: { cookie: token, origin: 'http://evil.example' } })).statusCode, 403);
  t.is(
    (await http().get('session', { headers: { cookie: token } })).statusCode,
    200,
    'the session survived the forged sign-out',
  );
});

test('the first run’s one-time link sets the owner’s password once, and signs the owner in', async (t) => {
  const { email, signInToken } = t0.berth.owner!;
  t.is(email, 'owner@localhost');
  const link = `login/set-password?token=${signInToken}`;
  const shown = await http().get(link);
  t.is(shown.statusCode, 200);
  t.regex(shown.body, /owner@localhost/);
  t.regex(shown.body, /<label for="password">New password<\/label>/);
  const short = await http().post('login/set-password', { form: { token: signInToken, password: 'short' } });
  t.is(short.statusCode, 400, 'a refused password leaves the link usable');
  const set = await http().post('login/set-password', { form: { token: signInToken, password: PASSWORD } });
  t.is(set.statusCode, 303);
  const session = await http().get('session', {
    headers: { cookie: cookieOf(set)!.split(';')[0]! },
    responseType: 'json',
  });
  t.like((session.body as { user: object }).user, {
    email: 'owner@localhost',
    memberships: [{ accountId: t0.owner.id, role: 'ADMIN' }],
  });
  const again = await http().get(link);
  t.is(again.statusCode, 400, 'the link works once');
  t.regex(again.body, /used already or has expired/);
  t.is(
    (await http().post('login/set-password', { form: { token: signInToken, password: 'another long password' } }))
      .statusCode,
    400,
  );
  t.is((await http().post('login', form('owner@localhost', PASSWORD))).statusCode, 303);
});

test('a reset link ends the user’s sessions when it sets the new password, and expires after 24 hours', async (t) => {
  let now = Date.now();
  const own = await startTestBerth({}, { now: () => new Date(now) });
  t.teardown(() => own.dispose());
  const client = got.extend({ prefixUrl: own.url, throwHttpErrors: false, followRedirect: false, retry: { limit: 0 } });
  const { resetPassword } = await import('../control-plane/services/sign-in-links.ts');
  const { token: first } = await resetPassword(own.berth.deps, 'owner@localhost');
  t.is((await client.post('login/set-password', { form: { token: first, password: PASSWORD } })).statusCode, 303);
  const session = cookieOf(await client.post('login', form('owner@localhost', PASSWORD)))!.split(';')[0]!;
  t.is((await client.get('session', { headers: { cookie: session } })).statusCode, 200);

  const { token: second } = await resetPassword(own.berth.deps, 'owner@localhost');
  t.is(
    (await client.post('login/set-password', { form: { token: second, password: 'a brand new password' } })).statusCode,
    303,
  );
  t.is(
    (await client.get('session', { headers: { cookie: session } })).statusCode,
    401,
    'the old session ended with the old password',
  );
  t.is((await client.post('login', form('owner@localhost', PASSWORD))).statusCode, 401);

  const { token: late } = await resetPassword(own.berth.deps, 'owner@localhost');
  now += 24 * 3600_000 + 1000;
  t.is((await client.get(`login/set-password?token=${late}`)).statusCode, 400, 'expired after 24 hours');
  t.is((await client.get('login/set-password?token=made-up')).statusCode, 400);
});
