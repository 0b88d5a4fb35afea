// Two `berth serve` processes on one PostgreSQL database, one blob folder and one master key behave as
// one instance: what is changed through one is what the other serves within a second; a cron time is
// run once; one's start leaves the other's work alone; sessions, CLI logins and sign-in limits are
// the instance's, not a process's. (On SQLite one server owns its metadata, by the data dir's lock:
// these run in the suite's PostgreSQL pass.)
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import got from 'got';
import { type TestAccount, apiClient, json, makeDataDir } from './helpers/berth.ts';
import { type ServeProcess, startServe } from './helpers/process.ts';
import { type ChallengeDns, startChallengeDns } from './helpers/challenge-dns.ts';
import { asAdmin, databaseOf, onPostgres } from './helpers/postgres.ts';
import { ownerOf, sharedInstance, siteOn, stopServed } from './helpers/served.ts';
import { openLogStream } from './helpers/log-stream.ts';
import { until } from './helpers/until.ts';
import { deployFiles } from './helpers/deployments.ts';
import { type NpmRegistry, fixturePackage, startNpmRegistry } from './helpers/npm-registry.ts';
import { DEFAULTS } from '../control-plane/config.ts';
import { openMetadata } from '../control-plane/db/metadata.ts';
import { createUser } from '../control-plane/services/users.ts';

const shared = onPostgres ? test.serial : test.skip;
const PASSWORD = 'a long enough password';

interface Instance {
  /** What both servers are started with besides their data dirs. */
  common: Record<string, string>;
  dirA: string;
  a: ServeProcess;
  b: ServeProcess;
  owner: TestAccount;
  url: string;
  database: string;
}

let instance: Instance;
let dns: ChallengeDns | undefined;
let registry: NpmRegistry | undefined;

test.before(async () => {
  if (!onPostgres) return;
  dns = await startChallengeDns();
  registry = await startNpmRegistry();
  await registry.publish(fixturePackage('berth-fixture-shout'));
  const root = await makeDataDir();
  const [dirA, dirB] = [path.join(root, 'a'), path.join(root, 'b')];
  // Files in one blob dir on either pass: what these tests change is the metadata and the caches.
  const common: Record<string, string> = {
    ...(await sharedInstance(root, dirA, 'blob dir')),
    BERTH_CRON_TICK_MS: '100',
    BERTH_DNS_SERVERS: dns.address,
    BERTH_ANALYTICS_FLUSH_MS: '500',
    BERTH_NPM_REGISTRY: registry.url,
    BERTH_NPM_MIN_AGE_MINUTES: '0',
  };
  const url = common.BERTH_DATABASE_URL!;
  const a = await startServe({ ...common, BERTH_DATA_DIR: dirA });
  const b = await startServe({ ...common, BERTH_DATA_DIR: dirB });
  instance = { common, dirA, a, b, owner: ownerOf(a), url, database: databaseOf(dirA) };
});

test.after.always(async () => {
  await stopServed([instance?.a, instance?.b]);
  await dns?.stop();
  await registry?.stop();
});

/** Polls for at most a second: what one server changed, the other must serve by then. */
async function withinASecond(check: () => Promise<boolean>, what: string): Promise<boolean> {
  const deadline = Date.now() + 1000;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) throw new Error(`${what} was not seen by the other server within a second`);
    await sleep(25);
  }
}

async function makeSite(name: string) {
  const { owner: account } = instance;
  return json<{ id: string; subdomain: string; bucketId: string }>(
    await account.api.post('v0/sites', { json: { accountId: account.id, name } }),
  );
}

shared('only the first start makes an owner; both servers take the same keys', async (t) => {
  t.false(instance.b.output().includes('WRITE key'), 'the second start found the instance made');
  t.is((await apiClient(instance.b.url, instance.owner.readKey).get('v0/accounts/current')).statusCode, 200);
});

