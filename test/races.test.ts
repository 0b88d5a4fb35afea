// Transactions that read rows to decide a change, raced by requests sent at the same moment. On SQLite
// one writer at a time decides them; on PostgreSQL (the suite's second pass) row locks and conditional
// updates must: every race below has exactly the outcome one request after the other would have, and
// never an internal error.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import got, { type Got } from 'got';
import { type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { createAccount } from '../control-plane/services/accounts.ts';
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
  got.extend({
    prefixUrl: t0.url,
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
    responseType: 'json',
  });
const codeOf = (res: { body: unknown }) => json(res).error?.code;
const statuses = (answers: Array<{ statusCode: number }>) => answers.map((a) => a.statusCode).sort();

/** Signs in a new ADMIN of `accountId` (default: the owner's account) and returns a client with their session. */
async function session(email: string, accountId = t0.owner.id): Promise<Got> {
  await createUser(t0.berth.deps, { email, accountId, role: 'ADMIN', password: PASSWORD });
  const res = await http().post('login', { json: { email, password: PASSWORD } });
  const cookie = (res.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('__Host-berth_console='))!
    .split(';')[0]!;
  const csrf = json<{ csrfToken: string }>(await http().get('session', { headers: { cookie } })).csrfToken;
  return http().extend({ headers: { cookie, 'x-csrf-token': csrf } });
}

test('writers of one path each get a version of their own, numbered one after the other, in one file', async (t) => {
  const site = await createSite(t0.owner);
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      t0.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/new.txt`, { body: `writer ${i}` }),
    ),
  );
  t.deepEqual(statuses(answers), Array(8).fill(200));
  const written = answers.map((a) => json<{ fileId: string; versionId: string }>(a));
  t.is(new Set(written.map((w) => w.fileId)).size, 1, 'the first writes of a path make one file');
  const versions = json<{ currentVersionId: string; versions: Array<{ id: string }> }>(
    await t0.owner.read.get(`v0/files/${written[0]!.fileId}/versions`),
  );
  t.is(versions.versions.length, 8);
  t.deepEqual(versions.versions.map((v) => v.id).sort(), written.map((w) => w.versionId).sort());
  t.is(versions.currentVersionId, versions.versions[0]!.id, 'the newest version is the current one');
});

test('two writers with the same If-Match: one wins, the other is told of the conflict', async (t) => {
  const site = await createSite(t0.owner);
  const first = await putFile(t0.owner, site.bucketId, 'web/page.txt', 'first');
  const answers = await Promise.all(
    ['left', 'right'].map((body) =>
      t0.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/page.txt`, {
        body,
        headers: { 'if-match': first.versionId },
      }),
    ),
  );
  t.deepEqual(statuses(answers), [200, 409]);
  t.is(codeOf(answers.find((a) => a.statusCode === 409)!), 'version_conflict');
  const versions = json<{ versions: unknown[] }>(await t0.owner.read.get(`v0/files/${first.fileId}/versions`));
  t.is(versions.versions.length, 2);
});

test('two restores from the same current version: one is made, the other is a conflict', async (t) => {
  const site = await createSite(t0.owner);
  const one = await putFile(t0.owner, site.bucketId, 'web/doc.txt', 'one');
  const two = await putFile(t0.owner, site.bucketId, 'web/doc.txt', 'two');
  const restore = () =>
    t0.owner.api.post(`v0/files/${one.fileId}/restore`, {
      json: { versionId: one.versionId, currentVersionId: two.versionId },
    });
  const answers = await Promise.all([restore(), restore()]);
  t.deepEqual(statuses(answers), [200, 409]);
  t.is(codeOf(answers.find((a) => a.statusCode === 409)!), 'version_conflict');
  t.is(json<{ versions: unknown[] }>(await t0.owner.read.get(`v0/files/${one.fileId}/versions`)).versions.length, 3);
});

test('exports started together: one runs, the others are told one is running', async (t) => {
  const site = await createSite(t0.owner);
  const database = json<{ database: { id: string } }>(
    await t0.owner.api.post(`v0/sites/${site.id}/databases`),
  ).database;
  const base = `v0/sites/${site.id}/databases/${database.id}`;
  // Enough rows that the dump takes longer than the requests take to arrive.
  t.is(
    (
      await t0.owner.api.post(`${base}/query`, {
        json: {
          sql: 'CREATE TABLE filler AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200000) SELECT x, hex(randomblob(16)) AS pad FROM n',
        },
      })
    ).statusCode,
    200,
  );
  const answers = await Promise.all(Array.from({ length: 4 }, () => t0.owner.api.post(`${base}/exports`)));
  t.deepEqual(statuses(answers), [200, 409, 409, 409]);
  t.true(answers.filter((a) => a.statusCode === 409).every((a) => codeOf(a) === 'export_in_progress'));
});

test('migration runs started together: the lease lets one apply, and the migration is applied once', async (t) => {
  const site = await createSite(t0.owner);
  const database = json<{ database: { id: string } }>(
    await t0.owner.api.post(`v0/sites/${site.id}/databases`),
  ).database;
  const base = `v0/sites/${site.id}/databases/${database.id}`;
  const apply = () =>
    t0.owner.api.post(`${base}/migrations`, {
      json: { name: '0001_notes.sql', sql: 'CREATE TABLE notes (body TEXT)', confirm: true },
    });
  const answers = await Promise.all(Array.from({ length: 4 }, apply));
  t.true(
    answers.every((a) => a.statusCode === 200 || (a.statusCode === 409 && codeOf(a) === 'migration_in_progress')),
    JSON.stringify(answers.map((a) => a.body)),
  );
  t.true(answers.some((a) => a.statusCode === 200));
  const ledger = json<{ applied: Array<{ name: string }> }>(await t0.owner.read.get(`${base}/migrations`)).applied;
  t.deepEqual(
    ledger.map((m) => m.name),
    ['0001_notes.sql'],
  );
});

