// A database's replica is bounded (BERTH_DATABASE_REPLICA_MAX_BYTES): a tenant churning writes past the
// bound leaves a replica within it plus one generation's slack, the oldest history dropped first (the
// restore range's start moves forward), and the account's usage shows what its replicas take. On the
// embedded defaults replicas go to a folder, on the shared backends to the object store.
import test from 'ava';
import { json, startTestBerth } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { until } from './helpers/until.ts';

const MAX_BYTES = 2 * 1024 * 1024;
const BLOB = 128 * 1024;

interface Points {
  earliest: string | null;
  latest: string | null;
  replication: { replicaBytes: number; replicaMaxBytes: number } | null;
}

test('churning writes past the bound leave the replica within it, its oldest history dropped, and usage counts it', async (t) => {
  t.timeout(240_000);
  const b = await startTestBerth({ databaseReplicaMaxBytes: MAX_BYTES });
  t.teardown(() => b.dispose());
  const { base, query } = await siteWithDatabase(b.owner);
  t.is((await query('CREATE TABLE churn (id INTEGER PRIMARY KEY, body BLOB)')).status, 200);
  t.is((await query('INSERT INTO churn (id, body) VALUES (1, randomblob(?))', [BLOB])).status, 200);
  const points = async () => json<Points>(await b.owner.read.get(`${base}/restore-points`));
  const first = await until(async () => {
    const p = await points();
    return p.earliest !== null && p.latest !== null && p;
  }, 'the first writes to reach the replica');
  t.is(first.replication?.replicaMaxBytes, MAX_BYTES);

  // Each update rewrites the row with bytes that do not compress: 8 times the bound in all, while the
  // database itself stays one row.
  const updates = (8 * MAX_BYTES) / BLOB;
  for (let i = 0; i < updates; i++) {
    t.is((await query('UPDATE churn SET body = randomblob(?) WHERE id = 1', [BLOB])).status, 200);
    if (i % 16 === 15) await new Promise((resolve) => setTimeout(resolve, 1100));
  }
  // Once the bound has been applied after the churn: the oldest history is gone and what stays is
  // within the bound and one generation's slack (a copy of the database and what it shipped between two
  // checks: here at most the database again, and an eighth of the bound).
  const slack = 2 * BLOB + MAX_BYTES / 8 + 64 * 1024;
  const after = await until<Points>(
    async () => {
      const p = await points();
      return (
        (p.replication &&
          p.earliest &&
          p.earliest > first.earliest! &&
          p.replication.replicaBytes <= MAX_BYTES + slack &&
          p) ||
        undefined
      );
    },
    'the replica to be brought back within its bound',
    { ms: 90_000, every: 1000 },
  );
  t.true(after.replication!.replicaBytes > 0);
  t.true(after.replication!.replicaBytes <= MAX_BYTES + slack, `${after.replication!.replicaBytes} bytes`);
  t.true(Date.parse(after.earliest!) > Date.parse(first.earliest!), `${after.earliest} after ${first.earliest}`);

  // The replica keeps what it holds restorable: the newest moment, with the last update's row.
  const restored = await b.owner.api.post(`${base}/restore`, { json: { at: after.latest } });
  t.is(restored.statusCode, 200, JSON.stringify(restored.body));
  const rows = await query('SELECT length(body) AS n FROM churn');
  t.deepEqual(rows.body.result[0]!.results, [{ n: BLOB }]);

  // The account's usage shows the bytes its replicas take.
  const usage = await until(async () => {
    const { usage } = json<{ usage: { storage: { databaseReplicaBytes: number } } }>(
      await b.owner.read.get('v0/accounts/current/usage'),
    );
    return usage.storage.databaseReplicaBytes > 0 && usage.storage;
  }, 'the usage to show the replica');
  t.true(usage.databaseReplicaBytes <= MAX_BYTES + slack, `${usage.databaseReplicaBytes} bytes`);
  // Another account's usage does not.
  const other = await b.newAccount();
  const { usage: theirs } = json<{ usage: { storage: { databaseReplicaBytes: number } } }>(
    await other.read.get('v0/accounts/current/usage'),
  );
  t.is(theirs.storage.databaseReplicaBytes, 0);
});