shared(
  'a file written, a site made PRIVATE or archived, through one server: the other serves it within a second',
  async (t) => {
    const site = await makeSite('shared');
    const put = (body: string) =>
      instance.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/index.html`, {
        body,
        headers: { 'content-type': 'text/html' },
      });
    t.is((await put('<h1>one</h1>')).statusCode, 200);
    const onB = siteOn(instance.b, site.subdomain);
    t.is((await onB.get('')).body, '<h1>one</h1>', 'B has it cached now');
    t.is((await put('<h1>two</h1>')).statusCode, 200);
    t.true(await withinASecond(async () => (await onB.get('')).body === '<h1>two</h1>', 'the new version'));

    t.is((await instance.owner.api.post(`v0/sites/${site.id}`, { json: { access: 'PRIVATE' } })).statusCode, 200);
    t.true(await withinASecond(async () => (await onB.get('')).statusCode === 401, 'PRIVATE'));
    t.is((await instance.owner.api.post(`v0/sites/${site.id}`, { json: { access: 'PUBLIC' } })).statusCode, 200);
    t.true(await withinASecond(async () => (await onB.get('')).statusCode === 200, 'PUBLIC again'));
    t.is((await instance.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } })).statusCode, 200);
    t.true(await withinASecond(async () => (await onB.get('')).statusCode === 404, 'archived'));
  },
);

shared(
  'a function redeployed and a secret rotated through one server: the other serves them within a second',
  async (t) => {
    const site = await makeSite('functions');
    const deploy = (text: string) =>
      instance.owner.api.put(`v0/buckets/${site.bucketId}/objects/api/hello.ts`, {
        body: `export default async (_req: Request, ctx: any) => Response.json({ text: '${text}', secret: await ctx.secrets.get('TOKEN') });`,
        headers: { 'content-type': 'text/typescript' },
      });
    t.is((await deploy('first')).statusCode, 200);
    t.is(
      (await instance.owner.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'TOKEN', value: 'old' } }))
        .statusCode,
      200,
    );
    const onB = siteOn(instance.b, site.subdomain);
    t.deepEqual(JSON.parse((await onB.get('api/hello')).body), { text: 'first', secret: 'old' }, 'B runs it warm now');
    t.is((await deploy('second')).statusCode, 200);
    t.true(
      await withinASecond(
        async () => JSON.parse((await onB.get('api/hello')).body).text === 'second',
        'the redeployed function',
      ),
    );
    t.is(
      (await instance.owner.api.post(`v0/sites/${site.id}/secrets/TOKEN`, { json: { value: 'new' } })).statusCode,
      200,
    );
    t.true(
      await withinASecond(
        async () => JSON.parse((await onB.get('api/hello')).body).secret === 'new',
        'the rotated secret',
      ),
    );
  },
);

shared(
  'a custom domain verified, made canonical or removed through one server: the other serves it so within a second',
  async (t) => {
    const site = await makeSite('domains');
    await instance.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/index.html`, {
      body: '<p>on my own name</p>',
      headers: { 'content-type': 'text/html' },
    });
    const domains = `v0/sites/${site.id}/domains`;
    const onB = (hostname: string) =>
      got.extend({
        prefixUrl: instance.b.url,
        headers: { host: hostname },
        throwHttpErrors: false,
        followRedirect: false,
        retry: { limit: 0 },
      });
    for (const hostname of ['two.example.com', 'www.two.example.com']) {
      const { domain } = json<{ domain: { verification: { name: string; value: string } } }>(
        await instance.owner.api.post(domains, { json: { hostname } }),
      );
      await dns!.setTxt(domain.verification.name, domain.verification.value);
      t.is((await instance.owner.api.post(`${domains}/${hostname}/verify`)).statusCode, 200);
    }
    t.true(
      await withinASecond(
        async () => (await onB('two.example.com').get('')).body === '<p>on my own name</p>',
        'the domain',
      ),
    );
    t.is(
      (await instance.owner.api.post(`${domains}/www.two.example.com`, { json: { canonical: true } })).statusCode,
      200,
    );
    t.true(
      await withinASecond(
        async () => (await onB('two.example.com').get('')).statusCode === 308,
        'the canonical redirect',
      ),
    );
    t.is((await instance.owner.api.delete(`${domains}/www.two.example.com`)).statusCode, 200);
    t.is((await instance.owner.api.delete(`${domains}/two.example.com`)).statusCode, 200);
    t.true(
      await withinASecond(
        async () => !(await onB('two.example.com').get('')).body.includes('on my own name'),
        'the removal',
      ),
    );
  },
);

