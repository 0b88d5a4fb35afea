// Nodes of one instance and the site databases placed on them: node A holds databases, node B serves
// web traffic only, and every database call made through B (the query endpoint, migrations, exports,
// ctx.db) is answered by A through peer calls, which A takes only signed with the instance's
// key. With A killed, B answers 503 database_unavailable for that site's database and serves the rest;
// with A back, the database answers as before. (Nodes share PostgreSQL metadata: the PostgreSQL pass.)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import got from 'got';
import { type TestAccount, json, makeDataDir } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { type ServeProcess, runBerth, startServe } from './helpers/process.ts';
import { databaseFor, onPostgres } from './helpers/postgres.ts';
import { objectStoreEnv, onObjectStore } from './helpers/object-store.ts';
import { freePort } from './helpers/ports.ts';
import { ownerOf, sharedInstance, siteOn, stopServed } from './helpers/served.ts';
import { until } from './helpers/until.ts';
import { peerKey, signRequest } from '../control-plane/site-databases/cluster/peer-auth.ts';

const cluster = onPostgres ? test.serial : test.skip;

interface Cluster {
  root: string;
  common: Record<string, string>;
  envA: Record<string, string>;
  envB: Record<string, string>;
  a: ServeProcess;
  b: ServeProcess;
  /** A second database node, started by the first test that needs one. */
  c?: ServeProcess;
  addressA: string;
  owner: TestAccount;
}

let c: Cluster;

test.before(async () => {
  if (!onPostgres) return;
  const root = await makeDataDir();
  const [dirA, dirB] = [path.join(root, 'a'), path.join(root, 'b')];
  // Database nodes copy their changed databases to the shared store every second (default: 15 minutes).
  const common = await sharedInstance(root, dirA);
  // Each cluster listener's port is taken just before its node starts, so no node started meanwhile can be given it.
  const addressA = `http://127.0.0.1:${await freePort()}`;
  const envA = { ...common, BERTH_DATA_DIR: dirA, BERTH_NODE_ID: 'node-a', BERTH_CLUSTER_ADDRESS: addressA };
  const a = await startServe(envA);
  const envB = {
    ...common,
    BERTH_DATA_DIR: dirB,
    BERTH_NODE_ID: 'node-b',
    BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    BERTH_ROLES: 'web',
  };
  const b = await startServe(envB);
  // The owner printed by A's first start, with clients on B, the web-only node.
  const owner = ownerOf(a, b.url);
  c = { root, common, envA, envB, a, b, addressA, owner };
});

test.after.always(async () => {
  await stopServed([c?.a, c?.b, c?.c]);
});

const NOTES_FUNCTION = `export default async (req: Request, ctx: any) => {
  try {
    if (req.method === 'POST') return Response.json(await ctx.db.execute('INSERT INTO notes (body) VALUES (?)', [await req.text()]));
    return Response.json(await ctx.db.query('SELECT id, body FROM notes ORDER BY id'));
  } catch (err) {
    return Response.json({ code: (err as { code?: string }).code }, { status: 503 });
  }
};`;

/** A site with a database created through B, a notes table migrated into it, and a function that uses it. */
async function siteWithNotes(name: string) {
  const { owner } = c;
  const made = await siteWithDatabase(owner, { name });
  const migrated = await owner.api.post(`${made.base}/migrations`, {
    json: {
      name: '0001_notes.sql',
      sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, data BLOB);',
      confirm: true,
    },
  });
  if (migrated.statusCode !== 200) throw new Error(`migration: ${migrated.statusCode} ${migrated.body}`);
  for (const [file, body, type] of [
    ['api/notes.ts', NOTES_FUNCTION, 'text/typescript'],
    ['web/index.html', '<h1>still here</h1>', 'text/html'],
    ['api/plain.ts', 'export default () => new Response("plain")', 'text/typescript'],
  ]) {
    const put = await owner.api.put(`v0/buckets/${made.site.bucketId}/objects/${file}`, {
      body,
      headers: { 'content-type': type! },
    });
    if (put.statusCode !== 200) throw new Error(`${file}: ${put.statusCode} ${put.body}`);
  }
  return made;
}

