// Signed-in users through real HTTP: a session acts on /v0 only with its anti-forgery token and in an
// account it belongs to; MEMBERs are refused keys, members, exports and database deletion; ADMINs
// manage keys, members and invitations (single-use, 7 days); a password change ends the other
// sessions; a CLI login is approved once and collected once.
import test from 'ava';
import got, { type Got } from 'got';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { createAccount } from '../control-plane/services/accounts.ts';
import { createKey } from '../control-plane/services/keys.ts';
import { createSiteToken } from '../control-plane/services/site-sessions.ts';
import { createUser } from '../control-plane/services/users.ts';

let t0: TestBerth;
/** Moves the server's clock forward, for expiries. */
let skewMs = 0;
const PASSWORD = 'a long enough password';

test.before(async () => {
  t0 = await startTestBerth({}, { now: () => new Date(Date.now() + skewMs) });
});
test.after.always(async () => {
  await t0?.dispose();
});

const http = () =>
  got.extend({
    prefixUrl: t0.url,
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
    responseType: 'json',
  });
const code = (res: { body: unknown }) => json(res).error?.code;

interface Session {
  cookie: string;
  csrf: string;
  /** /v0 as this user, in `account` (or the only one). */
  api: (account?: string) => Got;
}

async function signIn(email: string, password = PASSWORD): Promise<Session> {
  const res = await http().post('login', { json: { email, password } });
  if (res.statusCode !== 200) throw new Error(`sign-in failed: ${res.statusCode} ${JSON.stringify(res.body)}`);
  const cookie = (res.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('__Host-berth_console='))!
    .split(';')[0]!;
  const csrf = json<{ csrfToken: string }>(await http().get('session', { headers: { cookie } })).csrfToken;
  return {
    cookie,
    csrf,
    api: (account) =>
      http().extend({ headers: { cookie, 'x-csrf-token': csrf, ...(account ? { 'berth-account': account } : {}) } }),
  };
}

let users = 0;
async function member(role: 'ADMIN' | 'MEMBER', accountId = t0.owner.id) {
  const email = `user${++users}@example.com`;
  await createUser(t0.berth.deps, { email, accountId, role, password: PASSWORD });
  return { email, session: await signIn(email) };
}

test('a session reaches /v0 only with its anti-forgery token, reads included', async (t) => {
  const { session } = await member('ADMIN');
  const bare = await http().get('v0/sites', {
    headers: { cookie: session.cookie },
    searchParams: { accountId: t0.owner.id },
  });
  t.is(bare.statusCode, 403);
  t.is(code(bare), 'forbidden');
  const wrong = await http().post('v0/sites', {
    headers: { cookie: session.cookie, 'x-csrf-token': 'guessed' },
    json: { accountId: t0.owner.id, name: 'Forged' },
  });
  t.is(wrong.statusCode, 403);
  t.is(code(wrong), 'forbidden');
  const other = await member('ADMIN');
  const borrowed = await http().get('v0/sites', {
    headers: { cookie: session.cookie, 'x-csrf-token': other.session.csrf },
    searchParams: { accountId: t0.owner.id },
  });
  t.is(borrowed.statusCode, 403, 'a token is good for its own session only');
  const ok = await session.api().get('v0/sites', { searchParams: { accountId: t0.owner.id } });
  t.is(ok.statusCode, 200);
  const sites = json<{ sites: Array<{ name: string }> }>(ok).sites;
  t.false(
    sites.some((s) => s.name === 'Forged'),
    'the forged create did not run',
  );
});

