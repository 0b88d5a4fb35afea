import test from 'ava';
import { json, type TestBerth, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type BucketBody = { id: string; appAccountId: string; name: string; createdAt: string; updatedAt: string };

test('create, get and rename a bucket', async (t) => {
  const account = await t0.newAccount();
  const created = await account.api.post('v0/buckets', { json: { accountId: account.id, name: ' Photos ' } });
  t.is(created.statusCode, 201);
  const bucket = json<BucketBody>(created);
  t.is(bucket.name, 'Photos');
  t.is(bucket.appAccountId, account.id);
  t.truthy(Date.parse(bucket.createdAt));

  const got = await account.read.get(`v0/buckets/${bucket.id}`);
  t.deepEqual(got.body, bucket);

  const renamed = await account.api.post(`v0/buckets/${bucket.id}`, { json: { name: 'Pictures' } });
  t.is(renamed.statusCode, 200);
  t.is(json<BucketBody>(renamed).name, 'Pictures');
  t.true(json<BucketBody>(renamed).updatedAt > bucket.updatedAt);
});

test('bucket input is validated', async (t) => {
  const account = await t0.newAccount();
  for (const body of [
    { accountId: account.id },
    { accountId: account.id, name: '' },
    { accountId: 'x', name: 'ok' },
    { name: 'ok' },
  ]) {
    const res = await account.api.post('v0/buckets', { json: body });
    t.is(res.statusCode, 400, JSON.stringify(body));
    t.is(json(res).error.code, 'invalid_request');
  }
  const badId = await account.read.get('v0/buckets/not-a-uuid');
  t.is(badId.statusCode, 400);
  t.is(json(badId).error.code, 'invalid_request');
  const missing = await account.read.get(`v0/buckets/${crypto.randomUUID()}`);
  t.is(missing.statusCode, 404);
  t.is(json(missing).error.code, 'not_found');
});

test('list is per account, newest first, paginated', async (t) => {
  const account = await t0.newAccount();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    ids.push(
      json<BucketBody>(await account.api.post('v0/buckets', { json: { accountId: account.id, name: `B${i}` } })).id,
    );
  }
  const page = await account.read.get('v0/buckets', {
    searchParams: { accountId: account.id, limit: '2', offset: '1' },
  });
  t.is(page.statusCode, 200);
  const body = json<{ buckets: BucketBody[]; pagination: unknown }>(page);
  t.deepEqual(
    body.buckets.map((b) => b.id),
    [ids[3], ids[2]],
  );
  t.deepEqual(body.pagination, { hasMore: true, nextOffset: 3 });
  const last = await account.read.get('v0/buckets', { searchParams: { accountId: account.id, offset: '4' } });
  t.deepEqual(json<{ buckets: BucketBody[]; pagination: unknown }>(last).pagination, {
    hasMore: false,
    nextOffset: null,
  });

  const missingAccount = await account.read.get('v0/buckets');
  t.is(missingAccount.statusCode, 400);
  t.is(json(missingAccount).error.code, 'invalid_request');
  const repeated = await account.read.get(`v0/buckets?accountId=${account.id}&accountId=${account.id}`);
  t.is(repeated.statusCode, 400);

  const other = await t0.newAccount();
  const foreign = await other.read.get('v0/buckets', { searchParams: { accountId: account.id } });
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
  const foreignCreate = await other.api.post('v0/buckets', { json: { accountId: account.id, name: 'Sneaky' } });
  t.is(foreignCreate.statusCode, 404);
  const stillFive = await account.read.get('v0/buckets', { searchParams: { accountId: account.id } });
  t.is(json<{ buckets: unknown[] }>(stillFive).buckets.length, 5);
});
