// A server killed during a migration run leaves its lease behind; the next start releases it, so the
// database is not blocked until the lease would have expired.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { apiClient, json, makeDataDir } from '../helpers/berth.ts';
import { processesMentioning, startServe } from '../helpers/process.ts';
import { ownerOf } from '../helpers/served.ts';

test('after kill -9 during an apply, the next apply on the restarted server runs at once', async (t) => {
  const dataDir = await makeDataDir(t);
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void server.child.kill('SIGKILL'));
  const owner = ownerOf(server);
  const api = owner.api;
  const site = json<{ id: string }>(await api.post('v0/sites', { json: { accountId: owner.id, name: 'lease' } }));
  const db = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;

  const slow = {
    name: '0001_big.sql',
    sql: 'CREATE TABLE big (x INTEGER); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) INSERT INTO big SELECT x FROM c;',
  };
  const started = Date.now();
  let answered = false;
  const pending = api
    .post(`${base}/migrations/apply`, { json: { migrations: [slow], confirm: true } })
    .finally(() => (answered = true));
  await sleep(500);
  t.false(answered, 'the migration is still running when the server is killed');
  server.child.kill('SIGKILL');
  await server.exited;
  await pending.catch(() => null);
  t.true(Date.now() - started < 5000);

  const again = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(async () => {
    again.child.kill('SIGTERM');
    await again.exited;
  });
  const api2 = apiClient(again.url, owner.writeKey);
  // The killed run committed all of its migration or none of it; the next list says which.
  const receipts = json<{ applied: Array<{ name: string }> }>(await api2.get(`${base}/migrations`)).applied;
  const next = { name: '0002_small.sql', sql: 'CREATE TABLE small (x INTEGER);' };
  const history = receipts.length === 1 ? [slow, next] : [next];
  const applied = await api2.post(`${base}/migrations/apply`, { json: { migrations: history, confirm: true } });
  t.is(applied.statusCode, 200, JSON.stringify(applied.body));
  t.deepEqual(json<{ appliedNames: string[] }>(applied).appliedNames, ['0002_small.sql']);
  t.true(again.output().includes('"msg":"released migration leases of the previous process"'));
  t.deepEqual(
    processesMentioning(`--allow-write=${dataDir}/sites/`).length,
    1,
    'the killed server’s database process was stopped; one of the new server’s runs',
  );
});
