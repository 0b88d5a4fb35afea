import { Readable } from 'node:stream';
import test from 'ava';
import { json, type TestBerth, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

test('current account resolves the key’s own account', async (t) => {
  const res = await t0.owner.read.get('v0/accounts/current');
  t.is(res.statusCode, 200);
  const body = json<Record<string, unknown>>(res);
  t.is(body.id, t0.owner.id);
  t.is(body.name, 'Owner');
  t.is(body.plan, 'platform-admin');
});

test('an account is readable by its own keys and invisible to others', async (t) => {
  const other = await t0.newAccount();
  const own = await t0.owner.read.get(`v0/accounts/${t0.owner.id}`);
  t.is(own.statusCode, 200);
  const foreign = await other.api.get(`v0/accounts/${t0.owner.id}`);
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
  const missing = await t0.owner.api.get(`v0/accounts/${crypto.randomUUID()}`);
  t.is(missing.statusCode, 404);
});

test('renaming trims the name and enforces 1–100 characters', async (t) => {
  const account = await t0.newAccount();
  const ok = await account.api.post(`v0/accounts/${account.id}`, { json: { name: '  Renamed  ' } });
  t.is(ok.statusCode, 200);
  t.is(json<{ name: string }>(ok).name, 'Renamed');
  const hundred = await account.api.post(`v0/accounts/${account.id}`, { json: { name: 'é'.repeat(100) } });
  t.is(hundred.statusCode, 200);

  for (const name of ['', '   ', 'x'.repeat(101), 42]) {
    const res = await account.api.post(`v0/accounts/${account.id}`, { json: { name } });
    t.is(res.statusCode, 400, `name ${JSON.stringify(name)}`);
    t.is(json(res).error.code, 'invalid_request');
  }
  const missing = await account.api.post(`v0/accounts/${account.id}`, { json: {} });
  t.is(missing.statusCode, 400);
  t.regex(json(missing).error.message, /name/);

  const foreign = await account.api.post(`v0/accounts/${t0.owner.id}`, { json: { name: 'Hijack' } });
  t.is(foreign.statusCode, 404);
  const unchanged = await t0.owner.api.get('v0/accounts/current');
  t.is(json<{ name: string }>(unchanged).name, 'Owner');
});

test('a JSON body past the limit answers 413, whether its length is sent or it comes chunked', async (t) => {
  const tooLong = Buffer.from(JSON.stringify({ name: 'x'.repeat(t0.config.maxJsonBytes) }));
  const sized = await t0.owner.api.post(`v0/accounts/${t0.owner.id}`, {
    body: tooLong,
    headers: { 'content-type': 'application/json' },
  });
  t.is(sized.statusCode, 413);
  t.is(json(sized).error.code, 'payload_too_large');
  const chunked = await t0.owner.api.post(`v0/accounts/${t0.owner.id}`, {
    body: Readable.from([tooLong.subarray(0, 1000), tooLong.subarray(1000)]),
    headers: { 'content-type': 'application/json' },
  });
  t.is(chunked.statusCode, 413);
  t.is(json(chunked).error.code, 'payload_too_large');
});

test('malformed JSON and unknown fields are rejected with clear codes', async (t) => {
  const bad = await t0.owner.api.post(`v0/accounts/${t0.owner.id}`, {
    body: '{"name":',
    headers: { 'content-type': 'application/json' },
  });
  t.is(bad.statusCode, 400);
  t.is(json(bad).error.code, 'invalid_json');
  const extra = await t0.owner.api.post(`v0/accounts/${t0.owner.id}`, { json: { name: 'Owner', plan: 'free' } });
  t.is(extra.statusCode, 400);
  t.regex(json(extra).error.message, /unknown field/);
});