test('a user of several accounts names one; an account they are not in is refused', async (t) => {
  const second = await createAccount(t0.berth.deps, { name: 'Second', plan: 'free' });
  const stranger = await createAccount(t0.berth.deps, { name: 'Stranger', plan: 'free' });
  const { email, session } = await member('MEMBER');
  await createUser(t0.berth.deps, { email, accountId: second.id, role: 'ADMIN' });
  const unnamed = await session.api().get('v0/accounts/current');
  t.is(unnamed.statusCode, 400);
  t.is(code(unnamed), 'invalid_request');
  t.is(json<{ id: string }>(await session.api(second.id).get('v0/accounts/current')).id, second.id);
  t.is(json<{ id: string }>(await session.api(t0.owner.id).get('v0/accounts/current')).id, t0.owner.id);
  const refused = await session.api(stranger.id).get('v0/accounts/current');
  t.is(refused.statusCode, 403);
  t.is(code(refused), 'forbidden');
  const roles = json<{ user: { memberships: Array<{ accountName: string; role: string }> } }>(
    await http().get('session', { headers: { cookie: session.cookie } }),
  ).user.memberships;
  t.deepEqual(roles.map((m) => [m.accountName, m.role]).sort(), [
    ['Owner', 'MEMBER'],
    ['Second', 'ADMIN'],
  ]);
});

test('a MEMBER works with sites and databases but is refused keys, members, invitations, exports and database deletion and restores', async (t) => {
  const { session } = await member('MEMBER');
  const api = session.api();
  const site = await api.post('v0/sites', { json: { accountId: t0.owner.id, name: 'Member site' } });
  t.is(site.statusCode, 201);
  const siteId = json<{ id: string }>(site).id;
  const db = await api.post(`v0/sites/${siteId}/databases`);
  t.is(db.statusCode, 200);
  const databaseId = json<{ database: { id: string } }>(db).database.id;
  t.is(
    (await api.post(`v0/sites/${siteId}/databases/${databaseId}/query`, { json: { sql: 'SELECT 1 AS one' } }))
      .statusCode,
    200,
  );
  const refusals: Array<[string, string, Record<string, unknown>?]> = [
    ['GET', 'v0/keys'],
    ['POST', 'v0/keys', { name: 'mine', permission: 'WRITE' }],
    ['GET', 'v0/invitations'],
    ['POST', 'v0/invitations', { email: 'friend@example.com', role: 'ADMIN' }],
    ['POST', `v0/members/${crypto.randomUUID()}`, { role: 'ADMIN' }],
    ['POST', `v0/sites/${siteId}/databases/${databaseId}/exports`],
    ['GET', `v0/sites/${siteId}/databases/${databaseId}/exports`],
    ['POST', `v0/sites/${siteId}/databases/${databaseId}/deletion-challenges`],
    ['DELETE', `v0/sites/${siteId}/databases/${databaseId}`, { confirmationCode: 'DELETE-AAAAAAAA' }],
    ['POST', `v0/sites/${siteId}/databases/${databaseId}/restore`, { at: new Date().toISOString() }],
    // Restoring the database with the site's files is the database's restore all the same.
    ['POST', `v0/sites/${siteId}/restore`, { at: new Date().toISOString(), database: true }],
  ];
  for (const [method, path, body] of refusals) {
    const res = await api(path, { method: method as 'GET', ...(body ? { json: body } : {}) });
    t.is(res.statusCode, 403, `${method} ${path}`);
    t.is(code(res), 'forbidden', `${method} ${path}`);
  }
  t.is((await api.get('v0/members')).statusCode, 200, 'a MEMBER sees who else is in the account');
  t.is((await t0.owner.api.get(`v0/sites/${siteId}/databases`)).statusCode, 200);
  t.is(
    json<{ databases: unknown[] }>(await t0.owner.api.get(`v0/sites/${siteId}/databases`)).databases.length,
    1,
    'the database is still there',
  );
});

