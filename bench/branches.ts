// What a preview's branch of a site database costs to make (issue 44): a site whose database holds
// 100 MB, on a server with its defaults (replication to a folder of the data dir). A branch is made on
// its preview's first database call; each is timed here as the query API's first call on it (`branch`)
// less the same call on the database itself. Three ways a branch is made: a copy of the database now (a
// deployment made in the last seconds), the database as it was at a deployment's creation from its
// replica (one made earlier), and an instant's from the replica. Then a call on a branch already made.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Got } from 'got';
import { startServe, stopAll } from './harness.ts';

const TARGET_BYTES = 100 * 1000 * 1000;
/** Rows of 100 kB, 100 at a time: 10 MB a statement. */
const ROW_BYTES = 100_000;
const ROWS_PER_STATEMENT = 100;
/** Past the provider's "recent" bound (local/branches.ts), a deployment's branch comes from the replica. */
const PAST_RECENT_MS = 11_000;

interface Envelope {
  success: boolean;
  errors: Array<{ message: string }>;
  result: Array<{ results: Array<Record<string, unknown>> }>;
}

async function main() {
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-branches-'));
  try {
    const { api, accountId } = await startServe('berth serve', work, {});
    const site = await api.post('v0/sites', { json: { accountId, name: 'branches' } }).json<{ id: string }>();
    const { database } = await api.post(`v0/sites/${site.id}/databases`).json<{ database: { id: string } }>();
    const base = `v0/sites/${site.id}/databases/${database.id}`;
    const query = async (sql: string, branch?: string): Promise<number> => {
      const started = performance.now();
      const answer = await api
        .post(`${base}/query`, { json: { sql, ...(branch ? { branch } : {}) }, throwHttpErrors: false })
        .json<Envelope & { error?: { message: string } }>();
      if (answer.error || !answer.success)
        throw new Error(`${sql}: ${answer.error?.message ?? answer.errors[0]?.message}`);
      return performance.now() - started;
    };
    await query('CREATE TABLE pictures (id INTEGER PRIMARY KEY, data BLOB)');
    // The replica's first full copy is made before the load: writes made before it are not confirmed.
    await waitForReplica(api, base, Date.now());
    for (let written = 0; written < TARGET_BYTES; written += ROW_BYTES * ROWS_PER_STATEMENT)
      await query(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS_PER_STATEMENT}) INSERT INTO pictures (data) SELECT randomblob(${ROW_BYTES}) FROM n`,
      );
    const { sizeBytes } = (
      await api.get(`v0/sites/${site.id}/databases`).json<{ databases: Array<{ sizeBytes: number }> }>()
    ).databases[0]!;
    // Branches from the replica are of moments it holds: after its first full copy of the database.
    const instant = await waitForReplica(api, base, Date.now());
    const earlier = await deployment(api, site.id);
    await sleep(PAST_RECENT_MS);

    const onDatabase = await query('SELECT count(*) FROM pictures');
    const fromHistory = (await query('SELECT count(*) FROM pictures', earlier)) - onDatabase;
    const { databaseBranch } = (
      await api
        .get(`v0/sites/${site.id}/deployments/${earlier}`)
        .json<{ deployment: { databaseBranch: { madeFrom: string } } }>()
    ).deployment;
    if (databaseBranch.madeFrom !== 'history') throw new Error(`made from ${databaseBranch.madeFrom}, not the replica`);
    const fromInstant = (await query('SELECT count(*) FROM pictures', `t${instant}`)) - onDatabase;
    const recent = await deployment(api, site.id);
    const copied = (await query('SELECT count(*) FROM pictures', recent)) - onDatabase;
    const again = await query('SELECT count(*) FROM pictures', recent);

    const ms = (value: number) => `${Math.round(value).toLocaleString('en')} ms`;
    console.log(`\nDatabase branches: making one of a ${(sizeBytes / 1e6).toFixed(0)} MB site database`);
    console.log('| measure | value |');
    console.log('|---|---:|');
    console.log(`| a copy of the database now (a deployment made in the last seconds) | ${ms(copied)} |`);
    console.log(`| the database at a deployment's creation, from its replica | ${ms(fromHistory)} |`);
    console.log(`| the database at an instant, from its replica | ${ms(fromInstant)} |`);
    console.log(`| a call on a branch already made, and on the database itself | ${ms(again)}, ${ms(onDatabase)} |`);
  } finally {
    await stopAll();
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** An uploading deployment of the site; its id. */
async function deployment(api: Got, siteId: string): Promise<string> {
  const { deployment } = await api
    .post(`v0/sites/${siteId}/deployments`, {
      json: { files: [{ path: 'web/index.html', content: 'next', contentType: 'text/html' }] },
    })
    .json<{ deployment: { id: string } }>();
  return deployment.id;
}

/** Waits until the replica holds every write made before `since`; the latest moment it holds then. */
async function waitForReplica(api: Got, base: string, since: number): Promise<number> {
  for (;;) {
    const points = await api.get(`${base}/restore-points`).json<{ latest: string | null }>();
    if (points.latest && Date.parse(points.latest) >= since) return Date.parse(points.latest);
    await sleep(200);
  }
}

await main();
