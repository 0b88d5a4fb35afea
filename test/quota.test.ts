// Account storage quotas through the real API, functions and admin CLI: a tenant trying to pass its
// limit is refused with quota_exceeded and stores nothing, while another tenant keeps writing; what is
// stored counts each content once; deleting versions gives the space back, and the sweeper the disk.
import { Readable } from 'node:stream';
import crypto from 'node:crypto';
import test from 'ava';
import got from 'got';
import {
  type TestAccount,
  type TestBerth,
  createSite,
  deployFixture,
  json,
  putFile,
  startTestBerth,
} from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { blobStored } from './helpers/object-store.ts';
import { runBerth } from './helpers/process.ts';
import { until } from './helpers/until.ts';

const KIB = 1024;
const LIMIT = 1024 * KIB;
const TOKEN = 'metrics-token-for-the-quota-tests-0123';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth({ accountStorageBytes: LIMIT, metricsToken: TOKEN, blobSweepMs: 500 });
});
test.after.always(async () => {
  await t0?.dispose();
});

const distinct = (bytes: number) => Buffer.concat([Buffer.from(crypto.randomUUID()), Buffer.alloc(bytes - 36, 1)]);

interface Storage {
  usedBytes: number;
  limitBytes: number | null;
  databaseReplicaBytes: number;
  databaseBranchBytes: number;
}

async function storage(account: TestAccount): Promise<Storage> {
  return json<{ usage: { storage: Storage } }>(await account.read.get('v0/accounts/current/usage')).usage.storage;
}

async function paths(account: TestAccount, bucketId: string): Promise<string[]> {
  return json<{ files: Array<{ path: string }> }>(await account.read.get(`v0/buckets/${bucketId}/objects`)).files.map(
    (f) => f.path,
  );
}

test('a write past the limit answers 413 quota_exceeded, saying what is used, and stores nothing; another tenant keeps writing', async (t) => {
  const tenant = await t0.newAccount();
  const other = await t0.newAccount();
  const site = await createSite(tenant);
  const otherSite = await createSite(other);
  for (let i = 0; i < 3; i++) await putFile(tenant, site.bucketId, `web/${i}.bin`, distinct(300 * KIB));
  t.deepEqual(await storage(tenant), {
    usedBytes: 900 * KIB,
    limitBytes: LIMIT,
    databaseReplicaBytes: 0,
    databaseBranchBytes: 0,
  });

  const refused = await tenant.api.put(`v0/buckets/${site.bucketId}/objects/web/3.bin`, { body: distinct(300 * KIB) });
  t.is(refused.statusCode, 413);
  const error = json(refused).error;
  t.is(error.code, 'quota_exceeded');
  t.regex(error.message, /stores 921\.6 kB of its 1\.0 MB limit/);
  t.like(error.details, { usedBytes: 900 * KIB, limitBytes: LIMIT, neededBytes: 300 * KIB });
  t.false((await paths(tenant, site.bucketId)).includes('web/3.bin'));
  t.is((await storage(tenant)).usedBytes, 900 * KIB);

  // Sent without a length, the body is refused as it passes the limit, and nothing is kept either.
  const chunked = await tenant.api.put(`v0/buckets/${site.bucketId}/objects/web/4.bin`, {
    body: Readable.from([distinct(64 * KIB), distinct(64 * KIB), distinct(64 * KIB)]),
  });
  t.is(chunked.statusCode, 413);
  t.is(json(chunked).error.code, 'quota_exceeded');
  t.false((await paths(tenant, site.bucketId)).includes('web/4.bin'));

  for (let i = 0; i < 3; i++) await putFile(other, otherSite.bucketId, `web/${i}.bin`, distinct(300 * KIB));
  t.is((await storage(other)).usedBytes, 900 * KIB);
});

test('each content counts once however many files hold it, and a restore costs nothing', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const same = distinct(400 * KIB);
  const first = await putFile(tenant, site.bucketId, 'web/a.bin', same);
  await putFile(tenant, site.bucketId, 'web/b.bin', same);
  await putFile(tenant, site.bucketId, 'web/c.bin', same);
  t.is((await storage(tenant)).usedBytes, 400 * KIB);
  const second = await putFile(tenant, site.bucketId, 'web/a.bin', distinct(500 * KIB));
  t.is((await storage(tenant)).usedBytes, 900 * KIB);
  const restored = await tenant.api.post(`v0/files/${first.fileId}/restore`, {
    json: { versionId: first.versionId, currentVersionId: second.versionId },
  });
  t.is(restored.statusCode, 200);
  t.is((await storage(tenant)).usedBytes, 900 * KIB);
});

