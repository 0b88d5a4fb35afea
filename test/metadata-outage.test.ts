// The metadata server lost while Berth runs, and back: requests that need it answer 503
// metadata_unavailable within 10 s, never a stack or a hang; static files and warm functions keep
// answering from the cache; /readyz names the failing check; and Berth recovers by itself. Runs in the
// suite's PostgreSQL pass, on a cluster of its own that the test stops and starts (the suite's is shared).
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import got from 'got';
import pg from 'pg';
import { deployFixture, json, makeDataDir, putFile } from './helpers/berth.ts';
import { startServe } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';
import { type Cluster, startCluster } from './helpers/postgres-cluster.ts';
import { onPostgres } from './helpers/postgres.ts';

const onItsOwnCluster = onPostgres ? test : test.skip;

interface Answer {
  what: string;
  status: number;
  code?: string;
  ms: number;
}

onItsOwnCluster(
  'PostgreSQL stopped and started under load: cached reads go on, the rest is 503 metadata_unavailable, then all recovers',
  async (t) => {
    const cluster: Cluster = await startCluster();
    t.teardown(() => cluster.stop());
    const admin = new pg.Client({ connectionString: cluster.adminUrl });
    await admin.connect();
    await admin.query("CREATE ROLE berth_outage LOGIN PASSWORD 'outage-password'");
    await admin.query('CREATE DATABASE berth_outage OWNER berth_outage');
    await admin.end();

    const dataDir = await makeDataDir(t);
    const server = await startServe({
      BERTH_DATA_DIR: dataDir,
      BERTH_DATABASE_URL: `postgres://berth_outage:outage-password@127.0.0.1:${cluster.port}/berth_outage`,
    });
    t.teardown(() => void server.child.kill('SIGKILL'));
    const owner = ownerOf(server);
    const site = json<{ id: string; subdomain: string; bucketId: string }>(
      await owner.api.post('v0/sites', { json: { accountId: owner.id, name: 'outage' } }),
    );
    await putFile(owner, site.bucketId, 'web/index.html', '<h1>still here</h1>', 'text/html');
    await deployFixture(owner, site.bucketId, 'echo');
    const port = new URL(server.url).port;
    const hosted = got.extend({
      prefixUrl: server.url,
      headers: { host: `${site.subdomain}.localhost:${port}` },
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: 15_000 },
    });
    const control = got.extend({
      prefixUrl: server.url,
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: 15_000 },
      responseType: 'json',
    });

    // Warm: the page and the function are in the cache, a worker runs.
    t.is((await hosted.get('')).body, '<h1>still here</h1>');
    t.is((await hosted.get('api/echo')).statusCode, 200);

    const answers: Answer[] = [];
    const timed = async (what: string, send: () => Promise<{ statusCode: number; body: unknown }>) => {
      const started = Date.now();
      // A request that got no answer at all is recorded as status 0, and fails the checks below.
      const res = await send().catch(() => ({ statusCode: 0, body: '' }));
      const body =
        typeof res.body === 'string'
          ? (() => {
              try {
                return JSON.parse(res.body as string);
              } catch {
                return {};
              }
            })()
          : res.body;
      answers.push({
        what,
        status: res.statusCode,
        code: (body as { error?: { code?: string } })?.error?.code,
        ms: Date.now() - started,
      });
      return res;
    };
    let loading = true;
    const load = (async () => {
      while (loading) {
        await Promise.all([
          timed('page', () => hosted.get('')),
          timed('function', () => hosted.get('api/echo')),
          timed('api', () => owner.read.get(`v0/sites/${site.id}`)),
        ]);
        await sleep(50);
      }
    })();

    await sleep(300);
    cluster.pause();
    const pausedAt = answers.length;
    await sleep(2000);

    const refused = await timed('api', () => owner.read.get(`v0/sites/${site.id}`));
    t.is(refused.statusCode, 503);
    t.is(json(refused).error.code, 'metadata_unavailable');
    t.false(JSON.stringify(refused.body).includes('ECONNREFUSED'), 'no internals in the answer');
    const upload = await timed('upload', () =>
      owner.api.put(`v0/buckets/${site.bucketId}/objects/web/during.txt`, { body: 'written during the outage' }),
    );
    t.is(upload.statusCode, 503);
    t.is(json(upload).error.code, 'metadata_unavailable');
    const ready = await control.get('readyz');
    t.is(ready.statusCode, 503);
    const checks = (ready.body as { checks: Record<string, string> }).checks;
    t.regex(checks.metadata!, /^the metadata database is not answering/);
    t.is(checks.blobs, 'ok');
    t.false(JSON.stringify(ready.body).includes(String(cluster.port)), 'readyz does not show where the server is');

    cluster.resume();
    const resumedAt = answers.length;
    let back = false;
    for (let i = 0; i < 100 && !back; i++) {
      back =
        (await control.get('readyz')).statusCode === 200 &&
        (await owner.read.get(`v0/sites/${site.id}`)).statusCode === 200;
      if (!back) await sleep(100);
    }
    t.true(back, 'Berth answers again once PostgreSQL is back');
    await sleep(500);
    loading = false;
    await load;

    const during = answers.slice(pausedAt, resumedAt);
    t.true(
      during.some((a) => a.what === 'api' && a.status === 503),
      'the load met the outage',
    );
    for (const answer of answers) {
      if (answer.what === 'page' || answer.what === 'function')
        t.is(answer.status, 200, `${answer.what} answered from the cache: ${JSON.stringify(answer)}`);
      else
        t.true(
          answer.status === 200 || (answer.status === 503 && answer.code === 'metadata_unavailable'),
          JSON.stringify(answer),
        );
      t.true(answer.ms < 10_000, `answered within 10 s: ${JSON.stringify(answer)}`);
    }
    const errors = server
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":50'));
    t.deepEqual(errors, [], 'an outage is logged as warnings, not as errors or bugs');

    // Nothing of the refused upload was stored; new writes work and are served.
    t.is((await hosted.get('during.txt')).statusCode, 404);
    await putFile(owner, site.bucketId, 'web/after.txt', 'written after');
    t.is((await hosted.get('after.txt')).body, 'written after');
  },
);
