// How long a deployment's publish and a rollback take as the set grows: 10, 1,000 and 10,000 files,
// on the metadata backend of the environment (SQLite by default; BERTH_DATABASE_URL for PostgreSQL).
// For each size: declare a set of distinct files, upload them, publish (every file new), publish a
// second set (every file changed), then promote the first again (a rollback: no bytes copied). Each
// time is the API call's round trip, measured from the client, with the server on its own core.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import got, { type Got } from 'got';
import { ROOT, SERVER_CORE, freePort, pinSelf, LOAD_CORE, startPinned, stopAll } from './harness.ts';

const SIZES = [10, 1000, 10_000];
const UPLOADS_IN_FLIGHT = 16;

interface Row {
  files: number;
  publishNewMs: number;
  publishChangedMs: number;
  rollbackMs: number;
}

const sha = (body: string) => crypto.createHash('sha256').update(body).digest('hex');

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

/** Declares `count` files whose bodies carry `label`, uploads them, and returns the deployment's id. */
async function prepare(api: Got, siteId: string, count: number, label: string): Promise<string> {
  const files = Array.from({ length: count }, (_, i) => {
    const body = `<p>${label} ${i}</p>`;
    return { path: `web/p${i}.html`, sha256: sha(body), size: Buffer.byteLength(body), contentType: 'text/html', body };
  });
  const { deployment } = await api
    .post(`v0/sites/${siteId}/deployments`, { json: { files: files.map(({ body: _, ...f }) => f), prune: true } })
    .json<{ deployment: { id: string; missing: string[] } }>();
  const bySha = new Map(files.map((f) => [f.sha256, f.body]));
  const queue = [...deployment.missing];
  await Promise.all(
    Array.from({ length: UPLOADS_IN_FLIGHT }, async () => {
      for (let digest = queue.pop(); digest; digest = queue.pop())
        await api.put(`v0/sites/${siteId}/deployments/${deployment.id}/files/${digest}`, { body: bySha.get(digest)! });
    }),
  );
  return deployment.id;
}

async function main() {
  pinSelf(LOAD_CORE);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-bench-deployments-'));
  const port = await freePort();
  const logFile = path.join(work, 'berth.log');
  try {
    await startPinned(
      'berth serve',
      SERVER_CORE,
      process.execPath,
      [path.join(ROOT, 'control-plane/cli/berth.js'), 'serve'],
      { ...process.env, BERTH_PORT: String(port), BERTH_DATA_DIR: path.join(work, 'data'), BERTH_LOG_LEVEL: 'warn' },
      { ready: (line) => line.includes('listening') || line.includes('WRITE key'), logFile },
    );
    const log = await fs.readFile(logFile, 'utf8');
    const key = /WRITE key:\s+(\S+)/.exec(log)![1]!;
    const accountId = /account:\s+(\S+)/.exec(log)![1]!;
    const api = got.extend({
      prefixUrl: `http://127.0.0.1:${port}`,
      headers: { authorization: `Bearer ${key}` },
      timeout: { request: 600_000 },
    });
    const rows: Row[] = [];
    for (const files of SIZES) {
      const site = await api
        .post('v0/sites', { json: { accountId, name: `bench ${files}` } })
        .json<{ id: string; subdomain: string }>();
      const first = await prepare(api, site.id, files, 'first');
      const [, publishNewMs] = await timed(() => api.post(`v0/sites/${site.id}/deployments/${first}/publish`));
      const second = await prepare(api, site.id, files, 'second');
      const [, publishChangedMs] = await timed(() => api.post(`v0/sites/${site.id}/deployments/${second}/publish`));
      const [, rollbackMs] = await timed(() => api.post(`v0/sites/${site.id}/deployments/${first}/promote`));
      const served = await got
        .get(`http://127.0.0.1:${port}/p0.html`, { headers: { host: `${site.subdomain}.localhost` } })
        .text();
      if (served !== '<p>first 0</p>') throw new Error(`after the rollback the site serves ${served}`);
      rows.push({ files, publishNewMs, publishChangedMs, rollbackMs });
    }
    const backend = process.env.BERTH_DATABASE_URL ? 'PostgreSQL' : 'SQLite';
    console.log(`\nDeployments (${backend} metadata): one API call's round trip`);
    console.log('| files | publish, every file new | publish, every file changed | rollback (promote) |');
    console.log('|---:|---:|---:|---:|');
    for (const row of rows)
      console.log(
        `| ${row.files.toLocaleString('en')} | ${row.publishNewMs.toFixed(0)} ms | ${row.publishChangedMs.toFixed(0)} ms | ${row.rollbackMs.toFixed(0)} ms |`,
      );
  } finally {
    await stopAll();
    await fs.rm(work, { recursive: true, force: true });
  }
}

await main();