shared(
  'a function built on one server runs on the other, and the other builds the next deployment, with the registry stopped',
  async (t) => {
    const site = await makeSite('built');
    const files = {
      'lib/name.ts': 'export const name = "one";\n',
      'api/hello.ts':
        "import { shout } from 'npm:berth-fixture-shout@1';\nimport { name } from '../lib/name.ts';\nexport default () => new Response(shout(name));\n",
    };
    await deployFiles(instance.owner, site.id, files);
    await registry!.stop();
    const onB = siteOn(instance.b, site.subdomain);
    t.is((await onB.get('api/hello')).body, 'ONE!', 'B serves the module A built');
    const throughB = { ...instance.owner, api: apiClient(instance.b.url, instance.owner.writeKey) };
    await deployFiles(throughB, site.id, { ...files, 'lib/name.ts': 'export const name = "two";\n' });
    t.true(
      await withinASecond(
        async () => (await siteOn(instance.a, site.subdomain).get('api/hello')).body === 'TWO!',
        'the module B built',
      ),
    );
  },
);

shared('a line a function logs on one server reaches a live log stream open on the other', async (t) => {
  const site = await makeSite('live logs');
  const written = await instance.owner.api.put(`v0/buckets/${site.bucketId}/objects/api/say.ts`, {
    body: "export default (req: Request) => { console.warn(new URL(req.url).searchParams.get('m')); return new Response('said'); };",
    headers: { 'content-type': 'text/typescript' },
  });
  t.is(written.statusCode, 200);
  const stream = await openLogStream(instance.a.url, instance.owner.readKey, site.id);
  t.teardown(() => stream.close());
  t.is(stream.status, 200);
  const onB = siteOn(instance.b, site.subdomain);
  t.is((await onB.get('api/say', { searchParams: { m: 'from node B' } })).statusCode, 200);
  // Two seconds, well under the streams' 5 s poll: B's stored batch is announced to A by the change feed.
  const line = await until(() => stream.lines().find((l) => l.message === 'from node B'), 'the line on A', {
    ms: 2000,
  });
  t.like(line, { level: 'warn', functionPath: 'api/say.ts' });
});

shared(
  'deployments published through one server: a reader of the other never gets an old file after a new one',
  async (t) => {
    const site = await makeSite('deployments');
    const api = instance.owner.api;
    const build = (n: number) => ({
      files: [
        { path: 'web/index.html', content: `build ${n}`, contentType: 'text/html' },
        { path: 'web/app.js', content: `build ${n}`, contentType: 'text/javascript' },
        {
          path: 'api/version.ts',
          content: `export default () => new Response('build ${n}');\n`,
          contentType: 'text/typescript',
        },
      ],
    });
    const publish = async (n: number) => {
      const { deployment } = json<{ deployment: { id: string } }>(
        await api.post(`v0/sites/${site.id}/deployments`, { json: build(n) }),
      );
      t.is((await api.post(`v0/sites/${site.id}/deployments/${deployment.id}/publish`)).statusCode, 200);
    };
    await publish(0);
    const onB = siteOn(instance.b, site.subdomain);
    let stop = false;
    const seen: number[] = [];
    const reader = (async () => {
      while (!stop) {
        for (const path of ['index.html', 'app.js', 'api/version']) {
          const res = await onB.get(path);
          seen.push(Number(/^build (\d+)$/.exec(res.body)?.[1] ?? -1));
        }
      }
    })();
    for (let n = 1; n <= 5; n++) await publish(n);
    t.true(await withinASecond(async () => seen.at(-1) === 5, 'the last build'));
    stop = true;
    await reader;
    t.false(seen.includes(-1), 'every answer was a build');
    const backwards = seen.findIndex((n, i) => i > 0 && n < seen[i - 1]!);
    t.is(
      backwards,
      -1,
      `went back at ${backwards}: ${seen.slice(Math.max(0, backwards - 3), backwards + 3).join(', ')}`,
    );
  },
);

