// Secrets: encrypted at rest, never echoed, read back only by get-value, which is audited, and
// readable by the site's own functions through ctx.secrets.
import fs from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { type TestBerth, createSite, deployFixture, json, startTestBerth } from './helpers/berth.ts';
import { storedMetadata } from './helpers/postgres.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

const VALUE = 'sk-live-4f9c2e7a-very-secret';

test('set never echoes the value; get-value returns it and records who read it', async (t) => {
  const site = await createSite(t0.owner);
  const set = await t0.owner.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'STRIPE_KEY', value: VALUE } });
  t.is(set.statusCode, 200);
  t.false(JSON.stringify(set.body).includes(VALUE));
  t.deepEqual(Object.keys(json<{ secret: object }>(set).secret).sort(), ['name', 'updatedAt']);

  const list = json<{ secrets: Array<{ name: string }> }>(await t0.owner.read.get(`v0/sites/${site.id}/secrets`));
  t.deepEqual(
    list.secrets.map((s) => s.name),
    ['STRIPE_KEY'],
  );
  t.false(JSON.stringify(list).includes(VALUE));

  const got = await t0.owner.read.get(`v0/sites/${site.id}/secrets/STRIPE_KEY`);
  t.is(got.statusCode, 200);
  t.deepEqual(json(got), { secret: { name: 'STRIPE_KEY', value: VALUE } });
  t.is(got.headers['cache-control'], 'private, no-store');
  // The channel comes from the credential the front door saw, never from a header the client sets.
  await t0.owner.api.get(`v0/sites/${site.id}/secrets/STRIPE_KEY`, { headers: { 'berth-client': 'dashboard' } });

  type Entry = { secretName: string; keyId: string; via: string; accessedAt: string };
  const logs = json<{ accessLogs: Entry[] }>(
    await t0.owner.read.get(`v0/sites/${site.id}/secret_access_logs`),
  ).accessLogs;
  t.is(logs.length, 2);
  t.like(logs[0], { secretName: 'STRIPE_KEY', via: 'API' });
  t.like(logs[1], { secretName: 'STRIPE_KEY', via: 'API' });
  t.not(logs[0]!.keyId, logs[1]!.keyId, 'each entry names the key that read the value');
  t.truthy(Date.parse(logs[1]!.accessedAt));
});

test('values are encrypted at rest under a private master key', async (t) => {
  const site = await createSite(t0.owner);
  await t0.owner.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'DB_PASSWORD', value: VALUE } });
  t.false((await storedMetadata(t0.dataDir)).includes(VALUE), 'the value is not in the metadata in clear');
  const key = await fs.stat(path.join(t0.dataDir, 'master.key'));
  t.is(key.mode & 0o777, 0o600);
  t.is(key.size, 32);
});

test('replace, delete, and the rules for names and values', async (t) => {
  const site = await createSite(t0.owner);
  await t0.owner.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'TOKEN', value: 'one' } });
  const replaced = await t0.owner.api.post(`v0/sites/${site.id}/secrets/TOKEN`, { json: { value: 'two' } });
  t.is(replaced.statusCode, 200);
  t.is(
    json<{ secret: { value: string } }>(await t0.owner.read.get(`v0/sites/${site.id}/secrets/TOKEN`)).secret.value,
    'two',
  );
  const missing = await t0.owner.api.post(`v0/sites/${site.id}/secrets/NOPE`, { json: { value: 'x' } });
  t.is(missing.statusCode, 404);
  t.is(json(missing).error.code, 'not_found');

  for (const [body, code] of [
    [{ name: '1BAD', value: 'x' }, 'invalid_secret_name'],
    [{ name: 'has-dash', value: 'x' }, 'invalid_secret_name'],
    [{ name: 'A'.repeat(129), value: 'x' }, 'invalid_secret_name'],
    [{ name: 'EMPTY', value: '' }, 'invalid_secret_value'],
    [{ name: 'HUGE', value: 'x'.repeat(64 * 1024 + 1) }, 'invalid_secret_value'],
    [{ name: 'NUMBER', value: 42 }, 'invalid_request'],
  ] as const) {
    const res = await t0.owner.api.post(`v0/sites/${site.id}/secrets`, { json: body });
    t.is(res.statusCode, 400, JSON.stringify(body).slice(0, 40));
    t.is(json(res).error.code, code);
  }
  t.is(
    (
      await t0.owner.api.post(`v0/sites/${site.id}/secrets`, {
        json: { name: 'A'.repeat(128), value: 'x'.repeat(64 * 1024) },
      })
    ).statusCode,
    200,
  );

  const deleted = await t0.owner.api.delete(`v0/sites/${site.id}/secrets/TOKEN`);
  t.deepEqual(json(deleted), { deleted: true });
  const gone = await t0.owner.read.get(`v0/sites/${site.id}/secrets/TOKEN`);
  t.is(gone.statusCode, 404);
  t.is((await t0.owner.api.delete(`v0/sites/${site.id}/secrets/TOKEN`)).statusCode, 404);
});

test('functions read their own site’s secrets; a deleted secret reads as null', async (t) => {
  const site = await createSite(t0.owner);
  const other = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'secret');
  await deployFixture(t0.owner, other.bucketId, 'secret');
  await t0.owner.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'API_TOKEN', value: VALUE } });

  const read = async (subdomain: string, name = 'API_TOKEN') =>
    JSON.parse((await t0.site(subdomain).get('api/secret', { searchParams: { name } })).body) as {
      value: string | null;
    };
  t.is((await read(site.subdomain)).value, VALUE);
  t.is((await read(other.subdomain)).value, null, 'another site’s function cannot read it');
  t.is((await read(site.subdomain, 'not a name')).value, null);

  await t0.owner.api.delete(`v0/sites/${site.id}/secrets/API_TOKEN`);
  t.is((await read(site.subdomain)).value, null);
  const logs = json<{ accessLogs: unknown[] }>(await t0.owner.read.get(`v0/sites/${site.id}/secret_access_logs`));
  t.is(logs.accessLogs.length, 0, 'runtime reads are not API retrievals');
});
