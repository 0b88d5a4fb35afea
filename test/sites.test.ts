import test from 'ava';
import { json, type TestBerth, createSite, putFile, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type SiteBody = {
  id: string;
  name: string;
  subdomain: string;
  access: string;
  status: string;
  bucketId: string;
  url: string;
  appAccountId: string;
};

test('creating a site without a bucket creates one and generates a subdomain', async (t) => {
  const account = await t0.newAccount();
  const res = await account.api.post('v0/sites', { json: { accountId: account.id, name: '  Café Olé!  ' } });
  t.is(res.statusCode, 201);
  const site = json<SiteBody>(res);
  t.is(site.name, 'Café Olé!');
  t.regex(site.subdomain, /^cafe-ole-[a-z0-9]{6}$/);
  t.is(site.access, 'PUBLIC');
  t.is(site.status, 'ACTIVE');
  t.is(site.appAccountId, account.id);
  t.is(site.url, `http://${site.subdomain}.localhost:${t0.berth.port}/`);
  const bucket = await account.api.get(`v0/buckets/${site.bucketId}`);
  t.is(bucket.statusCode, 200);
  t.is(json<{ name: string }>(bucket).name, 'Café Olé!');

  const detail = await account.read.get(`v0/sites/${site.id}`);
  t.is(detail.statusCode, 200);
  const body = json<SiteBody & { bucket: { id: string }; runtime: { status: string } }>(detail);
  t.is(body.bucket.id, site.bucketId);
  t.is(body.runtime.status, 'NEVER_RECONCILED');
});

test('a name with no letters still gets a valid generated subdomain', async (t) => {
  const site = await createSite(await t0.newAccount(), { name: '!!!' });
  t.regex(site.subdomain, /^site-[a-z0-9]{6}$/);
});

test('a requested subdomain is validated, reserved names and taken names conflict', async (t) => {
  const account = await t0.newAccount();
  const ok = await createSite(account, { subdomain: 'my-site-1' });
  t.is(ok.subdomain, 'my-site-1');

  for (const subdomain of ['ab', 'x'.repeat(64), 'Upper', 'under_score', '-lead', 'trail-', 'dot.ted', 'spa ce']) {
    const res = await account.api.post('v0/sites', { json: { accountId: account.id, name: 'x', subdomain } });
    t.is(res.statusCode, 400, subdomain);
    t.is(json(res).error.code, 'invalid_request');
  }
  t.is((await createSite(account, { subdomain: 'abc' })).subdomain, 'abc');
  t.is((await createSite(account, { subdomain: 'a'.repeat(63) })).subdomain, 'a'.repeat(63));

  const reserved = await account.api.post('v0/sites', { json: { accountId: account.id, name: 'x', subdomain: 'www' } });
  t.is(reserved.statusCode, 409);
  t.is(json(reserved).error.code, 'subdomain_reserved');

  const other = await t0.newAccount();
  const taken = await other.api.post('v0/sites', { json: { accountId: other.id, name: 'x', subdomain: 'my-site-1' } });
  t.is(taken.statusCode, 409);
  t.is(json(taken).error.code, 'subdomain_taken');
});

test('a bucket supports one site; a foreign bucket is not found', async (t) => {
  const account = await t0.newAccount();
  const bucket = json<{ id: string }>(
    await account.api.post('v0/buckets', { json: { accountId: account.id, name: 'Assets' } }),
  );
  const site = await createSite(account, { bucketId: bucket.id });
  t.is(site.bucketId, bucket.id);
  const second = await account.api.post('v0/sites', {
    json: { accountId: account.id, name: 'Second', bucketId: bucket.id },
  });
  t.is(second.statusCode, 409);
  t.is(json(second).error.code, 'bucket_has_site');

  const other = await t0.newAccount();
  const foreign = await other.api.post('v0/sites', {
    json: { accountId: other.id, name: 'Steal', bucketId: bucket.id },
  });
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
});

test('site creation validates its body', async (t) => {
  const account = await t0.newAccount();
  const cases: Array<Record<string, unknown>> = [
    { name: 'no account' },
    { accountId: 'not-a-uuid', name: 'x' },
    { accountId: account.id },
    { accountId: account.id, name: '   ' },
    { accountId: account.id, name: 'x'.repeat(101) },
    { accountId: account.id, name: 'x', access: 'SECRET' },
    { accountId: account.id, name: 'x', bucketId: 'nope' },
  ];
  for (const body of cases) {
    const res = await account.api.post('v0/sites', { json: body });
    t.is(res.statusCode, 400, JSON.stringify(body));
    t.is(json(res).error.code, 'invalid_request');
  }
  const list = await account.read.get('v0/sites', { searchParams: { accountId: account.id } });
  t.is(json<{ sites: unknown[] }>(list).sites.length, 0);
});

test('the free plan caps sites at 10 at creation time; platform admins have no cap', async (t) => {
  const account = await t0.newAccount('free');
  for (let i = 0; i < 10; i++) await createSite(account, { name: `Site ${i}` });
  const eleventh = await account.api.post('v0/sites', { json: { accountId: account.id, name: 'One too many' } });
  t.is(eleventh.statusCode, 422);
  t.is(json(eleventh).error.code, 'site_limit_reached');
  // Existing sites remain usable: updating one is not a creation.
  const list = await account.read.get('v0/sites', { searchParams: { accountId: account.id, limit: '1' } });
  const first = json<{ sites: SiteBody[] }>(list).sites[0]!;
  t.is((await account.api.post(`v0/sites/${first.id}`, { json: { status: 'ARCHIVED' } })).statusCode, 200);
  t.is((await account.api.post('v0/sites', { json: { accountId: account.id, name: 'Still capped' } })).statusCode, 422);

  for (let i = 0; i < 11; i++) await createSite(t0.owner, { name: `Owner site ${i}` });
  t.pass();
});

test('list filters, newest updates first, and pagination', async (t) => {
  const account = await t0.newAccount('builder');
  const a = await createSite(account, { name: 'A', subdomain: `list-a-${account.id.slice(0, 8)}` });
  const b = await createSite(account, { name: 'B' });
  const c = await createSite(account, { name: 'C' });
  await account.api.post(`v0/sites/${a.id}`, { json: { name: 'A2' } });
  await account.api.post(`v0/sites/${b.id}`, { json: { status: 'ARCHIVED' } });

  const all = await account.read.get('v0/sites', { searchParams: { accountId: account.id } });
  t.deepEqual(
    json<{ sites: SiteBody[] }>(all).sites.map((s) => s.id),
    [b.id, a.id, c.id],
  );
  t.deepEqual(json<{ pagination: unknown }>(all).pagination, { hasMore: false, nextOffset: null });

  const page1 = await account.read.get('v0/sites', { searchParams: { accountId: account.id, limit: '2' } });
  t.deepEqual(json<{ pagination: unknown }>(page1).pagination, { hasMore: true, nextOffset: 2 });
  const page2 = await account.read.get('v0/sites', {
    searchParams: { accountId: account.id, limit: '2', offset: '2' },
  });
  t.deepEqual(
    json<{ sites: SiteBody[] }>(page2).sites.map((s) => s.id),
    [c.id],
  );

  const archived = await account.read.get('v0/sites', { searchParams: { accountId: account.id, status: 'ARCHIVED' } });
  t.deepEqual(
    json<{ sites: SiteBody[] }>(archived).sites.map((s) => s.id),
    [b.id],
  );
  const bySub = await account.read.get('v0/sites', { searchParams: { accountId: account.id, subdomain: a.subdomain } });
  t.deepEqual(
    json<{ sites: SiteBody[] }>(bySub).sites.map((s) => s.id),
    [a.id],
  );
  const byBucket = await account.read.get('v0/sites', {
    searchParams: { accountId: account.id, bucketId: c.bucketId },
  });
  t.deepEqual(
    json<{ sites: SiteBody[] }>(byBucket).sites.map((s) => s.id),
    [c.id],
  );

  for (const searchParams of [
    { accountId: account.id, limit: '0' },
    { accountId: account.id, limit: '201' },
    { accountId: account.id, offset: '-1' },
    { accountId: account.id, status: 'DELETED' },
    {},
  ]) {
    const res = await account.read.get('v0/sites', { searchParams });
    t.is(res.statusCode, 400, JSON.stringify(searchParams));
    t.is(json(res).error.code, 'invalid_request');
  }
  const foreign = await account.read.get('v0/sites', { searchParams: { accountId: t0.owner.id } });
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
});

test('update: rename, access, archive and re-activate, reconcile', async (t) => {
  const account = await t0.newAccount();
  const site = await createSite(account);
  const renamed = await account.api.post(`v0/sites/${site.id}`, { json: { name: ' New name ', access: 'PRIVATE' } });
  t.is(renamed.statusCode, 200);
  t.like(json<SiteBody>(renamed), { name: 'New name', access: 'PRIVATE', status: 'ACTIVE', subdomain: site.subdomain });

  const empty = await account.api.post(`v0/sites/${site.id}`, { json: {} });
  t.is(empty.statusCode, 400);
  t.is(json(empty).error.code, 'invalid_request');
  const notTrue = await account.api.post(`v0/sites/${site.id}`, { json: { reconcile: false } });
  t.is(notTrue.statusCode, 400);

  const archived = await account.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  t.is(json<SiteBody>(archived).status, 'ARCHIVED');
  const reconcileArchived = await account.api.post(`v0/sites/${site.id}`, { json: { reconcile: true } });
  t.is(reconcileArchived.statusCode, 409);
  t.is(json(reconcileArchived).error.code, 'site_not_active');

  const reactivated = await account.api.post(`v0/sites/${site.id}`, { json: { status: 'ACTIVE', reconcile: true } });
  t.is(reactivated.statusCode, 200);
  const body = json<SiteBody & { runtime: { status: string; lastReconciledAt: string | null } }>(reactivated);
  t.is(body.status, 'ACTIVE');
  t.is(body.runtime.status, 'RECONCILED');
  t.truthy(body.runtime.lastReconciledAt);
});

test('an archived site keeps its files and serves them again once re-activated', async (t) => {
  const account = await t0.newAccount();
  const site = await createSite(account);
  await putFile(account, site.bucketId, 'web/index.html', 'kept', 'text/plain');
  await account.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });
  t.is((await t0.site(site.subdomain).get('')).statusCode, 404);
  const file = await account.read.get(`v0/buckets/${site.bucketId}/objects/web/index.html`, { responseType: 'text' });
  t.is(file.body, 'kept');
  await account.api.post(`v0/sites/${site.id}`, { json: { status: 'ACTIVE' } });
  const served = await t0.site(site.subdomain).get('');
  t.is(served.statusCode, 200);
  t.is(served.body, 'kept');
});