cluster('berth admin nodes lists both nodes with their roles and addresses; readyz counts them', async (t) => {
  const listed = await runBerth(['admin', 'nodes', '--json'], c.envB);
  t.is(listed.code, 0, listed.stderr);
  const nodes = (
    JSON.parse(listed.stdout) as { nodes: Array<{ id: string; state: string; roles: string[]; address: string }> }
  ).nodes;
  t.like(
    nodes.find((n) => n.id === 'node-a'),
    { state: 'up', roles: ['web', 'database'], address: c.addressA },
  );
  t.like(
    nodes.find((n) => n.id === 'node-b'),
    { state: 'up', roles: ['web'] },
  );
  const ready = await got.get(`${c.b.url}/readyz`, { responseType: 'json', throwHttpErrors: false });
  t.is(ready.statusCode, 200);
  t.like(ready.body, { cluster: { roles: ['web'], nodes: { up: 2 }, databaseNodesUp: 1 } });
  t.false(JSON.stringify(ready.body).includes('127.0.0.1'), 'readyz is public: it names no address');
});

cluster(
  'a database created through a web-only node lives on the database node and answers through either',
  async (t) => {
    const { site, base } = await siteWithNotes('placed');
    t.true(fs.existsSync(path.join(c.root, 'a', 'sites', site.id, 'db.sqlite')), 'the file is in A’s data dir');
    t.false(fs.existsSync(path.join(c.root, 'b', 'sites', site.id)), 'and not in B’s');

    const inserted = await c.owner.api.post(`${base}/query`, {
      json: { sql: "INSERT INTO notes (body, data) VALUES ('through B', X'00FF10')" },
    });
    t.is(inserted.statusCode, 200, JSON.stringify(inserted.body));
    const onB = siteOn(c.b, site.subdomain);
    t.is((await onB.post('api/notes', { body: 'from a function on B' })).statusCode, 200);
    const read = json<{ result: Array<{ results: Array<{ body: string; data: unknown }> }> }>(
      await c.owner.api.post(`${base}/query`, {
        json: { sql: 'SELECT body, hex(data) AS data FROM notes ORDER BY id' },
      }),
    );
    t.deepEqual(read.result[0]!.results, [
      { body: 'through B', data: '00FF10' },
      { body: 'from a function on B', data: '' },
    ]);
    const throughA = JSON.parse((await siteOn(c.a, site.subdomain).get('api/notes')).body) as Array<{ body: string }>;
    t.deepEqual(
      throughA.map((row) => row.body),
      ['through B', 'from a function on B'],
    );

    // A statement's failure keeps its code and message across the hop.
    const bad = json<{ success: boolean; errors: Array<{ code: string; message: string }> }>(
      await c.owner.api.post(`${base}/query`, { json: { sql: 'SELECT * FROM no_such_table' } }),
    );
    t.false(bad.success);
    t.is(bad.errors[0]!.code, 'statement_failed');
    t.regex(bad.errors[0]!.message, /no such table/);

    const exported = json<{ export: { id: string; status: string } }>(await c.owner.api.post(`${base}/exports`)).export;
    let record: { status: string; downloadUrl?: string } = exported;
    await until(async () => {
      record = json<{ export: typeof record }>(
        await c.owner.api.post(`${base}/exports/${exported.id}/reconcile`),
      ).export;
      return record.status !== 'PROCESSING';
    }, 'the export made through B');
    t.is(record.status, 'COMPLETE');
    const dump = await got.get(record.downloadUrl!);
    t.regex(dump.body, /INSERT INTO "?notes"?/);
    t.regex(dump.body, /through B/);

    const listed = JSON.parse((await runBerth(['admin', 'nodes', '--json'], c.envA)).stdout) as {
      nodes: Array<{ id: string; databases: number }>;
    };
    t.true(listed.nodes.find((n) => n.id === 'node-a')!.databases >= 1);
    t.is(listed.nodes.find((n) => n.id === 'node-b')!.databases, 0);
    // Each node's heartbeat says how the replication of the databases it has in use goes.
    const replication = await until(async () => {
      const nodes = (
        JSON.parse((await runBerth(['admin', 'nodes', '--json'], c.envB)).stdout) as {
          nodes: Array<{
            id: string;
            replication: {
              stalled: string | null;
              inUse: number;
              databases: Array<{ siteId: string; lagMs: number; replicatedAt: string | null }>;
            } | null;
          }>;
        }
      ).nodes;
      const ofA = nodes.find((n) => n.id === 'node-a')!.replication;
      return ofA?.databases.find((db) => db.siteId === site.id && db.replicatedAt) && ofA;
    }, 'node A’s heartbeat to tell of the database’s replication');
    t.is(replication.stalled, null);
    t.true(replication.inUse >= 1);
  },
);