test('uploads racing for the last space cannot together pass the limit', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const answers = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      tenant.api.put(`v0/buckets/${site.bucketId}/objects/web/race-${i}.bin`, { body: distinct(300 * KIB) }),
    ),
  );
  const statuses = answers.map((a) => a.statusCode).sort();
  t.deepEqual(statuses, [200, 200, 200, 413, 413, 413]);
  t.true(answers.filter((a) => a.statusCode === 413).every((a) => json(a).error.code === 'quota_exceeded'));
  t.is((await storage(tenant)).usedBytes, 900 * KIB);
});

test('deleting a file keeps its versions; deleting versions frees their space, and the sweeper their bytes on disk', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const [body1, body2, kept] = [distinct(400 * KIB), distinct(400 * KIB), distinct(100 * KIB)];
  const v1 = await putFile(tenant, site.bucketId, 'web/big.bin', body1);
  const v2 = await putFile(tenant, site.bucketId, 'web/big.bin', body2);
  await putFile(tenant, site.bucketId, 'web/keep.bin', kept);
  t.is((await storage(tenant)).usedBytes, 900 * KIB);

  const current = await tenant.api.delete(`v0/files/${v2.fileId}/versions/${v2.versionId}`);
  t.is(current.statusCode, 409);
  t.is(json(current).error.code, 'version_in_use');

  const one = await tenant.api.delete(`v0/files/${v1.fileId}/versions/${v1.versionId}`);
  t.is(one.statusCode, 200);
  t.like(json<Record<string, unknown>>(one), { deleted: true, versionId: v1.versionId, freedBytes: 400 * KIB });
  t.is((await storage(tenant)).usedBytes, 500 * KIB);
  t.is((await tenant.read.get(`v0/files/${v1.fileId}/versions/${v1.versionId}/content`)).statusCode, 404);

  t.is((await tenant.api.delete(`v0/buckets/${site.bucketId}/objects/web/big.bin`)).statusCode, 200);
  t.is((await storage(tenant)).usedBytes, 500 * KIB, 'a deleted file keeps its history');
  const pruned = await tenant.api.delete(`v0/files/${v2.fileId}/versions`);
  t.is(pruned.statusCode, 200);
  t.deepEqual(json<Record<string, unknown>>(pruned), { fileId: v2.fileId, deletedVersions: 1, freedBytes: 400 * KIB });
  t.is((await storage(tenant)).usedBytes, 100 * KIB);
  t.is(
    (await tenant.read.get(`v0/files/${v2.fileId}/versions`)).statusCode,
    404,
    'a deleted file without versions is gone',
  );
  await putFile(tenant, site.bucketId, 'web/again.bin', distinct(800 * KIB));

  // The bytes of both deleted versions leave the disk once unused for the sweep interval; others stay.
  const stored = (body: Buffer) => blobStored(t0.dataDir, crypto.createHash('sha256').update(body).digest('hex'));
  await until(
    async () => !(await stored(body1)) && !(await stored(body2)),
    'the sweeper to remove the deleted versions’ bytes',
  );
  t.true(await stored(kept));
  t.is(
    (await tenant.read.get(`v0/buckets/${site.bucketId}/objects/web/keep.bin`, { responseType: 'buffer' })).body.length,
    100 * KIB,
  );
});

test('a version a function is served from stays until a newer one is deployed', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const deployed = await deployFixture(tenant, site.bucketId, 'echo');
  const broken = await putFile(tenant, site.bucketId, 'api/echo.ts', 'export default (', 'text/typescript');
  t.not(broken.deployment?.status, 'READY');
  const refused = await tenant.api.delete(`v0/files/${deployed.fileId}/versions/${deployed.versionId}`);
  t.is(refused.statusCode, 409);
  t.is(json(refused).error.code, 'version_in_use');
  t.regex(json(refused).error.message, /api\/echo\.ts/);
  const pruned = json<{ deletedVersions: number }>(await tenant.api.delete(`v0/files/${deployed.fileId}/versions`));
  t.is(pruned.deletedVersions, 0);
  t.is((await t0.site(site.subdomain).get('api/echo')).statusCode, 200);
});