test('an ADMIN makes a named key, shown once, that works with the API, and revokes it; API keys manage no keys', async (t) => {
  const { session } = await member('ADMIN');
  const made = await session.api().post('v0/keys', { json: { name: 'deploy bot', permission: 'WRITE' } });
  t.is(made.statusCode, 201);
  const { key, secret } = json<{ key: { id: string; name: string; permission: string }; secret: string }>(made);
  t.like(key, { name: 'deploy bot', permission: 'WRITE' });
  const withKey = got.extend({
    prefixUrl: t0.url,
    throwHttpErrors: false,
    responseType: 'json',
    headers: { authorization: `Bearer ${secret}` },
  });
  t.is(json<{ id: string }>(await withKey.get('v0/accounts/current')).id, t0.owner.id);
  const listed = json<{ keys: Array<Record<string, unknown>> }>(await session.api().get('v0/keys')).keys.find(
    (k) => k.id === key.id,
  )!;
  t.is(listed.name, 'deploy bot');
  t.false(JSON.stringify(listed).includes(secret), 'the list never shows a secret');

  const byKey = await withKey.post('v0/keys', { json: { name: 'escalate', permission: 'WRITE' } });
  t.is(byKey.statusCode, 403);
  t.is(code(byKey), 'forbidden');
  t.is((await withKey.get('v0/keys')).statusCode, 403);

  const revoked = await session.api().delete(`v0/keys/${key.id}`);
  t.is(revoked.statusCode, 200);
  t.truthy(json<{ key: { revokedAt: string } }>(revoked).key.revokedAt);
  const after = await withKey.get('v0/accounts/current');
  t.is(after.statusCode, 401);
  t.is(code(after), 'unauthorized');
  const foreign = await createAccount(t0.berth.deps, { name: 'Foreign', plan: 'free' });
  const theirs = await createKey(t0.berth.deps, { accountId: foreign.id, permission: 'READ' });
  const cross = await session.api().delete(`v0/keys/${theirs.id}`);
  t.is(cross.statusCode, 404, 'another account’s key is not found');
  t.is(code(cross), 'not_found');
});

test('an account keeps at least one ADMIN; roles change and members go', async (t) => {
  const account = await createAccount(t0.berth.deps, { name: 'Small team', plan: 'free' });
  const { email, session } = await member('ADMIN', account.id);
  const api = session.api();
  const me = json<{ members: Array<{ userId: string; email: string }> }>(await api.get('v0/members')).members.find(
    (m) => m.email === email,
  )!;
  const demote = await api.post(`v0/members/${me.userId}`, { json: { role: 'MEMBER' } });
  t.is(demote.statusCode, 409);
  t.is(code(demote), 'last_admin');
  const leave = await api.delete(`v0/members/${me.userId}`);
  t.is(leave.statusCode, 409);
  t.is(code(leave), 'last_admin');
  const other = await member('MEMBER', account.id);
  const otherId = json<{ members: Array<{ userId: string; email: string }> }>(await api.get('v0/members')).members.find(
    (m) => m.email === other.email,
  )!.userId;
  t.is(
    json<{ member: { role: string } }>(await api.post(`v0/members/${otherId}`, { json: { role: 'ADMIN' } })).member
      .role,
    'ADMIN',
  );
  t.is((await api.delete(`v0/members/${otherId}`)).statusCode, 200);
  const gone = await other.session.api().get('v0/accounts/current');
  t.is(gone.statusCode, 403, 'a removed member loses the account at once');
});

