// Nodes are upgraded one at a time (docs/cluster.md, "Upgrades"): a node of the previous release keeps
// serving while a node of this one has migrated the shared metadata to its schema. The previous release
// is taken from the repository's history (the last commit before this release's metadata migrations),
// unpacked beside the checkout and run with the checkout's packages. (The PostgreSQL pass.)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import type { Got } from 'got';
import { json, makeDataDir } from '../helpers/berth.ts';
import { type ServeProcess, runBerth, startServe } from '../helpers/process.ts';
import { onPostgres } from '../helpers/postgres.ts';
import { freePort } from '../helpers/ports.ts';
import { ownerOf, sharedInstance, siteOn } from '../helpers/served.ts';

/** The previous release: the schema ends at 0018_nodes; this one adds every migration from 0019 on. */
const PREVIOUS = '2e0c7288237c47586fd99c8da0ea412ed42f6551';
const ROOT = path.resolve(import.meta.dirname, '../..');

const upgrade = onPostgres ? test : test.skip;

/**
 * The previous release's packages, from the checkout's: every one by the same name, and its SQLite driver
 * for Node 24 under the name it gave it (`better-sqlite3-napi`, an alias of the better-sqlite3 13.2.0
 * this release depends on by its own name).
 */
function linkPackages(tree: string): void {
  const modules = path.join(tree, 'node_modules');
  fs.mkdirSync(modules);
  for (const name of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
    if (name.startsWith('.')) continue;
    fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(modules, name));
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules', 'better-sqlite3'), path.join(modules, 'better-sqlite3-napi'));
}

/** `berth serve` of the previous release, from its own unpacked tree. */
async function startPrevious(tree: string, env: Record<string, string>): Promise<ServeProcess> {
  return startServe(env, { bin: path.join(tree, 'control-plane/cli/berth.js') });
}

upgrade(
  'a node of the previous release keeps serving after a node of this release migrated the shared metadata',
  async (t) => {
    const root = await makeDataDir(t);
    const tree = path.join(root, 'previous');
    fs.mkdirSync(tree);
    execFileSync('sh', ['-c', `git -C "${ROOT}" archive ${PREVIOUS} | tar -x -C "${tree}"`]);
    linkPackages(tree);
    const shared = await sharedInstance(root, path.join(root, 'old'));
    const oldEnv = {
      ...shared,
      BERTH_DATA_DIR: path.join(root, 'old'),
      BERTH_NODE_ID: 'node-old',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    };
    const old = await startPrevious(tree, oldEnv);
    t.teardown(async () => {
      if (old.child.exitCode !== null) return;
      old.child.kill('SIGTERM');
      await old.exited;
    });
    const owner = ownerOf(old);
    const throughOld = owner.api;
    const site = json<{ id: string; subdomain: string; bucketId: string }>(
      await throughOld.post('v0/sites', { json: { accountId: owner.id, name: 'upgraded' } }),
    );
    const put = (api: Got, file: string, body: string, type: string) =>
      api.put(`v0/buckets/${site.bucketId}/objects/${file}`, { body, headers: { 'content-type': type } });
    t.is((await put(throughOld, 'web/index.html', '<h1>before</h1>', 'text/html')).statusCode, 200);
    t.is(
      (
        await put(
          throughOld,
          'api/notes.ts',
          "export default async (_req: Request, ctx: any) => Response.json(await ctx.db.query('SELECT body FROM notes'));",
          'text/typescript',
        )
      ).statusCode,
      200,
    );
    const database = json<{ database: { id: string } }>(
      await throughOld.post(`v0/sites/${site.id}/databases`),
    ).database;
    const base = `v0/sites/${site.id}/databases/${database.id}`;
    t.is(
      (
        await throughOld.post(`${base}/migrations`, {
          json: {
            name: '0001_notes.sql',
            sql: "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('old');",
            confirm: true,
          },
        })
      ).statusCode,
      200,
    );

    // Every connection of the old node's pool prepares its statements (a prepared statement is per connection).
    const reads = async () =>
      (
        await Promise.all(
          Array.from({ length: 24 }, () =>
            throughOld.post(`${base}/query`, { json: { sql: 'SELECT count(*) AS n FROM notes' } }),
          ),
        )
      ).map((r) => r.statusCode);
    t.deepEqual(await reads(), Array(24).fill(200));

    // A node of this release joins and migrates the metadata to its schema.
    const newer = await startServe({
      ...shared,
      BERTH_DATA_DIR: path.join(root, 'new'),
      BERTH_NODE_ID: 'node-new',
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    });
    t.teardown(async () => {
      newer.child.kill('SIGTERM');
      await newer.exited;
    });
    const listed = JSON.parse(
      (await runBerth(['admin', 'nodes', '--json'], { ...shared, BERTH_DATA_DIR: path.join(root, 'new') })).stdout,
    ) as { nodes: Array<{ id: string; state: string }> };
    t.deepEqual(
      listed.nodes.map((n) => [n.id, n.state]),
      [
        ['node-new', 'up'],
        ['node-old', 'up'],
      ],
    );

    // The old node goes on: files, functions, its database, writes, new sites and databases.
    t.deepEqual(await reads(), Array(24).fill(200), 'on every connection');
    t.is((await siteOn(old, site.subdomain).get('')).body, '<h1>before</h1>');
    t.is((await put(throughOld, 'web/index.html', '<h1>after</h1>', 'text/html')).statusCode, 200);
    t.is(
      (
        await throughOld.post(`${base}/query`, {
          json: { sql: "INSERT INTO notes VALUES ('written by the old node')" },
        })
      ).statusCode,
      200,
    );
    t.deepEqual(JSON.parse((await siteOn(old, site.subdomain).get('api/notes')).body), [
      { body: 'old' },
      { body: 'written by the old node' },
    ]);
    const another = json<{ id: string }>(
      await throughOld.post('v0/sites', { json: { accountId: owner.id, name: 'made by the old node' } }),
    );
    t.is((await throughOld.post(`v0/sites/${another.id}/databases`)).statusCode, 200);
    // And the new node sees it all, the old node's database included.
    t.is((await siteOn(newer, site.subdomain).get('')).body, '<h1>after</h1>');
    t.deepEqual(JSON.parse((await siteOn(newer, site.subdomain).get('api/notes')).body), [
      { body: 'old' },
      { body: 'written by the old node' },
    ]);

    // Upgrades go one way: restarted, the old release refuses the newer schema with one line, and changes nothing.
    old.child.kill('SIGTERM');
    await old.exited;
    const refused = await runBerth(['serve'], oldEnv, undefined, path.join(tree, 'control-plane/cli/berth.js'));
    t.is(refused.code, 1);
    t.regex(refused.stderr, /newer/);
  },
);