test('ctx.data writes past the limit fail with quota_exceeded, 413 when uncaught, and store nothing partial', async (t) => {
  const tenant = await t0.newAccount();
  const other = await t0.newAccount();
  const site = await createSite(tenant);
  const otherSite = await createSite(other);
  await deployFixture(tenant, site.bucketId, 'filler');
  const res = await t0.site(site.subdomain).get('api/filler', { responseType: 'json' });
  const body = res.body as unknown as { written: number; error: { code: string; message: string; status: number } };
  t.is(body.error.code, 'quota_exceeded');
  t.is(body.error.status, 413);
  t.regex(body.error.message, /of its 1\.0 MB limit/);
  const files = (await paths(tenant, site.bucketId)).filter((p) => p.startsWith('data/fill/'));
  t.is(files.length, body.written);
  t.true((await storage(tenant)).usedBytes <= LIMIT);

  const uncaught = await t0
    .site(site.subdomain)
    .get('api/filler', { searchParams: { uncaught: '' }, responseType: 'json' });
  t.is(uncaught.statusCode, 413);
  t.is((uncaught.body as { error: { code: string } }).error.code, 'quota_exceeded');

  await putFile(other, otherSite.bucketId, 'web/fine.bin', distinct(500 * KIB));
});

test('the operator sets an account its own limit with berth admin while the server runs; usage shows in the metrics', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  await putFile(tenant, site.bucketId, 'web/a.bin', distinct(900 * KIB));
  const env = { BERTH_DATA_DIR: t0.dataDir, BERTH_ACCOUNT_STORAGE_BYTES: String(LIMIT) };
  const raised = await runBerth(
    ['admin', 'set-storage-limit', '--account', tenant.id, '--bytes', String(3 * LIMIT), '--json'],
    env,
  );
  t.is(raised.code, 0, raised.stderr);
  t.deepEqual(JSON.parse(raised.stdout), {
    accountId: tenant.id,
    storage: { usedBytes: 900 * KIB, limitBytes: 3 * LIMIT },
  });
  await putFile(tenant, site.bucketId, 'web/b.bin', distinct(900 * KIB));
  t.deepEqual(await storage(tenant), {
    usedBytes: 1800 * KIB,
    limitBytes: 3 * LIMIT,
    databaseReplicaBytes: 0,
    databaseBranchBytes: 0,
  });

  const metrics = (await got.get(`${t0.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).body;
  t.true(metrics.includes(`berth_account_storage_bytes{account="${tenant.id}"} ${1800 * KIB}`));
  t.true(metrics.includes(`berth_account_storage_limit_bytes{account="${tenant.id}"} ${3 * LIMIT}`));

  const back = await runBerth(['admin', 'set-storage-limit', '--account', tenant.id, '--bytes', 'default'], env);
  t.is(back.code, 0, back.stderr);
  t.regex(back.stdout, /with a limit of 1\.0 MB .*its plan’s/);
  const refused = await tenant.api.put(`v0/buckets/${site.bucketId}/objects/web/c.bin`, { body: distinct(10 * KIB) });
  t.is(json(refused).error.code, 'quota_exceeded');
  t.is((await storage(tenant)).usedBytes, 1800 * KIB, 'a lower limit keeps what is stored');

  const bad = await runBerth(['admin', 'set-storage-limit', '--account', tenant.id, '--bytes', 'lots'], env);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /--bytes must be a number of bytes/);
});

test('platform-admin accounts store without a limit', async (t) => {
  const admin = await t0.newAccount('platform-admin');
  const site = await createSite(admin);
  await putFile(admin, site.bucketId, 'web/a.bin', distinct(1500 * KIB));
  t.deepEqual(await storage(admin), {
    usedBytes: 1500 * KIB,
    limitBytes: null,
    databaseReplicaBytes: 0,
    databaseBranchBytes: 0,
  });
});

test('a preview’s branch of a database counts against the storage: one the account has no room for is refused with quota_exceeded', async (t) => {
  const tenant = await t0.newAccount();
  const { site, base, query } = await siteWithDatabase(tenant);
  t.is((await query('CREATE TABLE pictures (data BLOB)')).status, 200);
  t.is((await query('INSERT INTO pictures VALUES (randomblob(200000))')).status, 200);
  for (let i = 0; i < 3; i++) await putFile(tenant, site.bucketId, `web/${i}.bin`, distinct(300 * KIB));
  const declared = await tenant.api.post(`v0/sites/${site.id}/deployments`, {
    json: { files: [{ path: 'web/index.html', content: 'next', contentType: 'text/html' }] },
  });
  t.is(declared.statusCode, 201);
  const deploymentId = json<{ deployment: { id: string } }>(declared).deployment.id;
  const refused = await tenant.api.post(`${base}/query`, { json: { sql: 'SELECT 1', branch: deploymentId } });
  t.is(refused.statusCode, 413);
  t.is(json(refused).error.code, 'quota_exceeded');
  t.regex(json(refused).error.message, /branch of this database needs/);
  t.is((await storage(tenant)).databaseBranchBytes, 0);
  const row = await t0.berth.deps.db('database_branches').where({ site_id: site.id }).first();
  t.is(row, undefined, 'nothing of it is kept');
});