test('an invitation is a single-use link: the invitee chooses a password and joins with the role', async (t) => {
  const { session } = await member('ADMIN');
  const made = await session.api().post('v0/invitations', { json: { email: 'Newcomer@Example.com', role: 'MEMBER' } });
  t.is(made.statusCode, 201);
  const { invitation, url } = json<{
    invitation: { id: string; email: string; expiresAt: string; createdAt: string };
    url: string;
  }>(made);
  t.is(invitation.email, 'newcomer@example.com');
  t.is(Date.parse(invitation.expiresAt) - Date.parse(invitation.createdAt), 7 * 24 * 3600_000);
  t.true(
    json<{ invitations: Array<{ id: string }> }>(await session.api().get('v0/invitations')).invitations.some(
      (i) => i.id === invitation.id,
    ),
  );
  const link = new URL(url);
  t.is(link.pathname, '/invite');
  const page = await http().get(`invite${link.search}`, { responseType: 'text' });
  t.is(page.statusCode, 200);
  t.regex(page.body, /newcomer@example\.com is invited as MEMBER/);
  const token = link.searchParams.get('token')!;

  const short = await http().post('invite', { form: { token, password: 'short' }, responseType: 'text' });
  t.is(short.statusCode, 400, 'a too-short password is refused and the link stays usable');
  const joined = await http().post('invite', { form: { token, password: PASSWORD }, responseType: 'text' });
  t.is(joined.statusCode, 303);
  t.is(joined.headers.location, '/');
  t.truthy(
    (joined.headers['set-cookie'] as string[]).find((c) => c.startsWith('__Host-berth_console=')),
    'the invitee is signed in',
  );
  const newcomer = await signIn('newcomer@example.com');
  const current = await newcomer.api().get('v0/accounts/current');
  t.is(json<{ id: string }>(current).id, t0.owner.id);
  t.is((await newcomer.api().get('v0/keys')).statusCode, 403, 'joined as MEMBER');

  const replay = await http().post('invite', {
    form: { token, password: 'another long password' },
    responseType: 'text',
  });
  t.is(replay.statusCode, 400);
  t.regex(replay.body, /used already, revoked or has expired/);
  t.is(
    (await http().post('login', { json: { email: 'newcomer@example.com', password: 'another long password' } }))
      .statusCode,
    401,
    'the replay set no password',
  );
  t.false(
    json<{ invitations: Array<{ id: string }> }>(await session.api().get('v0/invitations')).invitations.some(
      (i) => i.id === invitation.id,
    ),
  );
});

// Serial: it moves the server's clock, which would end the sessions of tests running beside it.
test.serial(
  'an invited existing user accepts with their own password; revoked and expired invitations open nothing',
  async (t) => {
    const team = await createAccount(t0.berth.deps, { name: 'Team', plan: 'free' });
    const admin = await member('ADMIN', team.id);
    const existing = await member('MEMBER');
    const invite = async (email: string) => {
      const res = await admin.session.api().post('v0/invitations', { json: { email, role: 'ADMIN' } });
      return {
        id: json<{ invitation: { id: string } }>(res).invitation.id,
        token: new URL(json<{ url: string }>(res).url).searchParams.get('token')!,
      };
    };
    const first = await invite(existing.email);
    const wrong = await http().post('invite', {
      form: { token: first.token, password: 'not the password' },
      responseType: 'text',
    });
    t.is(wrong.statusCode, 401);
    t.is(
      (await http().post('invite', { form: { token: first.token, password: PASSWORD }, responseType: 'text' }))
        .statusCode,
      303,
    );
    t.is((await existing.session.api(team.id).get('v0/keys')).statusCode, 200, 'now an ADMIN of the team');

    const revoked = await invite('revoked@example.com');
    t.is((await admin.session.api().delete(`v0/invitations/${revoked.id}`)).statusCode, 200);
    const afterRevoke = await http().get('invite', { searchParams: { token: revoked.token }, responseType: 'text' });
    t.is(afterRevoke.statusCode, 400);

    const late = await invite('late@example.com');
    skewMs = 7 * 24 * 3600_000 + 60_000;
    try {
      const expired = await http().post('invite', {
        form: { token: late.token, password: PASSWORD },
        responseType: 'text',
      });
      t.is(expired.statusCode, 400);
      t.regex(expired.body, /has expired/);
    } finally {
      skewMs = 0;
    }
  },
);