cluster(
  'a preview’s branch of a database is made on the node that holds the database and used through the other',
  async (t) => {
    const { site, base } = await siteWithNotes('branched');
    const holder = ['a', 'c'].find((name) => fs.existsSync(path.join(c.root, name, 'sites', site.id, 'db.sqlite')))!;
    const declared = await c.owner.api.post(`v0/sites/${site.id}/deployments`, {
      json: {
        files: [{ path: 'api/notes.ts', content: NOTES_FUNCTION, contentType: 'text/typescript' }],
        migrations: [
          {
            name: '0001_notes.sql',
            sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, data BLOB);',
          },
          { name: '0002_tags.sql', sql: 'ALTER TABLE notes ADD COLUMN tags TEXT;' },
        ],
      },
    });
    t.is(declared.statusCode, 201, JSON.stringify(declared.body));
    const deployment = json<{ deployment: { id: string; shortId: string } }>(declared).deployment;
    const opened = await c.owner.api.post(`v0/sites/${site.id}/deployments/${deployment.id}`, {
      json: { previewAccess: 'PUBLIC' },
    });
    t.is(opened.statusCode, 200, JSON.stringify(opened.body));
    const preview = (server: ServeProcess) => siteOn(server, `${deployment.shortId}--${site.subdomain}`);

    // Made through B, the web-only node: on the node that holds the database.
    t.is((await preview(c.b).post('api/notes', { body: 'on the branch' })).statusCode, 200);
    const folder = `${site.id}.${deployment.id}`;
    t.true(fs.existsSync(path.join(c.root, holder, 'branches', folder, 'db.sqlite')));
    t.false(fs.existsSync(path.join(c.root, 'b', 'branches', folder)));
    const throughA = JSON.parse((await preview(c.a).get('api/notes')).body) as Array<{ body: string }>;
    t.deepEqual(
      throughA.map((row) => row.body),
      ['on the branch'],
    );
    t.deepEqual(JSON.parse((await siteOn(c.b, site.subdomain).get('api/notes')).body), [], 'the database has none');
    const columns = json<{ result: Array<{ results: Array<{ name: string }> }> }>(
      await c.owner.api.post(`${base}/query`, {
        json: { sql: "SELECT name FROM pragma_table_info('notes')", branch: deployment.id, readOnly: true },
      }),
    );
    t.true(
      columns.result[0]!.results.some((column) => column.name === 'tags'),
      'the branch has the migration',
    );

    const published = await c.owner.api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`);
    t.is(published.statusCode, 200, JSON.stringify(published.body));
    t.false(fs.existsSync(path.join(c.root, holder, 'branches', folder)), 'the branch ends with its deployment');
  },
);

cluster(
  'the cluster listener refuses unsigned, wrongly signed and replayed peer calls, and calls for a database the node does not hold',
  async (t) => {
    const { site } = await siteWithNotes('peer');
    const call = (pathname: string, body: string, headers: Record<string, string>) =>
      got.post(`${c.addressA}${pathname}`, {
        body,
        headers: { 'content-type': 'application/json', ...headers },
        throwHttpErrors: false,
        retry: { limit: 0 },
      });
    const pathname = `/v1/site-databases/${site.id}/run`;
    const body = JSON.stringify({ statement: { sql: 'SELECT count(*) AS n FROM notes', params: [] }, access: 'api' });

    const unsigned = await call(pathname, body, {});
    t.is(unsigned.statusCode, 401);
    const key = peerKey(fs.readFileSync(c.common.BERTH_MASTER_KEY_FILE!));
    const forged = await call(
      pathname,
      body,
      signRequest(peerKey(crypto.randomBytes(32)), 'node-b', 'POST', pathname, Buffer.from(body)),
    );
    t.is(forged.statusCode, 401);
    t.regex(forged.body, /master key/);

    const headers = signRequest(key, 'node-b', 'POST', pathname, Buffer.from(body));
    const signed = await call(pathname, body, headers);
    t.is(signed.statusCode, 200);
    t.like(JSON.parse(signed.body), { ok: true, value: { rows: [{ n: 0 }] } });
    const replayed = await call(pathname, body, headers);
    t.is(replayed.statusCode, 401);
    t.regex(replayed.body, /replayed/);
    const tampered = await call(
      pathname,
      body.replace('count(*)', 'sum(1)'),
      signRequest(key, 'node-b', 'POST', pathname, Buffer.from(body)),
    );
    t.is(tampered.statusCode, 401, 'the body is signed too');

    // A signed call still reaches only databases the metadata places on this node.
    const stranger = crypto.randomUUID();
    const otherPath = `/v1/site-databases/${stranger}/create`;
    const notHeld = await call(otherPath, '{}', signRequest(key, 'node-b', 'POST', otherPath, Buffer.from('{}')));
    t.deepEqual(JSON.parse(notHeld.body), { ok: false, reason: 'unavailable', message: 'the site has no database' });
    t.false(fs.existsSync(path.join(c.root, 'a', 'sites', stranger)), 'nothing was made for it');

    // Nor can a signed copy replace a database the node holds.
    const receivePath = `/v1/site-databases/${site.id}/receive`;
    const bogus = Buffer.from('not a database at all');
    const overwrite = await got.post(`${c.addressA}${receivePath}`, {
      body: bogus,
      headers: {
        'content-type': 'application/octet-stream',
        ...signRequest(key, 'node-b', 'POST', receivePath, bogus),
      },
      throwHttpErrors: false,
      retry: { limit: 0 },
    });
    t.like(JSON.parse(overwrite.body), { ok: false, reason: 'failed' });
    const still = json<{ result: Array<{ results: unknown[] }> }>(
      await c.owner.api.post(
        `v0/sites/${site.id}/databases/${json<{ databases: Array<{ id: string }> }>(await c.owner.api.get(`v0/sites/${site.id}/databases`)).databases[0]!.id}/query`,
        { json: { sql: 'SELECT count(*) AS n FROM notes' } },
      ),
    );
    t.deepEqual(still.result[0]!.results, [{ n: 0 }], 'the database is untouched');
  },
);

cluster(
  'with the database node killed, that site’s database calls answer 503 and the rest of the site works; it answers again once the node is back',
  async (t) => {
    const { site, base } = await siteWithNotes('outage');
    t.is(
      (await c.owner.api.post(`${base}/query`, { json: { sql: "INSERT INTO notes (body) VALUES ('acknowledged')" } }))
        .statusCode,
      200,
    );
    c.a.child.kill('SIGKILL');
    await c.a.exited;

    const started = Date.now();
    const down = await c.owner.api.post(`${base}/query`, { json: { sql: 'SELECT count(*) FROM notes' } });
    t.is(down.statusCode, 503, JSON.stringify(down.body));
    t.is(json(down).error.code, 'database_unavailable');
    t.true(Date.now() - started < 10_000, 'answered within the usual time');
    const onB = siteOn(c.b, site.subdomain);
    const fromFunction = await onB.get('api/notes');
    t.deepEqual(
      [fromFunction.statusCode, JSON.parse(fromFunction.body)],
      [503, { code: 'DATABASE_UNAVAILABLE' }],
      'ctx.db too',
    );
    t.is((await onB.get('')).body, '<h1>still here</h1>', 'files are served');
    t.is((await onB.get('api/plain')).body, 'plain', 'functions that do not use the database run');

    c.a = await startServe(c.envA);
    await until(
      async () => (await c.owner.api.post(`${base}/query`, { json: { sql: 'SELECT 1' } })).statusCode === 200,
      'the database to answer again',
    );
    const rows = JSON.parse((await onB.get('api/notes')).body) as Array<{ body: string }>;
    t.deepEqual(
      rows.map((row) => row.body),
      ['acknowledged'],
      'the acknowledged write is there',
    );
  },
);

/** Starts node C, a second database node, once. */
async function startNodeC(): Promise<void> {
  c.c ??= await startServe({
    ...c.common,
    BERTH_DATA_DIR: path.join(c.root, 'c'),
    BERTH_NODE_ID: 'node-c',
    BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
  });
}

cluster(
  'drain-node moves every database of a node to another under write load: no write is lost or refused, each moved database is the same row by row, and a copy left behind is never served',
  async (t) => {
    const quiet = await siteWithNotes('drain-quiet');
    const busy = await siteWithNotes('drain-busy');
    const query = async (base: string, sql: string) =>
      json<{ success: boolean; result: Array<{ results: Array<Record<string, unknown>> }> }>(
        await c.owner.api.post(`${base}/query`, { json: { sql } }),
      );
    await query(
      quiet.base,
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO notes (body, data) SELECT 'row ' || i, randomblob(i % 64) FROM n",
    );
    const everything = 'SELECT id, body, hex(data) AS data FROM notes ORDER BY id';
    const before = (await query(quiet.base, everything)).result[0]!.results;
    t.is(before.length, 3000);
    t.true(fs.existsSync(path.join(c.root, 'a', 'sites', busy.site.id, 'db.sqlite')), 'both start on node A');
    // The replicator keeps a row of its own in the database it follows (_litestream_seq), written when it
    // gets to it: that row is its bookkeeping on this node, not the site's data, and is not counted.
    await until(() => {
      const file = new Database(path.join(c.root, 'a', 'sites', quiet.site.id, 'db.sqlite'), { readonly: true });
      try {
        return (file.prepare('SELECT count(*) AS n FROM _litestream_seq').get() as { n: number }).n > 0;
      } finally {
        file.close();
      }
    }, 'the replicator to write its row in the quiet database');

    await startNodeC();

    // Writes through B, by a function's ctx.db and by the query endpoint, and reads, until the drain is done.
    const onB = siteOn(c.b, busy.site.subdomain);
    const acknowledged: string[] = [];
    const failed: string[] = [];
    let reads = 0;
    let draining = true;
    const writer = async (name: string) => {
      for (let i = 0; draining; i++) {
        const body = `${name}-${i}`;
        const answer = name.startsWith('fn')
          ? await onB.post('api/notes', { body })
          : await c.owner.api.post(`${busy.base}/query`, {
              json: { sql: 'INSERT INTO notes (body) VALUES (?)', params: [body] },
            });
        if (answer.statusCode === 200) acknowledged.push(body);
        else failed.push(`${body}: ${answer.statusCode} ${answer.body}`);
      }
    };
    const reader = async () => {
      while (draining) {
        const answer = await onB.get('api/notes');
        if (answer.statusCode === 200) reads++;
        else failed.push(`read: ${answer.statusCode} ${answer.body}`);
      }
    };
    const load = Promise.all([writer('fn-a'), writer('fn-b'), writer('api-a'), reader()]);
    await until(async () => acknowledged.length >= 20, 'writes before the drain');
    const drained = await runBerth(['admin', 'drain-node', 'node-a', '--json'], c.envB);
    draining = false;
    await load;
    t.is(drained.code, 0, drained.stdout + drained.stderr);
    const moves = (
      JSON.parse(drained.stdout) as { moves: Array<{ siteId: string; to: string; rows: number; pausedMs: number }> }
    ).moves;
    // Every table's rows are counted on both sides: the notes, the migration's receipt and its sequence.
    t.like(
      moves.find((m) => m.siteId === quiet.site.id),
      { to: 'node-c', rows: 3002 },
    );
    t.truthy(moves.find((m) => m.siteId === busy.site.id));
    t.deepEqual(failed, [], 'no call failed while the databases moved');
    for (const move of moves)
      t.log(
        `${move.siteId === quiet.site.id ? 'quiet' : move.siteId === busy.site.id ? 'busy' : 'other'} database: ${move.rows} rows, writes waited ${move.pausedMs} ms`,
      );
    t.true(reads > 0);

    for (const { site } of [quiet, busy]) {
      t.true(fs.existsSync(path.join(c.root, 'c', 'sites', site.id, 'db.sqlite')), 'the file is on node C');
      t.false(fs.existsSync(path.join(c.root, 'a', 'sites', site.id)), 'and gone from node A');
    }
    t.deepEqual((await query(quiet.base, everything)).result[0]!.results, before, 'the quiet database, row by row');
    const bodies = (await query(busy.base, 'SELECT body FROM notes ORDER BY id')).result[0]!.results.map(
      (row) => row.body as string,
    );
    t.deepEqual([...bodies].sort(), [...acknowledged].sort(), 'every acknowledged write, and nothing else');
    t.deepEqual(
      JSON.parse((await siteOn(c.a, busy.site.subdomain).get('api/notes')).body).length,
      bodies.length,
      'node A forwards to C now',
    );

    const listed = JSON.parse((await runBerth(['admin', 'nodes', '--json'], c.envB)).stdout) as {
      nodes: Array<{ id: string; databases: number; drainingAt: string | null }>;
    };
    t.like(
      listed.nodes.find((n) => n.id === 'node-a'),
      { databases: 0, databaseSites: [] },
    );
    const onC = (listed.nodes.find((n) => n.id === 'node-c') as unknown as { databaseSites: string[] }).databaseSites;
    t.true(
      onC.includes(quiet.site.id) && onC.includes(busy.site.id),
      'the JSON names the sites whose databases each node holds',
    );
    t.truthy(listed.nodes.find((n) => n.id === 'node-a')!.drainingAt);
    const fresh = await siteWithNotes('after-drain');
    t.true(
      fs.existsSync(path.join(c.root, 'c', 'sites', fresh.site.id, 'db.sqlite')),
      'a new database is not placed on a draining node',
    );

    // A copy of a moved database found in A's data dir at its start (a move cut short) is set aside, not served.
    c.a.child.kill('SIGTERM');
    await c.a.exited;
    fs.cpSync(path.join(c.root, 'c', 'sites', quiet.site.id), path.join(c.root, 'a', 'sites', quiet.site.id), {
      recursive: true,
    });
    c.a = await startServe(c.envA);
    t.false(fs.existsSync(path.join(c.root, 'a', 'sites', quiet.site.id)));
    t.is(
      fs.readdirSync(path.join(c.root, 'a', 'superseded')).filter((name) => name.startsWith(quiet.site.id)).length,
      1,
    );
    t.deepEqual((await query(quiet.base, 'SELECT count(*) AS n FROM notes')).result[0]!.results, [{ n: 3000 }]);
    const again = JSON.parse((await runBerth(['admin', 'nodes', '--json'], c.envB)).stdout) as {
      nodes: Array<{ id: string; drainingAt: string | null }>;
    };
    t.is(again.nodes.find((n) => n.id === 'node-a')!.drainingAt, null, 'a restarted node takes databases again');
  },
);

cluster(
  'recover-database brings a database back on another node from its replica once its node and data dir are lost, and says when the replica last received writes',
  async (t) => {
    await startNodeC();
    const lost = await siteWithNotes('recover');
    t.true(
      fs.existsSync(path.join(c.root, 'a', 'sites', lost.site.id, 'db.sqlite')),
      'placed on node A, which holds the fewest',
    );
    const refused = await runBerth(['admin', 'recover-database', '--site', lost.site.id], c.envB);
    t.is(refused.code, 1);
    t.regex(refused.stderr, /node-a, which is up .*: it needs no recovery/);

    const inserted = await c.owner.api.post(`${lost.base}/query`, {
      json: {
        sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO notes (body) SELECT 'kept ' || i FROM n",
      },
    });
    t.is(inserted.statusCode, 200);
    // The replica holds every write before `latest` (whole seconds): one at or after the insert's answer.
    const written = Date.now();
    await until(async () => {
      const { latest } = json<{ latest: string | null }>(await c.owner.read.get(`${lost.base}/restore-points`));
      return latest !== null && Date.parse(latest) >= written;
    }, 'the writes to reach the replica');

    c.a.child.kill('SIGKILL');
    await c.a.exited;
    fs.rmSync(path.join(c.root, 'a'), { recursive: true, force: true });
    const stateOfA = async () =>
      (
        JSON.parse((await runBerth(['admin', 'nodes', '--json'], c.envB)).stdout) as {
          nodes: Array<{ id: string; state: string }>;
        }
      ).nodes.find((n) => n.id === 'node-a')!.state;
    await until(async () => (await stateOfA()) === 'down', 'node A to be seen down (its heartbeat lapses)');
    const recovered = await runBerth(['admin', 'recover-database', '--site', lost.site.id, '--json'], c.envB);
    t.is(recovered.code, 0, recovered.stdout + recovered.stderr);
    const report = (
      JSON.parse(recovered.stdout) as {
        recovery: { to: string; from: string; rows: number; replicatedAt: string };
      }
    ).recovery;
    t.like(report, { to: 'node-c', from: 'node-a', rows: 502 });
    t.true(Date.parse(report.replicatedAt) >= written - 1000, 'it says when the replica last received writes');
    t.true(fs.existsSync(path.join(c.root, 'c', 'sites', lost.site.id, 'db.sqlite')));

    const count = json<{ result: Array<{ results: unknown[] }> }>(
      await c.owner.api.post(`${lost.base}/query`, { json: { sql: 'SELECT count(*) AS n FROM notes' } }),
    );
    t.deepEqual(count.result[0]!.results, [{ n: 500 }], 'every replicated write is back');
    const onB = siteOn(c.b, lost.site.subdomain);
    t.is(
      (await onB.post('api/notes', { body: 'after the recovery' })).statusCode,
      200,
      'and takes writes through any node',
    );
    const again = await runBerth(['admin', 'recover-database', '--site', lost.site.id], c.envB);
    t.is(again.code, 1, 'a database whose node is up is not recovered twice');

    // Node A starts again on an empty data dir: it serves, and takes new databases.
    c.a = await startServe(c.envA);
    t.is((await siteOn(c.a, lost.site.subdomain).get('api/notes')).statusCode, 200);
  },
);

cluster('a node started on its data dir under another id keeps that data dir\u2019s databases', async (t) => {
  await startNodeC();
  const { site, base } = await siteWithNotes('renamed');
  const holder = fs.existsSync(path.join(c.root, 'c', 'sites', site.id)) ? 'c' : 'a';
  const listed = async () =>
    (
      JSON.parse((await runBerth(['admin', 'nodes', '--json'], c.envB)).stdout) as {
        nodes: Array<{ id: string; databases: number }>;
      }
    ).nodes;
  const held = (await listed()).find((n) => n.id === `node-${holder}`)!.databases;
  t.true(held >= 1);
  const node = holder === 'c' ? c.c! : c.a;
  node.child.kill('SIGTERM');
  await node.exited;
  const env = {
    ...c.common,
    BERTH_DATA_DIR: path.join(c.root, holder),
    BERTH_NODE_ID: `node-${holder}-renamed`,
    BERTH_CLUSTER_ADDRESS: holder === 'a' ? c.addressA : `http://127.0.0.1:${await freePort()}`,
  };
  const renamed = await startServe(env);
  if (holder === 'c') c.c = renamed;
  else c.a = renamed;
  const nodes = await listed();
  t.is(nodes.find((n) => n.id === `node-${holder}-renamed`)?.databases, held, 'its placements moved with it');
  t.falsy(
    nodes.find((n) => n.id === `node-${holder}`),
    'and the old id is gone',
  );
  const answered = json<{ result: Array<{ results: unknown[] }> }>(
    await c.owner.api.post(`${base}/query`, { json: { sql: 'SELECT count(*) AS n FROM notes' } }),
  );
  t.deepEqual(answered.result[0]!.results, [{ n: 0 }]);
});

