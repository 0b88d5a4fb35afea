// Three nodes of one instance behind Debian's nginx as the load balancer, as docs/cluster.md sets it
// up: two with the database role and one web-only, sharing PostgreSQL, the object store and the
// master key. Everything done through the balancer (sites, files, functions, a database and its
// migration, ctx.db, signing in to a PRIVATE site) is then seen through every node on its own. With
// the node that holds a database killed under load through the balancer, no acknowledged write is
// lost, that database answers 503 until its node is back, and another site's database goes on. A node
// drained under load moves its databases with no call failed and every row kept; a node lost for good
// has its databases taken over from their replicas by the other database node, by itself; a node lost
// with its data dir has its database recovered by the operator from its replica in the object store.
// (Shared metadata: the PostgreSQL pass.)
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import got, { type Got } from 'got';
import { type TestAccount, apiClient, json, makeDataDir } from '../helpers/berth.ts';
import { type ServeProcess, runBerth, startServe } from '../helpers/process.ts';
import { databaseFor, onPostgres } from '../helpers/postgres.ts';
import { objectStoreEnv, onObjectStore } from '../helpers/object-store.ts';
import { freePort } from '../helpers/ports.ts';
import { ownerOf } from '../helpers/served.ts';
import { type Nginx, startNginx } from '../helpers/nginx.ts';
import { until } from '../helpers/until.ts';

const PASSWORD = 'a long enough password';
const cluster = onPostgres ? test.serial : test.skip;

interface Node {
  name: string;
  env: Record<string, string>;
  port: number;
  server: ServeProcess;
}

let root: string;
let nodes: Node[];
let nginx: Nginx;
let lbPort: number;
let owner: TestAccount;

const NOTES = `export default async (req: Request, ctx: any) => {
  try {
    if (req.method === 'POST') return Response.json(await ctx.db.execute('INSERT INTO notes (body) VALUES (?)', [await req.text()]));
    return Response.json(await ctx.db.query('SELECT body FROM notes ORDER BY id'));
  } catch (err) {
    return Response.json({ code: (err as { code?: string }).code }, { status: 503 });
  }
};`;

/** The balancer of docs/cluster.md, with the test's ports and without TLS. */
function balancer(): string {
  return `  upstream berth {
${nodes.map((node) => `    server 127.0.0.1:${node.port} max_fails=1 fail_timeout=5s;`).join('\n')}
    keepalive 32;
  }
  server {
    listen 127.0.0.1:${lbPort};
    client_max_body_size 0;
    location / {
      proxy_pass http://berth;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_request_buffering off;
      proxy_buffering off;
      proxy_connect_timeout 2s;
      proxy_next_upstream error timeout;
    }
  }`;
}

test.before(async () => {
  if (!onPostgres) return;
  root = await makeDataDir();
  lbPort = await freePort();
  const files = onObjectStore ? await objectStoreEnv(root) : { BERTH_BLOB_DIR: path.join(root, 'blobs') };
  const common = {
    BERTH_DATABASE_URL: await databaseFor(path.join(root, 'node-1')),
    BERTH_MASTER_KEY_FILE: path.join(root, 'master.key'),
    // Links Berth makes (the sign-in redirect to a site) point at the balancer.
    BERTH_PUBLIC_URL: `http://localhost:${lbPort}`,
    ...files,
  };
  nodes = [];
  for (const [name, roles] of [
    ['node-1', 'web,database'],
    ['node-2', 'web,database'],
    ['node-3', 'web'],
  ] as const) {
    const port = await freePort();
    const env = {
      ...common,
      BERTH_DATA_DIR: path.join(root, name),
      BERTH_NODE_ID: name,
      BERTH_ROLES: roles,
      BERTH_PORT: String(port),
      BERTH_CLUSTER_ADDRESS: `http://127.0.0.1:${await freePort()}`,
    };
    nodes.push({ name, env, port, server: await startServe(env) });
  }
  owner = ownerOf(nodes[0]!.server);
  nginx = await startNginx(balancer, lbPort);
});

test.after.always(async () => {
  nginx?.stop();
  for (const node of nodes ?? []) {
    if (node.server.child.exitCode !== null) continue;
    node.server.child.kill('SIGTERM');
    await node.server.exited;
  }
});

