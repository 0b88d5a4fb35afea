// Live function logs: GET /v0/sites/:siteId/logs/stream delivers what functions log as server-sent
// events, resumes after Last-Event-ID, filters on the server, and is bounded per account.
import test from 'ava';
import { STREAMS_PER_ACCOUNT } from '../control-plane/logs/log-streams.ts';
import { type TestBerth, createSite, deployFixture, json, startTestBerth } from './helpers/berth.ts';
import { type LogStreamReader, openLogStream } from './helpers/log-stream.ts';
import { until } from './helpers/until.ts';
import { runBerth } from './helpers/process.ts';
import { createKey } from '../control-plane/services/keys.ts';
import { createUser } from '../control-plane/services/users.ts';

let t0: TestBerth;
let site: { id: string; subdomain: string; bucketId: string };

test.before(async () => {
  t0 = await startTestBerth();
  site = await createSite(t0.owner, { subdomain: 'live-logs' });
  await deployFixture(t0.owner, site.bucketId, 'say');
  await deployFixture(t0.owner, site.bucketId, 'logger');
});
test.after.always(async () => {
  await t0?.dispose();
});

const say = async (message: string, level = 'log') => {
  const res = await t0.site(site.subdomain).get('api/say', { searchParams: { m: message, level } });
  if (res.statusCode !== 200) throw new Error(`api/say answered ${res.statusCode}`);
  return String(res.headers['berth-request-id']);
};

const lineOf = (stream: LogStreamReader, message: string) => stream.lines().find((l) => l.message === message);

test.serial('a logged line reaches an open stream as an event with its id, level and function', async (t) => {
  const stream = await openLogStream(t0.url, t0.owner.readKey, site.id);
  t.teardown(() => stream.close());
  t.is(stream.status, 200);
  const requestId = await say('hello stream', 'warn');
  const line = await until(() => lineOf(stream, 'hello stream'), 'the line on the stream', { ms: 5000 });
  t.like(line, { functionPath: 'api/say.ts', level: 'warn', requestId });
  const event = stream.events.find((e) => e.event === 'log' && JSON.parse(e.data).message === 'hello stream')!;
  t.is(event.id, String(line.id));
  // The same record the list route gives.
  const listed = json<{ logs: unknown[] }>(await t0.owner.read.get(`v0/sites/${site.id}/logs`)).logs;
  t.deepEqual(
    listed.find((l) => (l as { id: number }).id === line.id),
    line,
  );
  // Lines stored before the stream opened are not sent without since or Last-Event-ID.
  t.false(stream.lines().some((l) => l.id < line.id));
});

test.serial('Last-Event-ID and since resume after that line only', async (t) => {
  await say('before resume 1');
  await say('before resume 2');
  await say('after resume 1');
  await say('after resume 2');
  const listed = await until(async () => {
    const logs = json<{ logs: Array<{ id: number; message: string }> }>(
      await t0.owner.read.get(`v0/sites/${site.id}/logs`),
    ).logs;
    return logs.some((l) => l.message === 'after resume 2') && logs;
  }, 'the four lines stored');
  const mark = listed.find((l) => l.message === 'before resume 2')!.id;
  const expected = ['after resume 1', 'after resume 2'];
  for (const options of [{ lastEventId: String(mark) }, { query: { since: String(mark) } }]) {
    const stream = await openLogStream(t0.url, t0.owner.readKey, site.id, options);
    t.teardown(() => stream.close());
    await until(() => lineOf(stream, 'after resume 2'), 'the resumed lines', { ms: 5000 });
    t.deepEqual(
      stream.lines().map((l) => l.message),
      expected,
      JSON.stringify(options),
    );
    stream.close();
  }
  // Last-Event-ID wins over since.
  const both = await openLogStream(t0.url, t0.owner.readKey, site.id, {
    lastEventId: String(mark),
    query: { since: '0' },
  });
  t.teardown(() => both.close());
  await until(() => lineOf(both, 'after resume 2'), 'the resumed lines');
  t.deepEqual(
    both.lines().map((l) => l.message),
    expected,
  );
  const bad = await openLogStream(t0.url, t0.owner.readKey, site.id, { lastEventId: 'yesterday' });
  t.is(bad.status, 400);
  t.is(bad.errorCode, 'invalid_request');
});