cluster(
  'a node started on metadata that does not know its databases (the wrong BERTH_DATABASE_URL) sets them aside and deletes nothing',
  async (t) => {
    const { site } = await siteWithNotes('wrong-metadata');
    const holder = ['a', 'c'].find((name) => fs.existsSync(path.join(c.root, name, 'sites', site.id, 'db.sqlite')))!;
    const dir = path.join(c.root, 'elsewhere');
    fs.cpSync(path.join(c.root, holder, 'sites', site.id), path.join(dir, 'sites', site.id), { recursive: true });
    const bytes = fs.readFileSync(path.join(dir, 'sites', site.id, 'db.sqlite'));
    // Another, empty instance's metadata: this node starts a new instance there.
    const stranger = await startServe({
      ...c.common,
      BERTH_DATABASE_URL: await databaseFor(dir),
      BERTH_DATA_DIR: dir,
      BERTH_NODE_ID: 'node-x',
    });
    stranger.child.kill('SIGTERM');
    await stranger.exited;
    t.false(fs.existsSync(path.join(dir, 'sites', site.id)), 'not served');
    const aside = fs.readdirSync(path.join(dir, 'superseded')).find((name) => name.startsWith(site.id))!;
    t.deepEqual(fs.readFileSync(path.join(dir, 'superseded', aside, 'db.sqlite')), bytes, 'and kept whole');
  },
);