const lb = () => apiClient(`http://localhost:${lbPort}`, owner.writeKey);
const direct = (node: Node) => apiClient(node.server.url, owner.writeKey);
const siteAt = (port: number, subdomain: string): Got =>
  got.extend({
    prefixUrl: `http://127.0.0.1:${port}`,
    headers: { host: `${subdomain}.localhost:${port}` },
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
  });
/** A site's host through the balancer: the Host header names the balancer's port, as a browser's would. */
const siteThroughLb = (subdomain: string): Got => siteAt(lbPort, subdomain);

/** A site with a file, a function using ctx.db, a database and a migrated notes table, all made through the balancer. */
async function siteWithNotes(name: string) {
  const api = lb();
  const site = json<{ id: string; subdomain: string; bucketId: string }>(
    await api.post('v0/sites', { json: { accountId: owner.id, name } }),
  );
  for (const [file, body, type] of [
    ['web/index.html', `<h1>${name}</h1>`, 'text/html'],
    ['api/notes.ts', NOTES, 'text/typescript'],
  ] as const) {
    const put = await api.put(`v0/buckets/${site.bucketId}/objects/${file}`, {
      body,
      headers: { 'content-type': type },
    });
    if (put.statusCode !== 200) throw new Error(`${file}: ${put.statusCode} ${put.body}`);
  }
  const database = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${database.id}`;
  const migrated = await api.post(`${base}/migrations`, {
    json: {
      name: '0001_notes.sql',
      sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);',
      confirm: true,
    },
  });
  if (migrated.statusCode !== 200) throw new Error(`migration: ${migrated.statusCode} ${migrated.body}`);
  return { site, base };
}

const holderOf = (siteId: string) =>
  nodes.find((node) => fs.existsSync(path.join(root, node.name, 'sites', siteId, 'db.sqlite')));

cluster(
  'through the balancer: a site, its files, a function, a database, a migration and ctx.db; every node serves what was done through another',
  async (t) => {
    const { site, base } = await siteWithNotes('balanced');
    for (let i = 0; i < 6; i++)
      t.is((await siteThroughLb(site.subdomain).post('api/notes', { body: `note ${i}` })).statusCode, 200);
    const expected = Array.from({ length: 6 }, (_, i) => ({ body: `note ${i}` }));
    t.truthy(holderOf(site.id), 'the database is on a database node');
    t.falsy(fs.existsSync(path.join(root, 'node-3', 'sites', site.id)), 'never on the web-only node');
    for (const node of nodes) {
      const page = await siteAt(node.port, site.subdomain).get('');
      t.is(page.body, '<h1>balanced</h1>', `${node.name} serves the file`);
      t.deepEqual(
        JSON.parse((await siteAt(node.port, site.subdomain).get('api/notes')).body),
        expected,
        `${node.name} runs the function, whose ctx.db reaches the database`,
      );
      const queried = json<{ result: Array<{ results: unknown[] }> }>(
        await direct(node).post(`${base}/query`, { json: { sql: 'SELECT body FROM notes ORDER BY id' } }),
      );
      t.deepEqual(queried.result[0]!.results, expected, `${node.name} answers the query endpoint`);
      const receipts = json<{ applied: Array<{ name: string }> }>(await direct(node).get(`${base}/migrations`));
      t.deepEqual(
        receipts.applied.map((m) => m.name),
        ['0001_notes.sql'],
        `${node.name} lists the migration`,
      );
    }
  },
);

cluster('a member signs in to a PRIVATE site through the balancer, and the session holds on every node', async (t) => {
  const created = await runBerth(
    [
      'admin',
      'create-user',
      '--email',
      'member@example.com',
      '--account',
      owner.id,
      '--role',
      'MEMBER',
      '--password-stdin',
    ],
    nodes[0]!.env,
    PASSWORD,
  );
  t.is(created.code, 0, created.stderr);
  const api = lb();
  const site = json<{ id: string; subdomain: string; bucketId: string }>(
    await api.post('v0/sites', { json: { accountId: owner.id, name: 'members', access: 'PRIVATE' } }),
  );
  t.is(
    (
      await api.put(`v0/buckets/${site.bucketId}/objects/web/index.html`, {
        body: '<p>members only</p>',
        headers: { 'content-type': 'text/html' },
      })
    ).statusCode,
    200,
  );
  t.is((await siteThroughLb(site.subdomain).get('')).statusCode, 401, 'the gate, through the balancer');

  const control = got.extend({
    prefixUrl: `http://127.0.0.1:${lbPort}`,
    headers: { host: `localhost:${lbPort}` },
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
  });
  const signedIn = await control.post('login', {
    form: { email: 'member@example.com', password: PASSWORD, site: site.id, next: '/' },
  });
  t.is(signedIn.statusCode, 303, signedIn.body);
  const location = new URL(signedIn.headers.location!);
  t.is(location.host, `${site.subdomain}.localhost:${lbPort}`, 'sent to the site through the balancer');
  const exchanged = await siteThroughLb(site.subdomain).get(`${location.pathname.slice(1)}${location.search}`);
  t.is(exchanged.statusCode, 303);
  const pair = (exchanged.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('_berth_session='))!
    .split(';')[0]!;
  for (const node of nodes) {
    const page = await siteAt(node.port, site.subdomain).get('', { headers: { cookie: pair } });
    t.is(page.body, '<p>members only</p>', `${node.name} knows the session`);
  }
});

