// A deployment's uploads against the account's storage, through the real API: charged as they arrive
// (the limit holds for the whole deployment), given back when it fails, is cancelled or expires (by
// the periodic job, without the site being touched), and become its files' bytes when it publishes,
// each content counted once. Once nothing references an upload's bytes, the sweeper removes them.
import crypto from 'node:crypto';
import test from 'ava';
import { type TestAccount, type TestBerth, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';
import { blobStored } from './helpers/object-store.ts';
import { until } from './helpers/until.ts';

const KIB = 1024;
const LIMIT = 1024 * KIB;
const DAY = 24 * 3600_000;

// The test's clock runs ahead by `ahead` ms: a day passes without waiting for it.
let ahead = 0;
let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth(
    { accountStorageBytes: LIMIT, blobSweepMs: 500, deploymentExpiryCheckMs: 200 },
    { now: () => new Date(Date.now() + ahead) },
  );
});
test.after.always(async () => {
  await t0?.dispose();
});

const distinct = (bytes: number) => Buffer.concat([Buffer.from(crypto.randomUUID()), Buffer.alloc(bytes - 36, 1)]);
const sha = (body: Buffer | string) => crypto.createHash('sha256').update(body).digest('hex');

interface Deployment {
  id: string;
  status: string;
  missing: string[];
  errors: Array<{ message: string }> | null;
}

async function usedBytes(account: TestAccount): Promise<number> {
  return json<{ usage: { storage: { usedBytes: number } } }>(await account.read.get('v0/accounts/current/usage')).usage
    .storage.usedBytes;
}

async function declare(account: TestAccount, siteId: string, files: Record<string, Buffer | string>) {
  const created = await account.api.post(`v0/sites/${siteId}/deployments`, {
    json: {
      files: Object.entries(files).map(([path, body]) => ({
        path,
        sha256: sha(body),
        size: Buffer.byteLength(body),
        contentType: path.endsWith('.ts') ? 'text/typescript' : 'application/octet-stream',
      })),
    },
  });
  if (created.statusCode !== 201) throw new Error(`create: ${created.statusCode} ${JSON.stringify(created.body)}`);
  return json<{ deployment: Deployment }>(created).deployment;
}

const upload = (account: TestAccount, siteId: string, deploymentId: string, body: Buffer | string) =>
  account.api.put(`v0/sites/${siteId}/deployments/${deploymentId}/files/${sha(body)}`, { body });

async function uploadAll(account: TestAccount, siteId: string, deploymentId: string, bodies: Array<Buffer | string>) {
  for (const body of bodies) {
    const res = await upload(account, siteId, deploymentId, body);
    if (res.statusCode !== 200) throw new Error(`upload: ${res.statusCode} ${JSON.stringify(res.body)}`);
  }
}

const deploymentOf = async (account: TestAccount, siteId: string, id: string) =>
  json<{ deployment: Deployment }>(await account.read.get(`v0/sites/${siteId}/deployments/${id}`)).deployment;

const swept = (body: Buffer) => async () => !(await blobStored(t0.dataDir, sha(body)));

test('the uploads of one deployment together cannot pass the limit: 1.8 MiB against 1 MiB is refused at the fourth 300 KiB', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const bodies = Array.from({ length: 6 }, () => distinct(300 * KIB));
  const deployment = await declare(
    tenant,
    site.id,
    Object.fromEntries(bodies.map((body, i) => [`web/${i}.bin`, body])),
  );
  await uploadAll(tenant, site.id, deployment.id, bodies.slice(0, 3));
  t.is(await usedBytes(tenant), 900 * KIB, 'uploads are charged as they arrive');
  const refused = await upload(tenant, site.id, deployment.id, bodies[3]!);
  t.is(refused.statusCode, 413);
  t.is(json(refused).error.code, 'quota_exceeded');
  t.like(json(refused).error.details, { usedBytes: 900 * KIB, limitBytes: LIMIT, neededBytes: 300 * KIB });
  t.is(await usedBytes(tenant), 900 * KIB);
  // The same bytes sent again cost nothing more.
  t.is((await upload(tenant, site.id, deployment.id, bodies[0]!)).statusCode, 200);
  t.is(await usedBytes(tenant), 900 * KIB);
});

