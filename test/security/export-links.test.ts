// Signed export links: a tampered signature is refused with 403 whatever its bytes, never a 500.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import got from 'got';
import { type TestBerth, createSite, json, startTestBerth } from '../helpers/berth.ts';
import { safeEqual } from '../../control-plane/services/safe-equal.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

async function downloadUrl(): Promise<string> {
  const site = await createSite(t0.owner);
  const db = json<{ database: { id: string } }>(await t0.owner.api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  let record = json<{ export: { id: string; status: string; downloadUrl?: string } }>(
    await t0.owner.api.post(`${base}/exports`),
  ).export;
  for (let i = 0; i < 100 && record.status === 'PROCESSING'; i++) {
    await sleep(50);
    record = json<{ export: typeof record }>(await t0.owner.api.post(`${base}/exports/${record.id}/reconcile`)).export;
  }
  if (!record.downloadUrl) throw new Error(`export ended ${record.status}`);
  return record.downloadUrl;
}

test('a signature of the right length in characters but not in bytes answers 403 invalid_download_link', async (t) => {
  const url = new URL(await downloadUrl());
  const genuine = url.searchParams.get('signature')!;
  t.is((await got.get(url, { throwHttpErrors: false })).statusCode, 200);

  for (const forged of ['é'.repeat(genuine.length), `${genuine.slice(0, -1)}€`, '', genuine.slice(1)]) {
    url.searchParams.set('signature', forged);
    const res = await got.get(url, { throwHttpErrors: false });
    t.is(res.statusCode, 403, `signature ${JSON.stringify(forged)}`);
    t.is(JSON.parse(res.body).error.code, 'invalid_download_link');
  }
  url.searchParams.set('signature', genuine);
  url.searchParams.set('expires', 'soon');
  t.is(JSON.parse((await got.get(url, { throwHttpErrors: false })).body).error.code, 'invalid_download_link');
});

test('safeEqual compares any two strings without throwing', (t) => {
  t.true(safeEqual('abc', 'abc'));
  t.true(safeEqual('', ''));
  t.false(safeEqual('abc', 'abd'));
  t.false(safeEqual('abc', 'ab'));
  t.false(safeEqual('aé', 'aa'));
  t.false(safeEqual('', 'a'));
});