shared('requests served by both servers add up in the site’s analytics, none counted twice', async (t) => {
  const site = await makeSite('counted');
  const put = await instance.owner.api.put(`v0/buckets/${site.bucketId}/objects/web/index.html`, {
    body: '<h1>counted</h1>',
    headers: { 'content-type': 'text/html' },
  });
  t.is(put.statusCode, 200);
  const [onA, onB] = [siteOn(instance.a, site.subdomain), siteOn(instance.b, site.subdomain)];
  for (let i = 0; i < 20; i++) t.is((await onA.get('')).statusCode, 200);
  for (let i = 0; i < 17; i++) t.is((await onB.get('')).statusCode, 200);
  for (let i = 0; i < 5; i++) t.is((await onB.get('missing.html')).statusCode, 404);

  interface Totals {
    requests: number;
    status: Record<string, number>;
  }
  const totalsOn = async (server: ServeProcess) =>
    json<{ totals: Totals }>(await apiClient(server.url, instance.owner.readKey).get(`v0/sites/${site.id}/analytics`))
      .totals;
  // A read writes its own server's counts first; the other writes its own every 500 ms.
  const deadline = Date.now() + 10_000;
  let totals = await totalsOn(instance.a);
  while (totals.requests < 42 && Date.now() < deadline) {
    await sleep(200);
    totals = await totalsOn(instance.a);
  }
  t.is(totals.requests, 42);
  await sleep(1500);
  for (const server of [instance.a, instance.b]) {
    totals = await totalsOn(server);
    t.is(totals.requests, 42, 'still, after both servers wrote again');
    t.deepEqual(totals.status, { '2xx': 37, '3xx': 0, '4xx': 5, '5xx': 0 });
  }
});

shared('a cron time due on both servers is run once', async (t) => {
  const site = await makeSite('cron');
  const job = 'export const schedule = "* * * * *";\nexport function handler() {}\n';
  const put = await instance.owner.api.put(`v0/buckets/${site.bucketId}/objects/cron/tick.ts`, {
    body: job,
    headers: { 'content-type': 'text/typescript' },
  });
  t.is(json<{ deployment: { status: string } }>(put).deployment.status, 'READY');
  // As if the job had last run long ago: both schedulers find its latest time due at their next tick.
  await asAdmin(
    (client) =>
      client.query("UPDATE functions SET cron_last_scheduled_at = '2000-01-01T00:00:00.000Z' WHERE site_id = $1", [
        site.id,
      ]),
    instance.database,
  );
  const runs = async () =>
    json<{ runs: Array<{ scheduledAt: string; outcome: string }> }>(
      await instance.owner.read.get(`v0/sites/${site.id}/cron_runs`),
    ).runs;
  const finished = await (async () => {
    for (let i = 0; i < 100; i++) {
      const seen = await runs();
      if (seen.some((r) => r.outcome === 'SUCCEEDED')) return seen;
      await sleep(50);
    }
    return runs();
  })();
  await sleep(500); // a second claim, were there one, would have been made by now
  t.is((await runs()).length, 1, JSON.stringify(finished));
});

