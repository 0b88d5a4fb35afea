// docs/cluster.md, "From one VM to a cluster", step by step: an instance on one VM (metadata in its
// data dir, files in its blob directory, a site database in its data dir) is stopped, its metadata and
// files copied to PostgreSQL and the object store, and started again as the first node; a second
// database node and a web-only node join, each with a data dir of its own and the master key's copy.
// The site, its function and its database answer through all three, and drain-node then moves the
// database to the second node. (The PostgreSQL and
// object store pass.)
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import got from 'got';
import { apiClient, json, makeDataDir } from '../helpers/berth.ts';
import { runBerth, startServe } from '../helpers/process.ts';
import { databaseFor } from '../helpers/postgres.ts';
import { objectStoreFor, onObjectStore } from '../helpers/object-store.ts';
import { freePort } from '../helpers/ports.ts';
import { ownerOf } from '../helpers/served.ts';

const migration = onObjectStore ? test : test.skip;

const NOTES = `export default async (req: Request, ctx: any) => Response.json(await ctx.db.query('SELECT body FROM notes ORDER BY id'));`;

migration(
  'a single-VM instance becomes the first node of a three-node cluster, as docs/cluster.md says, and its database moves to a second node',
  async (t) => {
    const root = await makeDataDir(t);
    const vm = path.join(root, 'vm');
    // The single VM: metadata in meta.sqlite, files in the blob directory.
    const alone = { BERTH_DATA_DIR: vm, BERTH_DATABASE_URL: '', BERTH_OBJECT_STORE: '' };
    const single = await startServe(alone);
    const owner = ownerOf(single);
    let api = owner.api;
    const site = json<{ id: string; subdomain: string; bucketId: string }>(
      await api.post('v0/sites', { json: { accountId: owner.id, name: 'from the vm' } }),
    );
    for (const [file, body, type] of [
      ['web/index.html', '<h1>moved along</h1>', 'text/html'],
      ['api/notes.ts', NOTES, 'text/typescript'],
    ] as const) {
      t.is(
        (await api.put(`v0/buckets/${site.bucketId}/objects/${file}`, { body, headers: { 'content-type': type } }))
          .statusCode,
        200,
      );
    }
    const database = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
    const base = `v0/sites/${site.id}/databases/${database.id}`;
    t.is(
      (
        await api.post(`${base}/migrations`, {
          json: {
            name: '0001_notes.sql',
            sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('from one vm');",
            confirm: true,
          },
        })
      ).statusCode,
      200,
    );

    // Step 2: stop it, copy its metadata and its files.
    single.child.kill('SIGTERM');
    t.is(await single.exited, 0);
    const metadata = await databaseFor(path.join(root, 'cluster'));
    const copied = await runBerth(['admin', 'copy-metadata', '--to', metadata], alone);
    t.is(copied.code, 0, copied.stderr);
    const store = await objectStoreFor(path.join(root, 'cluster'));
    const s3 = { BERTH_S3_ENDPOINT: store.endpoint!, BERTH_S3_FORCE_PATH_STYLE: 'true' };
    const blobs = await runBerth(['admin', 'copy-blobs', '--to', `s3://${store.bucket}`], { ...alone, ...s3 });
    t.is(blobs.code, 0, blobs.stderr);

    // Step 3: the same data dir, as the first node, with the shared settings.
    const shared = {
      BERTH_DATABASE_URL: metadata,
      BERTH_OBJECT_STORE: `s3://${store.bucket}`,
      ...s3,
      BERTH_MASTER_KEY_FILE: path.join(root, 'shared.key'),
    };
    fs.copyFileSync(path.join(vm, 'master.key'), shared.BERTH_MASTER_KEY_FILE);
    const first = await startServe({
      ...shared,
      BERTH_DATA_DIR: vm,
      BERTH_NODE_ID: 'node-a',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    });
    t.teardown(async () => {
      first.child.kill('SIGTERM');
      await first.exited;
    });
    // Step 4: a second node, with a data dir of its own and the master key's copy.
    const second = await startServe({
      ...shared,
      BERTH_DATA_DIR: path.join(root, 'b'),
      BERTH_NODE_ID: 'node-b',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    });
    t.teardown(async () => {
      second.child.kill('SIGTERM');
      await second.exited;
    });
    const third = await startServe({
      ...shared,
      BERTH_DATA_DIR: path.join(root, 'c'),
      BERTH_NODE_ID: 'node-c',
      BERTH_ROLES: 'web',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    });
    t.teardown(async () => {
      third.child.kill('SIGTERM');
      await third.exited;
    });
    t.false(first.output().includes('WRITE key'), 'the instance came along: no new owner');

    const nodes = (
      JSON.parse((await runBerth(['admin', 'nodes', '--json'], { ...shared, BERTH_DATA_DIR: vm })).stdout) as {
        nodes: Array<{ id: string; state: string; databases: number }>;
      }
    ).nodes;
    t.like(
      nodes.find((n) => n.id === 'node-a'),
      { state: 'up', databases: 1 },
    );
    t.like(
      nodes.find((n) => n.id === 'node-b'),
      { state: 'up', databases: 0 },
    );
    t.like(
      nodes.find((n) => n.id === 'node-c'),
      { state: 'up', roles: ['web'] },
    );
    for (const node of [first, second, third]) {
      const port = new URL(node.url).port;
      const host = got.extend({
        prefixUrl: node.url,
        headers: { host: `${site.subdomain}.localhost:${port}` },
        throwHttpErrors: false,
        retry: { limit: 0 },
      });
      t.is((await host.get('')).body, '<h1>moved along</h1>', 'the files came along');
      t.deepEqual(
        JSON.parse((await host.get('api/notes')).body),
        [{ body: 'from one vm' }],
        'the database answers through every node',
      );
    }

    const drained = await runBerth(['admin', 'drain-node', 'node-a'], { ...shared, BERTH_DATA_DIR: vm });
    t.is(drained.code, 0, drained.stderr);
    t.regex(drained.stdout, new RegExp(`moved ${site.id} to node-b`));
    t.true(fs.existsSync(path.join(root, 'b', 'sites', site.id, 'db.sqlite')));
    api = apiClient(first.url, owner.writeKey);
    const rows = json<{ result: Array<{ results: unknown[] }> }>(
      await api.post(`${base}/query`, { json: { sql: 'SELECT body FROM notes' } }),
    );
    t.deepEqual(rows.result[0]!.results, [{ body: 'from one vm' }]);
  },
);