cluster(
  'kill -9 of the node holding a database, under load through the balancer: no acknowledged write is lost; that database answers 503 until its node is back, and another node’s database goes on',
  async (t) => {
    const busy = await siteWithNotes('busy');
    const holder = holderOf(busy.site.id)!;
    // A second site whose database is on the other database node.
    let other = await siteWithNotes('other');
    for (let i = 0; holderOf(other.site.id) === holder && i < 4; i++) other = await siteWithNotes(`other-${i}`);
    t.not(holderOf(other.site.id), holder, 'the two databases are on different nodes');

    const acknowledged: string[] = [];
    const unavailable: number[] = [];
    const otherFailures: string[] = [];
    let running = true;
    let killedAt = 0;
    const writer = async (name: string) => {
      for (let i = 0; running; i++) {
        const body = `${name}-${i}`;
        const answer = await siteThroughLb(busy.site.subdomain)
          .post('api/notes', { body, timeout: { request: 20_000 } })
          .catch(() => undefined);
        if (answer?.statusCode === 200) acknowledged.push(body);
        else if (answer?.statusCode === 503 && JSON.parse(answer.body).code === 'DATABASE_UNAVAILABLE')
          unavailable.push(Date.now());
        else await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const otherWriter = async () => {
      for (let i = 0; running; i++) {
        const answer = await siteThroughLb(other.site.subdomain)
          .post('api/notes', { body: `other-${i}` })
          .catch((err: Error) => ({ statusCode: 0, body: err.message }));
        // A request in flight on the killed node is lost with it (nginx does not resend a POST it sent).
        if (answer.statusCode !== 200 && (killedAt === 0 || Date.now() - killedAt > 3000))
          otherFailures.push(`${answer.statusCode} ${answer.body}`);
      }
    };
    const load = Promise.all([writer('w1'), writer('w2'), writer('w3'), otherWriter()]);
    await until(() => acknowledged.length >= 30, 'writes before the kill');
    holder.server.child.kill('SIGKILL');
    killedAt = Date.now();
    await holder.server.exited;
    await until(() => unavailable.some((at) => at > killedAt), 'the database to answer 503 while its node is down');
    t.is((await siteThroughLb(busy.site.subdomain).get('')).statusCode, 200, 'the site’s files are still served');

    holder.server = await startServe(holder.env);
    const back = acknowledged.length;
    await until(() => acknowledged.length > back + 10, 'writes to be acknowledged again');
    running = false;
    await load;

    const rows = (
      JSON.parse((await siteThroughLb(busy.site.subdomain).get('api/notes')).body) as Array<{ body: string }>
    ).map((row) => row.body);
    const missing = acknowledged.filter((body) => !rows.includes(body));
    t.deepEqual(missing, [], 'every acknowledged write is in the database');
    t.true(acknowledged.length > 40);
    t.deepEqual(otherFailures, [], 'the other database went on');
  },
);

cluster(
  'kill -9 of a database node that stays down: its database fails over from its replica by itself, writes succeed again through every node, and nothing acknowledged 2 s before the kill is lost',
  async (t) => {
    // The heartbeat lapses after 30 s (BERTH_DATABASE_FAILOVER_MS): longer than a test usually waits.
    t.timeout(180_000);
    const busy = await siteWithNotes('failover');
    const holder = holderOf(busy.site.id)!;
    const survivor = nodes.find((node) => node !== holder && node.env.BERTH_ROLES !== 'web')!;
    const acknowledged: Array<{ body: string; at: number }> = [];
    let running = true;
    const writer = async (name: string) => {
      for (let i = 0; running; i++) {
        const body = `${name}-${i}`;
        const answer = await siteThroughLb(busy.site.subdomain)
          .post('api/notes', { body, timeout: { request: 20_000 } })
          .catch(() => undefined);
        if (answer?.statusCode === 200) acknowledged.push({ body, at: Date.now() });
        else await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const load = Promise.all([writer('w1'), writer('w2'), writer('w3')]);
    t.teardown(() => {
      running = false;
    });
    // A database in use: writes for a while, the first ones already in its replica.
    await until(() => acknowledged.length >= 50, 'writes before the kill');
    const early = acknowledged[9]!.at;
    await until(async () => {
      const { latest } = json<{ latest: string | null }>(await lb().get(`${busy.base}/restore-points`));
      return latest !== null && Date.parse(latest) >= early;
    }, 'the first writes to reach the replica');
    holder.server.child.kill('SIGKILL');
    const killedAt = Date.now();
    await holder.server.exited;
    // Within 60 s of the kill: the heartbeat lapses (30 s), a database node takes the database over.
    await until(() => acknowledged.some((write) => write.at > killedAt + 1000), 'writes to succeed again', {
      ms: 60_000,
    });
    const backAfter = acknowledged.find((write) => write.at > killedAt + 1000)!.at - killedAt;
    for (const node of nodes.filter((node) => node !== holder)) {
      const answer = await siteAt(node.port, busy.site.subdomain).post('api/notes', { body: `via ${node.name}` });
      t.is(answer.statusCode, 200, `${node.name} takes writes`);
    }
    running = false;
    await load;
    t.true(
      fs.existsSync(path.join(root, survivor.name, 'sites', busy.site.id, 'db.sqlite')),
      'the database is on the other database node',
    );
    const rows = new Set(
      (JSON.parse((await siteThroughLb(busy.site.subdomain).get('api/notes')).body) as Array<{ body: string }>).map(
        (row) => row.body,
      ),
    );
    const lost = acknowledged.filter((write) => !rows.has(write.body));
    t.deepEqual(
      lost.filter((write) => write.at < killedAt - 2000),
      [],
      'every write acknowledged more than 2 s before the kill is there',
    );
    t.log(
      `failover: writes succeeded again ${backAfter} ms after the kill; acknowledged writes lost: ${lost.length} of ${acknowledged.length} (the last ${lost.length > 0 ? killedAt - Math.min(...lost.map((w) => w.at)) : 0} ms before the kill)`,
    );

    // The lost node comes back: its copy is set aside, never served, and the database stays where it went.
    holder.server = await startServe(holder.env);
    t.true(
      fs.readdirSync(path.join(root, holder.name, 'superseded')).some((name) => name.startsWith(busy.site.id)),
      'its old copy is set aside',
    );
    t.false(fs.existsSync(path.join(root, holder.name, 'sites', busy.site.id)));
    const after = await siteAt(holder.port, busy.site.subdomain).post('api/notes', { body: 'after the return' });
    t.is(after.statusCode, 200, 'and the returned node reaches the database where it is now');
  },
);

cluster(
  'drain-node under load through the balancer: every moved database is the same row by row, and no call fails',
  async (t) => {
    const sites = [await siteWithNotes('drained-1'), await siteWithNotes('drained-2')];
    const holder = nodes[0]!;
    const other = nodes[1]!;
    // Both databases on node-1: one made there, one moved there if it went to node-2.
    for (const { site } of sites) {
      if (holderOf(site.id) === holder) continue;
      const moved = await runBerth(['admin', 'drain-node', other.name], holder.env);
      t.is(moved.code, 0, moved.stderr);
    }
    for (const { site } of sites) t.is(holderOf(site.id), holder);
    // drain-node left node-2 draining: a restart makes it take databases again.
    other.server.child.kill('SIGTERM');
    await other.server.exited;
    other.server = await startServe(other.env);

    const [quiet, busy] = sites as [
      Awaited<ReturnType<typeof siteWithNotes>>,
      Awaited<ReturnType<typeof siteWithNotes>>,
    ];
    await lb().post(`${quiet.base}/query`, {
      json: {
        sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO notes (body) SELECT 'row ' || i FROM n",
      },
    });
    const everything = async (base: string) =>
      json<{ result: Array<{ results: unknown[] }> }>(
        await lb().post(`${base}/query`, { json: { sql: 'SELECT id, body FROM notes ORDER BY id' } }),
      ).result[0]!.results;
    const before = await everything(quiet.base);
    t.is(before.length, 2000);

    const acknowledged: string[] = [];
    const failed: string[] = [];
    let running = true;
    const writer = async (name: string) => {
      for (let i = 0; running; i++) {
        const answer = await siteThroughLb(busy.site.subdomain).post('api/notes', { body: `${name}-${i}` });
        if (answer.statusCode === 200) acknowledged.push(`${name}-${i}`);
        else failed.push(`${answer.statusCode} ${answer.body}`);
      }
    };
    const load = Promise.all([writer('a'), writer('b'), writer('c')]);
    await until(() => acknowledged.length >= 20, 'writes before the drain');
    const drained = await runBerth(['admin', 'drain-node', holder.name, '--json'], nodes[2]!.env);
    running = false;
    await load;
    t.is(drained.code, 0, drained.stdout + drained.stderr);
    t.deepEqual(failed, [], 'no call failed while the databases moved');
    for (const { site } of sites) t.is(holderOf(site.id), other, 'moved to the other database node');
    t.deepEqual(await everything(quiet.base), before, 'the quiet database, row by row');
    const bodies = ((await everything(busy.base)) as Array<{ body: string }>).map((row) => row.body);
    t.deepEqual([...bodies].sort(), [...acknowledged].sort(), 'every acknowledged write, and nothing else');

    holder.server.child.kill('SIGTERM');
    await holder.server.exited;
    holder.server = await startServe(holder.env);
  },
);

cluster(
  'recover-database after a database node and its data dir are lost: the site answers again through the balancer from its replica',
  async (t) => {
    const lost = await siteWithNotes('lost');
    const holder = holderOf(lost.site.id)!;
    const survivor = nodes.find((node) => node !== holder && node.env.BERTH_ROLES !== 'web')!;
    await lb().post(`${lost.base}/query`, { json: { sql: "INSERT INTO notes (body) VALUES ('in the replica')" } });
    // The replica holds every write before `latest` (whole seconds): one at or after the insert's answer.
    const written = Date.now();
    await until(async () => {
      const { latest } = json<{ latest: string | null }>(await lb().get(`${lost.base}/restore-points`));
      return latest !== null && Date.parse(latest) >= written;
    }, 'the write to reach the replica');

    holder.server.child.kill('SIGKILL');
    await holder.server.exited;
    fs.rmSync(holder.env.BERTH_DATA_DIR!, { recursive: true, force: true });
    const state = async () =>
      (
        JSON.parse((await runBerth(['admin', 'nodes', '--json'], survivor.env)).stdout) as {
          nodes: Array<{ id: string; state: string }>;
        }
      ).nodes.find((n) => n.id === holder.name)!.state;
    await until(async () => (await state()) === 'down', 'the lost node to be seen down');
    const recovered = await runBerth(['admin', 'recover-database', '--site', lost.site.id], survivor.env);
    t.is(recovered.code, 0, recovered.stderr);
    t.regex(
      recovered.stdout,
      new RegExp(
        `recovered the database of site ${lost.site.id} on ${survivor.name} from its replica, which last received writes at \\S+ \\(\\d+ seconds ago\\)`,
      ),
    );
    t.deepEqual(JSON.parse((await siteThroughLb(lost.site.subdomain).get('api/notes')).body), [
      { body: 'in the replica' },
    ]);
    t.is((await siteThroughLb(lost.site.subdomain).post('api/notes', { body: 'after' })).statusCode, 200);

    holder.server = await startServe(holder.env);
  },
);