const TLS_DIR = path.resolve(import.meta.dirname, 'fixtures/cluster-tls');
const tlsFile = (name: string) => path.join(TLS_DIR, name);

cluster(
  'with BERTH_CLUSTER_TLS_* peer calls are TLS both ways: nodes reach each other, and a caller without a certificate of the cluster’s CA is refused before anything else',
  async (t) => {
    const root = await makeDataDir(t);
    const files = onObjectStore ? await objectStoreEnv(root) : { BERTH_BLOB_DIR: path.join(root, 'blobs') };
    const tls = {
      BERTH_CLUSTER_TLS_CERT: tlsFile('node.pem'),
      BERTH_CLUSTER_TLS_KEY: tlsFile('node.key'),
      BERTH_CLUSTER_TLS_CA: tlsFile('ca.pem'),
    };
    const common = {
      BERTH_DATABASE_URL: await databaseFor(path.join(root, 'c')),
      BERTH_MASTER_KEY_FILE: path.join(root, 'master.key'),
      ...files,
      ...tls,
    };
    const portC = await freePort();
    const addressC = `https://127.0.0.1:${portC}`;
    const nodeC = await startServe({
      ...common,
      BERTH_DATA_DIR: path.join(root, 'c'),
      BERTH_NODE_ID: 'node-c',
      BERTH_CLUSTER_ADDRESS: addressC,
    });
    const nodeD = await startServe({
      ...common,
      BERTH_DATA_DIR: path.join(root, 'd'),
      BERTH_NODE_ID: 'node-d',
      BERTH_CLUSTER_ADDRESS: `https://127.0.0.1:${await freePort()}`,
      BERTH_ROLES: 'web',
    });
    t.teardown(async () => {
      for (const node of [nodeC, nodeD]) {
        node.child.kill('SIGTERM');
        await node.exited;
      }
    });
    const owner = ownerOf(nodeC, nodeD.url);
    const throughD = owner.api;
    const site = json<{ id: string }>(await throughD.post('v0/sites', { json: { accountId: owner.id, name: 'tls' } }));
    const database = json<{ database: { id: string } }>(await throughD.post(`v0/sites/${site.id}/databases`)).database;
    t.true(fs.existsSync(path.join(root, 'c', 'sites', site.id, 'db.sqlite')), 'placed on the database node');
    const answered = json<{ success: boolean; result: Array<{ results: unknown[] }> }>(
      await throughD.post(`v0/sites/${site.id}/databases/${database.id}/query`, { json: { sql: 'SELECT 1 AS one' } }),
    );
    t.deepEqual(answered.result[0]!.results, [{ one: 1 }], 'a peer call crossed over TLS');

    const pathname = `/v1/site-databases/${site.id}/size`;
    const attempt = (options: { https?: Record<string, unknown>; url?: string }) =>
      got.post(options.url ?? `${addressC}${pathname}`, {
        body: '{}',
        https: options.https ?? {},
        throwHttpErrors: false,
        retry: { limit: 0 },
        timeout: { request: 5000 },
      });
    await t.throwsAsync(
      attempt({ url: `http://127.0.0.1:${portC}${pathname}` }),
      undefined,
      'plain HTTP gets no answer',
    );
    const ca = fs.readFileSync(tlsFile('ca.pem'));
    await t.throwsAsync(attempt({ https: { certificateAuthority: ca } }), undefined, 'no client certificate');
    await t.throwsAsync(
      attempt({
        https: {
          certificateAuthority: ca,
          certificate: fs.readFileSync(tlsFile('stranger.pem')),
          key: fs.readFileSync(tlsFile('stranger.key')),
        },
      }),
      undefined,
      'a certificate of another CA',
    );
    const unsigned = await attempt({
      https: {
        certificateAuthority: ca,
        certificate: fs.readFileSync(tlsFile('node.pem')),
        key: fs.readFileSync(tlsFile('node.key')),
      },
    });
    t.is(unsigned.statusCode, 401, 'a cluster certificate still needs the signature');
  },
);