test('two ADMINs demoting each other at once: the account keeps an ADMIN', async (t) => {
  // An account of their own, whose only ADMINs are these two (other tests add ADMINs to the owner's).
  const account = await createAccount(t0.berth.deps, { name: 'Two admins', plan: 'free' });
  const [ada, bob] = [
    await session('ada.race@example.com', account.id),
    await session('bob.race@example.com', account.id),
  ];
  const members = json<{ members: Array<{ userId: string; email: string; role: string }> }>(
    await ada.get('v0/members'),
  ).members;
  t.deepEqual(
    members
      .filter((m) => m.role === 'ADMIN')
      .map((m) => m.email)
      .sort(),
    ['ada.race@example.com', 'bob.race@example.com'],
  );
  const id = (email: string) => members.find((m) => m.email === email)!.userId;
  const answers = await Promise.all([
    ada.post(`v0/members/${id('bob.race@example.com')}`, { json: { role: 'MEMBER' } }),
    bob.post(`v0/members/${id('ada.race@example.com')}`, { json: { role: 'MEMBER' } }),
  ]);
  // The loser is either told it would leave no ADMIN, or, when the winner committed before the
  // loser's request was authorized, that it is no longer an ADMIN itself.
  const lost = answers.find((a) => a.statusCode !== 200)!;
  t.is(answers.filter((a) => a.statusCode === 200).length, 1);
  t.true(
    (lost.statusCode === 409 && codeOf(lost) === 'last_admin') ||
      (lost.statusCode === 403 && codeOf(lost) === 'forbidden'),
    JSON.stringify(lost.body),
  );
  const admins = await t0.berth.deps
    .db('memberships')
    .where({ account_id: account.id, role: 'ADMIN' })
    .select('user_id');
  t.is(admins.length, 1);
});

test('an invitation accepted twice at once makes one member', async (t) => {
  const admin = await session('inviter.race@example.com');
  const made = json<{ url: string }>(
    await admin.post('v0/invitations', { json: { email: 'twice@example.com', role: 'MEMBER' } }),
  );
  const token = new URL(made.url).searchParams.get('token')!;
  const accept = () => http().post('invite', { form: { token, password: PASSWORD }, responseType: 'text' });
  const answers = await Promise.all([accept(), accept()]);
  t.deepEqual(statuses(answers), [303, 400]);
  t.regex(String(answers.find((a) => a.statusCode === 400)!.body), /used already, revoked or has expired/);
  const members = json<{ members: Array<{ email: string }> }>(await admin.get('v0/members')).members;
  t.is(members.filter((m) => m.email === 'twice@example.com').length, 1);
});

test('a set-password link used twice at once sets one password', async (t) => {
  await createUser(t0.berth.deps, { email: 'linked.race@example.com', accountId: t0.owner.id, role: 'MEMBER' });
  const { resetPassword } = await import('../control-plane/services/sign-in-links.ts');
  const { token } = await resetPassword(t0.berth.deps, 'linked.race@example.com');
  const set = (password: string) =>
    http().post('login/set-password', { form: { token, password }, responseType: 'text' });
  const answers = await Promise.all([set('the first long password'), set('the second long password')]);
  t.deepEqual(statuses(answers), [303, 400]);
  const signIns = await Promise.all(
    ['the first long password', 'the second long password'].map((password) =>
      http().post('login', { json: { email: 'linked.race@example.com', password } }),
    ),
  );
  t.deepEqual(statuses(signIns), [200, 401], 'exactly one of the two passwords was set');
});

test('a function written through the file API while a deployment publishes it: the version served is the file’s current one', async (t) => {
  t.timeout(180_000);
  const site = await createSite(t0.owner);
  const source = (tag: string) => `export default () => new Response('${tag}');\n`;
  const mismatches: string[] = [];
  // The write starts a little before or after the publish, by a different time each round: one of them
  // lands the publish's switch between the write's commit and its deploy.
  for (let round = 0; round < 30; round++) {
    const created = await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
      json: { files: [{ path: 'api/race.ts', content: source(`deployed ${round}`), contentType: 'text/typescript' }] },
    });
    const deploymentId = json<{ deployment: { id: string } }>(created).deployment.id;
    const lead = (round % 10) * 3 - 12;
    await Promise.all([
      sleep(Math.max(0, -lead)).then(() =>
        t0.owner.api.post(`v0/sites/${site.id}/deployments/${deploymentId}/publish`),
      ),
      sleep(Math.max(0, lead)).then(() =>
        putFile(t0.owner, site.bucketId, 'api/race.ts', source(`written ${round}`), 'text/typescript'),
      ),
    ]);
    const current = (await t0.owner.read.head(`v0/buckets/${site.bucketId}/objects/api/race.ts`)).headers[
      'berth-version-id'
    ];
    const functions = json<{ functions: Array<{ path: string; deployedVersionId: string }> }>(
      await t0.owner.read.get(`v0/sites/${site.id}/functions`),
    ).functions;
    const served = functions.find((f) => f.path === 'api/race.ts')?.deployedVersionId;
    if (served !== current) mismatches.push(`round ${round}: serves ${served}, the file is at ${current}`);
  }
  t.deepEqual(mismatches, []);
  const last = (await t0.site(site.subdomain).get('api/race')).body;
  const file = (await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/api/race.ts`, { responseType: 'text' }))
    .body;
  t.true(file.includes(`'${last}'`), `serves ${last}, the file holds ${file}`);
});