shared('a session, a CLI login and the sign-in limit belong to the instance', async (t) => {
  const metadata = await openMetadata({ ...DEFAULTS, databaseUrl: instance.url });
  await createUser(
    { db: metadata.db, now: () => new Date() },
    { email: 'ada@example.com', accountId: instance.owner.id, role: 'ADMIN', password: PASSWORD },
  );
  await metadata.close();
  const control = (server: ServeProcess) =>
    got.extend({
      prefixUrl: server.url,
      throwHttpErrors: false,
      followRedirect: false,
      retry: { limit: 0 },
      responseType: 'json',
    });

  const signedIn = await control(instance.a).post('login', { json: { email: 'ada@example.com', password: PASSWORD } });
  t.is(signedIn.statusCode, 200);
  const cookie = (signedIn.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('__Host-berth_console='))!
    .split(';')[0]!;
  const session = await control(instance.b).get('session', { headers: { cookie } });
  t.is(session.statusCode, 200, 'signed in through A, known to B');
  const csrf = json<{ csrfToken: string }>(session).csrfToken;

  const started = json<{ login: { code: string }; pollToken: string }>(
    await control(instance.a).post('cli-login', { json: { machine: 'laptop' } }),
  );
  t.is(
    (await control(instance.b).post('cli-login/poll', { json: { pollToken: started.pollToken } })).statusCode,
    202,
    'pending, seen from B',
  );
  const approved = await control(instance.b).post(`v0/cli-logins/${started.login.code}/approve`, {
    headers: { cookie, 'x-csrf-token': csrf },
    json: { permission: 'READ' },
  });
  t.is(approved.statusCode, 200);
  const collected = await control(instance.a).post('cli-login/poll', { json: { pollToken: started.pollToken } });
  t.is(collected.statusCode, 200, 'approved on B, collected on A');

  // Five failures per email in a quarter of an hour, wherever they are tried.
  for (const server of [instance.a, instance.b, instance.a, instance.b, instance.a]) {
    t.is(
      (await control(server).post('login', { json: { email: 'ada@example.com', password: 'wrong password!' } }))
        .statusCode,
      401,
    );
  }
  const limited = await control(instance.b).post('login', { json: { email: 'ada@example.com', password: PASSWORD } });
  t.is(limited.statusCode, 429, 'the sixth try is refused, on either server');
});

shared('a server restarting leaves the other server’s export and migration lease alone', async (t) => {
  const site = await makeSite('restart');
  const database = json<{ database: { id: string } }>(
    await instance.owner.api.post(`v0/sites/${site.id}/databases`),
  ).database;
  const now = new Date().toISOString();
  const later = new Date(Date.now() + 600_000).toISOString();
  const theirs = { node_id: 'another-node:/srv/berth' };
  await asAdmin(async (client) => {
    await client.query(
      "INSERT INTO database_exports (id, database_id, site_id, status, created_at, node_id) VALUES ('export-of-b', $1, $2, 'PROCESSING', $3, $4)",
      [database.id, site.id, now, theirs.node_id],
    );
    await client.query(
      "INSERT INTO migration_leases (database_id, holder, acquired_at, expires_at, node_id) VALUES ($1, 'b', $2, $3, $4)",
      [database.id, now, later, theirs.node_id],
    );
  }, instance.database);

  instance.a.child.kill('SIGTERM');
  t.is(await instance.a.exited, 0);
  instance.a = await startServe({ ...instance.common, BERTH_DATA_DIR: instance.dirA });

  const still = await asAdmin(
    async (client) => ({
      export: (await client.query("SELECT status FROM database_exports WHERE id = 'export-of-b'")).rows[0]
        ?.status as string,
      lease: (await client.query('SELECT holder FROM migration_leases WHERE database_id = $1', [database.id])).rows[0]
        ?.holder as string,
    }),
    instance.database,
  );
  t.deepEqual(still, { export: 'PROCESSING', lease: 'b' });
  const a = apiClient(instance.a.url, instance.owner.writeKey);
  const blocked = await a.post(`v0/sites/${site.id}/databases/${database.id}/exports`);
  t.is(blocked.statusCode, 409, 'the other server’s export still counts');
  t.is(json(blocked).error.code, 'export_in_progress');
});