test('changing the password ends the user’s other sessions, on the control plane and on PRIVATE sites', async (t) => {
  const { email, session } = await member('ADMIN');
  const other = await signIn(email);
  const wrong = await session
    .api()
    .post('v0/me/password', { json: { currentPassword: 'not it at all', newPassword: 'a brand new password' } });
  t.is(wrong.statusCode, 401);
  t.is(code(wrong), 'invalid_credentials');

  const site = await createSite(t0.owner, { access: 'PRIVATE' });
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<p>members only</p>', 'text/html');
  const userId = json<{ user: { id: string } }>(await http().get('session', { headers: { cookie: other.cookie } })).user
    .id;
  const exchanged = await t0.site(site.subdomain).get('_berth/session', {
    searchParams: { token: await createSiteToken(t0.berth.deps, userId, site.id), next: '/' },
  });
  const siteCookie = (exchanged.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('_berth_session='))!
    .split(';')[0]!;
  t.is((await t0.site(site.subdomain).get('', { headers: { cookie: siteCookie } })).statusCode, 200);

  const changed = await session
    .api()
    .post('v0/me/password', { json: { currentPassword: PASSWORD, newPassword: 'a brand new password' } });
  t.is(changed.statusCode, 200);
  t.is((await session.api().get('v0/accounts/current')).statusCode, 200, 'the session that changed it goes on');
  const ended = await other.api().get('v0/accounts/current');
  t.is(ended.statusCode, 401);
  t.is(code(ended), 'unauthorized');
  t.is(
    (await t0.site(site.subdomain).get('', { headers: { cookie: siteCookie } })).statusCode,
    401,
    'the site session ended too',
  );
  t.is((await http().post('login', { json: { email, password: PASSWORD } })).statusCode, 401);
  t.is((await http().post('login', { json: { email, password: 'a brand new password' } })).statusCode, 200);
});

// Serial: it moves the server's clock.
test.serial(
  'a CLI login: the code the CLI shows is approved once, its key collected once, and requests expire after 10 minutes',
  async (t) => {
    const { session } = await member('ADMIN');
    const started = await http().post('cli-login', { json: { machine: 'laptop\u0007\n' } });
    t.is(started.statusCode, 201);
    const { login, pollToken, approveUrl } = json<{
      login: { code: string; expiresAt: string };
      pollToken: string;
      approveUrl: string;
    }>(started);
    t.regex(login.code, /^[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}$/);
    t.true(approveUrl.endsWith(`/#/cli-login/${login.code}`));
    t.is((await http().post('cli-login/poll', { json: { pollToken } })).statusCode, 202);

    const shown = await session.api().get(`v0/cli-logins/${login.code.toLowerCase()}`);
    t.like(json<{ login: object }>(shown).login, { code: login.code, machine: 'laptop', status: 'PENDING' });
    const byKey = await t0.owner.api.post(`v0/cli-logins/${login.code}/approve`, { json: { permission: 'WRITE' } });
    t.is(byKey.statusCode, 403, 'only a signed-in user approves');
    const approved = await session.api().post(`v0/cli-logins/${login.code}/approve`, { json: { permission: 'READ' } });
    t.is(approved.statusCode, 200);
    const twice = await session.api().post(`v0/cli-logins/${login.code}/approve`, { json: { permission: 'WRITE' } });
    t.is(twice.statusCode, 409);
    t.is(code(twice), 'login_already_approved');

    const collected = await http().post('cli-login/poll', { json: { pollToken } });
    t.is(collected.statusCode, 200);
    const got1 = json<{ status: string; key: string; keyId: string; accountId: string; permission: string }>(collected);
    t.like(got1, { status: 'APPROVED', accountId: t0.owner.id, permission: 'READ' });
    const again = await http().post('cli-login/poll', { json: { pollToken } });
    t.is(again.statusCode, 410);
    t.is(code(again), 'login_expired');
    const withKey = got.extend({
      prefixUrl: t0.url,
      throwHttpErrors: false,
      responseType: 'json',
      headers: { authorization: `Bearer ${got1.key}` },
    });
    t.is((await withKey.get('v0/accounts/current')).statusCode, 200);
    t.is(
      (await withKey.post('v0/sites', { json: { accountId: t0.owner.id, name: 'x' } })).statusCode,
      403,
      'a READ approval gives a READ key',
    );
    const listed = json<{ keys: Array<{ id: string; name: string }> }>(await session.api().get('v0/keys')).keys.find(
      (k) => k.id === got1.keyId,
    )!;
    t.is(listed.name, 'CLI on laptop');

    const out = await withKey.post('cli-login/revoke');
    t.is(out.statusCode, 200);
    t.is((await withKey.get('v0/accounts/current')).statusCode, 401, 'berth logout revokes the key');

    const late = json<{ login: { code: string }; pollToken: string }>(
      await http().post('cli-login', { json: { machine: 'ci' } }),
    );
    skewMs = 10 * 60_000 + 1000;
    try {
      const tooLate = await session
        .api()
        .post(`v0/cli-logins/${late.login.code}/approve`, { json: { permission: 'WRITE' } });
      t.is(tooLate.statusCode, 410);
      t.is(code(tooLate), 'login_expired');
      t.is((await http().post('cli-login/poll', { json: { pollToken: late.pollToken } })).statusCode, 410);
    } finally {
      skewMs = 0;
    }
  },
);