test.serial('the function, level and text filters apply on the server', async (t) => {
  const byLevel = await openLogStream(t0.url, t0.owner.readKey, site.id, { query: { level: 'error' } });
  const byFunction = await openLogStream(t0.url, t0.owner.readKey, site.id, { query: { function: 'api/logger.ts' } });
  const byText = await openLogStream(t0.url, t0.owner.readKey, site.id, { query: { q: 'NEEDLE_%' } });
  t.teardown(() => {
    for (const s of [byLevel, byFunction, byText]) s.close();
  });
  await say('an info line');
  await say('an error line', 'error');
  await say('with needle_% inside');
  await say('with needle_x inside');
  await t0.site(site.subdomain).get('api/logger');
  await say('the last line, needle_%', 'error');
  // Lines come in the order they were stored: once a stream has the last line it passes, it has all.
  await until(() => lineOf(byLevel, 'the last line, needle_%'), 'the last line by level', { ms: 5000 });
  await until(() => lineOf(byText, 'the last line, needle_%'), 'the last line by text', { ms: 5000 });
  await until(() => byFunction.lines().length >= 3, 'the logger’s three lines', { ms: 5000 });
  t.deepEqual(
    byLevel.lines().map((l) => l.message),
    ['an error line', 'an error', 'the last line, needle_%'],
  );
  const [plain, ...rest] = byFunction.lines().map((l) => l.message);
  t.regex(plain!, /^plain log/);
  t.deepEqual(rest, ['a warning', 'an error']);
  t.true(byFunction.lines().every((l) => l.functionPath === 'api/logger.ts'));
  // A LIKE wildcard in q is only text.
  t.deepEqual(
    byText.lines().map((l) => l.message),
    ['with needle_% inside', 'the last line, needle_%'],
  );
  const list = json<{ logs: Array<{ message: string }> }>(
    await t0.owner.read.get(`v0/sites/${site.id}/logs`, { searchParams: { level: 'warn', function: 'api/logger.ts' } }),
  ).logs;
  t.true(list.length > 0);
  t.true(list.every((l) => l.message === 'a warning'));
  const wrong = await openLogStream(t0.url, t0.owner.readKey, site.id, { query: { level: 'loud' } });
  t.is(wrong.status, 400);
  t.is(wrong.errorCode, 'invalid_request');
});

test.serial('another account’s key gets not_found, like the list route', async (t) => {
  const other = await t0.newAccount();
  const stream = await openLogStream(t0.url, other.readKey, site.id);
  t.is(stream.status, 404);
  t.is(stream.errorCode, 'not_found');
});

test.serial('an account holds a bounded number of streams; one closed frees its place', async (t) => {
  const account = await t0.newAccount();
  const own = await createSite(account, { subdomain: 'stream-limit' });
  const open: LogStreamReader[] = [];
  t.teardown(() => {
    for (const s of open) s.close();
  });
  for (let i = 0; i < STREAMS_PER_ACCOUNT; i++) {
    const stream = await openLogStream(t0.url, account.readKey, own.id);
    t.is(stream.status, 200);
    open.push(stream);
  }
  const refused = await openLogStream(t0.url, account.readKey, own.id);
  t.is(refused.status, 429);
  t.is(refused.errorCode, 'too_many_attempts');
  // Another account is not held back by this one.
  const owners = await openLogStream(t0.url, t0.owner.readKey, site.id);
  t.teardown(() => owners.close());
  t.is(owners.status, 200);
  open.shift()!.close();
  const again = await until(async () => {
    const stream = await openLogStream(t0.url, account.readKey, own.id);
    if (stream.status === 200) return stream;
    t.is(stream.errorCode, 'too_many_attempts');
    return undefined;
  }, 'a place freed by the closed stream');
  open.push(again);
  t.is(again.status, 200);
});

