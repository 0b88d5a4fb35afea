// Each escape is tried from a real function in real Deno and must fail, while a function of another
// site keeps answering throughout.
import { Readable } from 'node:stream';
import test from 'ava';
import { type TestBerth, createSite, deployFixture, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
let bystander: { subdomain: string; bucketId: string };

test.before(async () => {
  // Time enough to fill the heap on a busy machine, so the memory cap, not the clock, stops that test.
  t0 = await startTestBerth({ functionTimeoutMs: 3000, functionHeapMb: 64, maxFunctionBodyBytes: 1024 });
  bystander = await createSite(t0.owner);
  await deployFixture(t0.owner, bystander.bucketId, 'echo');
});
test.after.always(async () => {
  await t0?.dispose();
});

async function bystanderAnswers(t: { is(a: unknown, b: unknown, m?: string): void }) {
  const res = await t0.site(bystander.subdomain).get('api/echo');
  t.is(res.statusCode, 200, 'another site’s function keeps answering');
}

test('files, environment, processes, FFI, listeners, host imports and private networks are out of reach', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'escapes');
  const target = `${t0.url}/healthz`;
  const res = await t0.site(site.subdomain).get('api/escapes', { searchParams: { target } });
  t.is(res.statusCode, 200);
  const results = JSON.parse(res.body) as Record<string, string>;
  // Refused by permission checks, before any file is opened or any packet leaves; fetches by the
  // egress proxy, the one address the worker may connect to (a TypeError, as fetch's network errors).
  t.deepEqual(results, {
    readFile: 'NotCapable',
    writeFile: 'NotCapable',
    env: 'NotCapable',
    run: 'NotCapable',
    ffi: 'NotCapable',
    listen: 'NotCapable',
    listenLoopback: 'NotCapable',
    importHostFile: 'TypeError',
    fetchTarget: 'TypeError',
    fetchLocalhost: 'TypeError',
    fetchPrivate: 'TypeError',
    fetchMetadata: 'TypeError',
    fetchIpv6UniqueLocal: 'TypeError',
    fetchMapped: 'TypeError',
    connectTarget: 'NotCapable',
    connectIpv6LinkLocal: 'NotCapable',
    connectTls: 'NotCapable',
    resolveDns: 'NotCapable',
    localStorage: 'removed',
  });
  await bystanderAnswers(t);
});

test('a runaway loop is stopped at the wall-clock limit with 504, and the function recovers', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'runaway');
  const loop = t0.site(site.subdomain).get('api/runaway', { searchParams: { mode: 'loop' } });
  await bystanderAnswers(t);
  const res = await loop;
  t.is(res.statusCode, 504);
  t.is(JSON.parse(res.body).error.code, 'function_timeout');
  const after = await t0.site(site.subdomain).get('api/runaway');
  t.is(after.statusCode, 200);
  t.is(after.body, 'fine');
});

test('a function past its heap cap is stopped with a stable code, and a fresh worker replaces it', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'runaway');
  const res = await t0.site(site.subdomain).get('api/runaway', { searchParams: { mode: 'heap' } });
  t.is(res.statusCode, 502);
  t.regex(JSON.parse(res.body).error.code, /^function_(crashed|memory_exceeded)$/);
  await bystanderAnswers(t);
  t.is((await t0.site(site.subdomain).get('api/runaway')).body, 'fine');
});

test('a worker that exits is replaced on the next request', async (t) => {
  const site = await createSite(t0.owner);
  await deployFixture(t0.owner, site.bucketId, 'runaway');
  const res = await t0.site(site.subdomain).get('api/runaway', { searchParams: { mode: 'exit' } });
  t.is(res.statusCode, 502);
  t.is(JSON.parse(res.body).error.code, 'function_crashed');
  t.is((await t0.site(site.subdomain).get('api/runaway')).body, 'fine');
});

test('request bodies past the configured limit answer 413 before the function runs', async (t) => {
  const ok = await t0.site(bystander.subdomain).post('api/echo', { body: Buffer.alloc(1024, 1) });
  t.is(ok.statusCode, 200);
  const res = await t0.site(bystander.subdomain).post('api/echo', { body: Buffer.alloc(1025, 1) });
  t.is(res.statusCode, 413);
  t.is(JSON.parse(res.body).error.code, 'payload_too_large');
  // Chunked, the size is known only once the limit has passed.
  const chunked = await t0
    .site(bystander.subdomain)
    .post('api/echo', { body: Readable.from([Buffer.alloc(1000, 1), Buffer.alloc(1000, 1)]) });
  t.is(chunked.statusCode, 413);
  t.is(JSON.parse(chunked.body).error.code, 'payload_too_large');
  await bystanderAnswers(t);
});