test('a secret revealed in the dashboard is logged as DASHBOARD with the user, one read by the CLI’s login key as CLI', async (t) => {
  const { email, session } = await member('ADMIN');
  const site = await createSite(t0.owner);
  t.is(
    (await session.api().post(`v0/sites/${site.id}/secrets`, { json: { name: 'TOKEN', value: 's3cret' } })).statusCode,
    200,
  );
  const revealed = await session.api().get(`v0/sites/${site.id}/secrets/TOKEN`);
  t.is(json<{ secret: { value: string } }>(revealed).secret.value, 's3cret');

  const { login, pollToken } = json<{ login: { code: string }; pollToken: string }>(
    await http().post('cli-login', { json: { machine: 'desk' } }),
  );
  await session.api().post(`v0/cli-logins/${login.code}/approve`, { json: { permission: 'READ' } });
  const { key } = json<{ key: string }>(await http().post('cli-login/poll', { json: { pollToken } }));
  const cli = got.extend({
    prefixUrl: t0.url,
    throwHttpErrors: false,
    responseType: 'json',
    headers: { authorization: `Bearer ${key}` },
  });
  t.is((await cli.get(`v0/sites/${site.id}/secrets/TOKEN`)).statusCode, 200);
  t.is((await t0.owner.read.get(`v0/sites/${site.id}/secrets/TOKEN`)).statusCode, 200);

  const logs = json<{ accessLogs: Array<{ via: string; keyId: string; userEmail?: string }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/secret_access_logs`),
  ).accessLogs;
  t.deepEqual(
    logs.map((entry) => [entry.via, entry.userEmail ?? null]),
    [
      ['API', null],
      ['CLI', null],
      ['DASHBOARD', email],
    ],
  );
  t.regex(logs[2]!.keyId, /^user:/);
});

test.serial('login requests a day past their expiry are cleared when another starts', async (t) => {
  const old = json<{ login: { code: string } }>(
    await http().post('cli-login', { json: { machine: 'old laptop' } }),
  ).login;
  const { session } = await member('ADMIN');
  t.is((await session.api().get(`v0/cli-logins/${old.code}`)).statusCode, 200);
  skewMs = 25 * 3600_000;
  try {
    t.is((await http().post('cli-login', { json: { machine: 'new laptop' } })).statusCode, 201);
  } finally {
    skewMs = 0;
  }
  const fresh = await signIn((await member('ADMIN')).email);
  const gone = await fresh.api().get(`v0/cli-logins/${old.code}`);
  t.is(gone.statusCode, 404);
  t.is(code(gone), 'not_found');
});

test('one address may start 30 CLI login requests in a quarter of an hour, then waits', async (t) => {
  const own = await startTestBerth();
  t.teardown(() => own.dispose());
  const start = () =>
    got.post(`${own.url}/cli-login`, {
      json: { machine: 'm' },
      throwHttpErrors: false,
      responseType: 'json',
      retry: { limit: 0 },
    });
  for (let i = 0; i < 30; i++) t.is((await start()).statusCode, 201);
  const refused = await start();
  t.is(refused.statusCode, 429);
  t.is(code(refused), 'too_many_attempts');
  t.truthy(refused.headers['retry-after']);
});