test('a closing server ends its open streams without waiting out the grace period', async (t) => {
  // Ten minutes: a close that waited for the stream would outlast ava's timeout.
  const own = await startTestBerth({ shutdownGraceMs: 600_000 });
  const ownSite = await createSite(own.owner, { subdomain: 'closing' });
  const stream = await openLogStream(own.url, own.owner.readKey, ownSite.id);
  t.is(stream.status, 200);
  const closed = own.dispose();
  await stream.ended;
  await closed;
  t.pass();
});

/** Resolves to whether the server ended the stream within `ms`. */
const endsWithin = (stream: LogStreamReader, ms: number) =>
  Promise.race([
    stream.ended.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms)),
  ]);

test.serial('a READ key revoked through the API ends the streams it follows at once', async (t) => {
  const email = 'stream-admin@example.com';
  const password = 'a long enough password';
  await createUser(t0.berth.deps, { email, accountId: t0.owner.id, role: 'ADMIN', password });
  const signedIn = await fetch(`${t0.url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  const cookie = signedIn.headers.getSetCookie()[0]!.split(';')[0]!;
  const { csrfToken } = (await (await fetch(`${t0.url}/session`, { headers: { cookie } })).json()) as {
    csrfToken: string;
  };
  const key = await createKey(t0.berth.deps, { accountId: t0.owner.id, permission: 'READ' });
  const stream = await openLogStream(t0.url, key.key, site.id);
  t.teardown(() => stream.close());
  t.is(stream.status, 200);
  await say('before the revocation');
  await until(() => lineOf(stream, 'before the revocation'), 'the line on the stream', { ms: 5000 });

  const revoked = await fetch(`${t0.url}/v0/keys/${key.id}`, {
    method: 'DELETE',
    headers: { cookie, 'x-csrf-token': csrfToken },
  });
  t.is(revoked.status, 200);
  // Well within the 30 s re-check: the change feed told the stream.
  t.true(await endsWithin(stream, 5000), 'the stream ended');
  await say('after the revocation');
  const listed = json<{ logs: Array<{ message: string }> }>(await t0.owner.read.get(`v0/sites/${site.id}/logs`)).logs;
  t.true(listed.some((l) => l.message === 'after the revocation'));
  t.falsy(lineOf(stream, 'after the revocation'));
  const again = await openLogStream(t0.url, key.key, site.id);
  t.is(again.status, 401);
  t.is(again.errorCode, 'unauthorized');
});

test('a key revoked by berth admin on the metadata directly ends its streams at the next re-check', async (t) => {
  const own = await startTestBerth({ logStreamRecheckMs: 1000 });
  t.teardown(() => own.dispose());
  const ownSite = await createSite(own.owner, { subdomain: 'admin-revoked' });
  await deployFixture(own.owner, ownSite.bucketId, 'say');
  const key = await createKey(own.berth.deps, { accountId: own.owner.id, permission: 'READ' });
  const stream = await openLogStream(own.url, key.key, ownSite.id);
  t.teardown(() => stream.close());
  t.is(stream.status, 200);
  const revoked = await runBerth(['admin', 'revoke-key', '--id', key.id], { BERTH_DATA_DIR: own.dataDir });
  t.is(revoked.code, 0, revoked.stderr);
  t.true(await endsWithin(stream, 10_000), 'the stream ended');
  const res = await own.site(ownSite.subdomain).get('api/say', { searchParams: { m: 'after the admin revocation' } });
  t.is(res.statusCode, 200);
  t.falsy(lineOf(stream, 'after the admin revocation'));
});