test('a cancelled deployment gives its uploads’ space back, and the sweeper their bytes', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  await putFile(tenant, site.bucketId, 'web/kept.bin', distinct(100 * KIB));
  const bodies = [distinct(300 * KIB), distinct(200 * KIB)];
  const deployment = await declare(tenant, site.id, { 'web/a.bin': bodies[0]!, 'web/b.bin': bodies[1]! });
  await uploadAll(tenant, site.id, deployment.id, bodies);
  t.is(await usedBytes(tenant), 600 * KIB);
  const cancelled = await tenant.api.delete(`v0/sites/${site.id}/deployments/${deployment.id}`);
  t.is(cancelled.statusCode, 200);
  t.is(await usedBytes(tenant), 100 * KIB);
  await until(swept(bodies[0]!), 'the sweeper to remove a cancelled deployment’s upload');
});

test('a failed deployment gives its uploads’ space back, and the sweeper their bytes', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const big = distinct(400 * KIB);
  const broken = 'export default (';
  const deployment = await declare(tenant, site.id, { 'web/big.bin': big, 'api/broken.ts': broken });
  await uploadAll(tenant, site.id, deployment.id, [big, broken]);
  t.is(await usedBytes(tenant), 400 * KIB + Buffer.byteLength(broken));
  const published = await tenant.api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`);
  t.is(published.statusCode, 422);
  t.is(json(published).error.code, 'deployment_failed');
  t.is(await usedBytes(tenant), 0);
  await until(swept(big), 'the sweeper to remove a failed deployment’s upload');
});

test('a published deployment’s bytes are its files’ distinct bytes, counted once with what the account held', async (t) => {
  const tenant = await t0.newAccount();
  const site = await createSite(tenant);
  const held = distinct(200 * KIB);
  await putFile(tenant, site.bucketId, 'web/held.bin', held);
  const [shared, own] = [distinct(300 * KIB), distinct(100 * KIB)];
  const deployment = await declare(tenant, site.id, {
    'web/a.bin': shared,
    'web/b.bin': shared,
    'web/c.bin': own,
    'web/copy-of-held.bin': held,
  });
  t.deepEqual(deployment.missing.sort(), [sha(shared), sha(own)].sort());
  await uploadAll(tenant, site.id, deployment.id, [shared, own]);
  t.is(await usedBytes(tenant), 600 * KIB);
  const published = await tenant.api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`);
  t.is(published.statusCode, 200);
  t.is(await usedBytes(tenant), 600 * KIB);
  const rows = await t0.berth.deps.db('deployment_uploads').where({ deployment_id: deployment.id }).count({ n: '*' });
  t.is(Number((rows[0] as { n: number | string }).n), 0, 'a published deployment keeps no upload rows');
});

// Serial, so it runs before the others: it moves the clock on a day.
test.serial(
  'an upload a day old expires by itself, without the site being touched: its space given back, its bytes swept',
  async (t) => {
    const tenant = await t0.newAccount();
    const site = await createSite(tenant);
    const body = distinct(300 * KIB);
    const deployment = await declare(tenant, site.id, { 'web/late.bin': body });
    await uploadAll(tenant, site.id, deployment.id, [body]);
    t.is(await usedBytes(tenant), 300 * KIB);
    ahead += DAY + 60_000;
    const expired = await until(async () => {
      const now = await deploymentOf(tenant, site.id, deployment.id);
      return now.status === 'FAILED' && now;
    }, 'the open deployment to expire');
    t.regex(expired.errors?.[0]?.message ?? '', /not published within a day/);
    t.is(await usedBytes(tenant), 0);
    await until(swept(body), 'the sweeper to remove an expired deployment’s upload');
  },
);
