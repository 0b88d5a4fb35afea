// Health, readiness and Prometheus metrics through real HTTP, and readable logs on a terminal.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import got from 'got';
import {
  type TestBerth,
  createSite,
  deployFixture,
  json,
  makeDataDir,
  putFile,
  startTestBerth,
} from '../helpers/berth.ts';
import { withBackend } from '../helpers/process.ts';
import { onObjectStore } from '../helpers/object-store.ts';
import { resolveDenoBinary } from '../../runtime-host/deno-binary.ts';

const TOKEN = 'metrics-token-for-the-tests-0123456789';
const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/functions');

/** Samples of a Prometheus text exposition: `name{labels}` → value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const value = (all: Map<string, number>, name: string, labels: Record<string, string> = {}) => {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const [key, v] of all) {
    const [metric, rest = ''] = key.split('{');
    if (metric === name && wanted.every((pair) => rest.includes(pair))) total += v;
  }
  return total;
};

test('healthz answers without a key; readyz checks the metadata, the blob store and Deno, and counts the nodes', async (t) => {
  // Deno reached through a link this test can take away.
  const dir = await makeDataDir(t);
  const deno = path.join(dir, 'deno-link');
  await fs.symlink(resolveDenoBinary(undefined), deno);
  const t0 = await startTestBerth({ denoPath: deno });
  t.teardown(() => t0.dispose());
  const health = await t0.anonymous.get('healthz');
  t.is(health.statusCode, 200);
  t.deepEqual(health.body, { ok: true });
  const ready = await t0.anonymous.get('readyz');
  t.is(ready.statusCode, 200, JSON.stringify(ready.body));
  t.deepEqual(ready.body, {
    ready: true,
    checks: { metadata: 'ok', blobs: 'ok', deno: 'ok' },
    cluster: { roles: ['web', 'database'], nodes: { up: 1, down: 0, stopped: 0 }, databaseNodesUp: 1 },
    replication: 'ok',
  });

  await fs.rm(deno);
  const broken = await t0.anonymous.get('readyz');
  t.is(broken.statusCode, 503);
  const state = json<{ ready: boolean; checks: Record<string, string> }>(broken);
  t.false(state.ready);
  t.like(state.checks, { metadata: 'ok', blobs: 'ok' });
  t.not(state.checks.deno, 'ok');
  t.is((await t0.anonymous.get('healthz')).statusCode, 200, 'still alive');
});

test('metrics are off without a token, refused with a wrong one, and report what the server did', async (t) => {
  const clock = { now: new Date('2026-11-22T10:00:30Z') };
  const t0: TestBerth = await startTestBerth(
    { metricsToken: TOKEN, cronTickMs: 0, functionTimeoutMs: 2000 },
    { now: () => clock.now },
  );
  t.teardown(() => t0.dispose());
  const plain = await startTestBerth();
  t.teardown(() => plain.dispose());
  const off = await plain.anonymous.get('metrics');
  t.is(off.statusCode, 404);
  t.is(json(off).error.code, 'not_found');
  const anonymous = await t0.anonymous.get('metrics');
  t.is(anonymous.statusCode, 401);
  t.is(json(anonymous).error.code, 'unauthorized');
  const wrongKey = await got.get(`${t0.url}/metrics`, {
    headers: { authorization: `Bearer ${t0.owner.writeKey}` },
    throwHttpErrors: false,
  });
  t.is(wrongKey.statusCode, 401, 'an API key is not the metrics token');

  const site = await createSite(t0.owner);
  await putFile(t0.owner, site.bucketId, 'web/index.html', '<p>hello</p>', 'text/html');
  await deployFixture(t0.owner, site.bucketId, 'db');
  await deployFixture(t0.owner, site.bucketId, 'slow');
  await putFile(
    t0.owner,
    site.bucketId,
    'cron/tick.ts',
    await fs.readFile(path.join(FIXTURES, 'tick.ts')),
    'text/typescript',
  );
  await t0.owner.api.post(`v0/sites/${site.id}/databases`);
  const query = `v0/sites/${site.id}/databases`;
  const database = json<{ databases: Array<{ id: string }> }>(await t0.owner.api.get(query)).databases[0]!;
  await t0.owner.api.post(`${query}/${database.id}/query`, {
    json: { sql: 'CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)' },
  });
  t.is((await t0.site(site.subdomain).get('')).statusCode, 200);
  t.is(
    (await t0.site(site.subdomain).post('api/db', { json: { op: 'first', sql: 'SELECT 1 AS one' } })).statusCode,
    200,
  );
  t.is(
    (await t0.site(site.subdomain).get('api/slow?ms=5000')).statusCode,
    504,
    'a function past its time limit is killed',
  );
  clock.now = new Date('2026-11-22T10:01:05Z');
  await t0.berth.scheduler.tick();

  const scrape = await got.get(`${t0.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.regex(String(scrape.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  const all = samples(scrape.body);
  t.true(value(all, 'berth_http_requests_total', { kind: 'site', route: 'web', status: '200' }) >= 1);
  t.true(value(all, 'berth_http_requests_total', { kind: 'site', route: 'api', status: '200' }) >= 1);
  t.true(
    value(all, 'berth_http_requests_total', {
      kind: 'api',
      route: '/v0/sites/:siteId/databases/:databaseId/query',
      status: '200',
    }) >= 1,
    'API routes are labelled by pattern',
  );
  t.true(value(all, 'berth_http_request_duration_seconds_count', { kind: 'site', route: 'api' }) >= 2);
  t.true(value(all, 'berth_workers_started_total') >= 3, 'db, slow and the cron job');
  t.true(value(all, 'berth_cold_start_duration_seconds_count') >= 3);
  t.true(value(all, 'berth_workers_live') >= 1);
  t.is(value(all, 'berth_worker_exits_total', { reason: 'timeout' }), 1);
  t.true(value(all, 'berth_ctx_calls_total', { method: 'db.first' }) >= 1);
  t.true(value(all, 'berth_database_statement_duration_seconds_count', { source: 'function', outcome: 'ok' }) >= 1);
  t.true(value(all, 'berth_database_statement_duration_seconds_count', { source: 'api' }) >= 1);
  t.is(value(all, 'berth_cron_runs_total', { outcome: 'SUCCEEDED' }), 1);
  t.true(value(all, 'berth_bytes_stored') >= '<p>hello</p>'.length);
  t.true(value(all, 'berth_process_resident_memory_bytes') > 0);
  // What the server asked of the services nodes share: the metadata always, the object store when it has one.
  t.true(value(all, 'berth_metadata_queries_total') > 10);
  if (onObjectStore)
    t.true(value(all, 'berth_object_store_requests_total') >= 1, 'the file was stored in the object store');
  else t.is(value(all, 'berth_object_store_requests_total'), 0);
  t.is(value(all, 'berth_channel_calls_total'), 0, 'one node: no database call crossed to another');
  t.false(scrape.body.includes(site.subdomain), 'no tenant names in labels');
});

test('BERTH_METRICS_ADDRESS serves /metrics on a listener of its own, without a token', async (t) => {
  const t0 = await startTestBerth({ metricsAddress: '127.0.0.1:0' });
  t.teardown(() => t0.dispose());
  const url = t0.berth.metricsUrl!;
  t.regex(url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  const scrape = await got.get(url);
  t.regex(scrape.body, /# TYPE berth_http_requests_total counter/);
  const other = await got.get(url.replace('/metrics', '/v0/sites'), { throwHttpErrors: false });
  t.is(other.statusCode, 404, 'nothing else is served there');
  t.is((await t0.anonymous.get('metrics')).statusCode, 404, 'and not on the main port without a token');
});

test('logs are readable lines on a terminal and JSON otherwise', async (t) => {
  const dataDir = await makeDataDir(t);
  const env = { ...process.env, ...(await withBackend({ BERTH_DATA_DIR: dataDir })), BERTH_PORT: '0' };
  const bin = path.resolve(import.meta.dirname, '../../control-plane/cli/berth.js');
  // `script` gives the server a terminal. It is stopped once it has said it listens (or at the latest
  // after 60 s: a fresh machine's first start can be slow).
  const server = spawn('script', ['-qec', `timeout -s TERM -k 3 60 ${process.execPath} ${bin} serve`, os.devNull], {
    env,
  });
  let stdout = '';
  const exited = new Promise((resolve) => server.once('exit', resolve));
  await Promise.race([
    new Promise<void>((resolve) =>
      server.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (/listening/.test(stdout)) resolve();
      }),
    ),
    exited,
  ]);
  server.kill('SIGTERM');
  await exited;
  t.regex(stdout, /INFO.*listening/);
  t.notRegex(stdout, /\{"level":30/);
});
