// A preview runs its functions on a branch of the site's database, never on the database itself: a
// deployment's branch is the database as of the deployment's creation with its migrations applied on
// top, an instant's the database as it was then (from its replica). What a preview writes stays on its
// branch; a branch whose migrations fail is the preview's answer and the deployment's record; a branch
// ends with its deployment. Through real HTTP on the preview hosts, the query API's `branch` and the
// deployments API.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, json, startTestBerth } from './helpers/berth.ts';
import { type Envelope, siteWithDatabase } from './helpers/databases.ts';
import { type Deployment, typeOf } from './helpers/deployments.ts';
import { memberOf } from './helpers/site-member.ts';
import { until } from './helpers/until.ts';
import { INSTANT_BRANCH_IDLE_MS, sweepBranches } from '../control-plane/database-branches/branch-sweep.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

/** A function that lists the notes table's columns and rows, and adds a note on POST. */
const NOTES = `export default async (req: Request, ctx: any) => {
  if (req.method === 'POST') {
    const { body } = await req.json();
    await ctx.db.execute('INSERT INTO notes (body) VALUES (?)', [body]);
  }
  const columns = (await ctx.db.query("SELECT name FROM pragma_table_info('notes') ORDER BY cid")).map((c: any) => c.name);
  const notes = (await ctx.db.query('SELECT body FROM notes ORDER BY id')).map((n: any) => n.body);
  return Response.json({ columns, notes });
};
`;

const INIT = { name: '0001_notes.sql', sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);' };
const PINNED = { name: '0002_pinned.sql', sql: 'ALTER TABLE notes ADD COLUMN pinned INTEGER;' };

type Site = Awaited<ReturnType<typeof siteWithDatabase>>;

/** Declares a deployment of inline files with migrations; published too when `publish`. */
async function deployment(
  site: Site,
  files: Record<string, string>,
  migrations: Array<{ name: string; sql: string }>,
  publish = false,
): Promise<Deployment> {
  const res = await t0.owner.api.post(`v0/sites/${site.site.id}/deployments`, {
    json: {
      files: Object.entries(files).map(([p, content]) => ({ path: p, content, contentType: typeOf(p) })),
      migrations,
    },
  });
  if (res.statusCode !== 201) throw new Error(`create: ${res.statusCode} ${JSON.stringify(res.body)}`);
  const created = json<{ deployment: Deployment }>(res).deployment;
  if (!publish) return created;
  const published = await t0.owner.api.post(`v0/sites/${site.site.id}/deployments/${created.id}/publish`);
  if (published.statusCode !== 200) throw new Error(`publish: ${JSON.stringify(published.body)}`);
  return json<{ deployment: Deployment }>(published).deployment;
}

interface Branch {
  branch: string;
  status: string;
  madeFrom: string | null;
  asOf: string | null;
  bytes: number;
  error: string | null;
}

const branchOf = async (site: Site, deploymentId: string): Promise<Branch | null> =>
  json<{ deployment: { databaseBranch: Branch | null } }>(
    await t0.owner.read.get(`v0/sites/${site.site.id}/deployments/${deploymentId}`),
  ).deployment.databaseBranch;

/** A site host answers text: its JSON read. */
const parsed = <T>(res: { body: unknown }): T => JSON.parse(String(res.body)) as T;
const notesOf = (res: { body: unknown }) => parsed<{ columns: string[]; notes: string[] }>(res);

/**
 * Adds a note through the query API and waits until the replica holds it. Time travel gives back what
 * the replica held at a moment, so a row must be shipped before the moment a branch is made of.
 */
async function shippedRow(site: Site, body: string): Promise<void> {
  const added = await site.query('INSERT INTO notes (body) VALUES (?)', [body]);
  if (added.status !== 200) throw new Error(JSON.stringify(added.body));
  const written = Date.now();
  await until(async () => {
    const points = json<{ latest: string | null }>(await t0.owner.read.get(`${site.base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) > written;
  }, 'the replica to hold the row');
}

const branchFolders = () =>
  fs.existsSync(path.join(t0.config.dataDir, 'branches'))
    ? fs.readdirSync(path.join(t0.config.dataDir, 'branches'))
    : [];

test('a preview’s writes stay on its branch, and a deployment with a migration answers with the new schema while the live site keeps the old', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deployment(site, { 'api/notes.ts': NOTES }, [INIT], true);
  const live = t0.site(site.site.subdomain);
  t.deepEqual(notesOf(await live.post('api/notes', { json: { body: 'live one' } })), {
    columns: ['id', 'body'],
    notes: ['live one'],
  });

  const next = await deployment(site, { 'api/notes.ts': NOTES }, [INIT, PINNED]);
  t.is(await branchOf(site, next.id), null, 'no branch before the preview’s first database call');
  const preview = await memberOf(t0, t0.owner.id, site.site.id, `${next.shortId}--${site.site.subdomain}`);
  const seen = await preview.post('api/notes', { json: { body: 'preview one' } });
  t.is(seen.statusCode, 200, JSON.stringify(seen.body));
  t.deepEqual(notesOf(seen), { columns: ['id', 'body', 'pinned'], notes: ['live one', 'preview one'] });

  t.deepEqual(
    notesOf(await live.get('api/notes')),
    { columns: ['id', 'body'], notes: ['live one'] },
    'the live database has neither the preview’s row nor its migration',
  );
  const branch = await branchOf(site, next.id);
  t.like(branch, { branch: next.id, status: 'READY', error: null });
  t.true(branch!.bytes > 0);
  t.truthy(branch!.asOf);

  // The query API opens the branch by its deployment's id; without it, the database itself.
  const onBranch = await t0.owner.api.post(`${site.base}/query`, {
    json: { sql: 'SELECT body FROM notes ORDER BY id', branch: next.id, readOnly: true },
  });
  t.is(onBranch.statusCode, 200);
  t.deepEqual(
    json<Envelope>(onBranch).result[0]!.results.map((r) => r.body),
    ['live one', 'preview one'],
  );
  const receipts = await t0.owner.api.post(`${site.base}/query`, {
    json: { sql: 'SELECT name FROM _berth_migrations ORDER BY id', branch: next.id },
  });
  t.deepEqual(
    json<Envelope>(receipts).result[0]!.results.map((r) => r.name),
    ['0001_notes.sql', '0002_pinned.sql'],
    'the branch holds the deployment’s migrations with their receipts',
  );
  t.deepEqual(
    (await site.query('SELECT body FROM notes ORDER BY id')).body.result[0]!.results.map((r) => r.body),
    ['live one'],
  );
  t.true(branchFolders().includes(`${site.site.id}.${next.id}`));

  // Published: its migration reaches the database itself, its preview's row does not, and the branch is gone.
  const published = await t0.owner.api.post(`v0/sites/${site.site.id}/deployments/${next.id}/publish`);
  t.is(published.statusCode, 200, JSON.stringify(published.body));
  t.deepEqual(notesOf(await live.get('api/notes')), { columns: ['id', 'body', 'pinned'], notes: ['live one'] });
  t.is(await branchOf(site, next.id), null);
  t.false(branchFolders().includes(`${site.site.id}.${next.id}`));
  const gone = await t0.owner.api.post(`${site.base}/query`, { json: { sql: 'SELECT 1', branch: next.id } });
  t.is(gone.statusCode, 404);
  t.is(json<{ error: { code: string } }>(gone).error.code, 'branch_not_found');
});

test('a deployment whose migrations fail on its branch says so on its preview and in its record, and keeps no half-migrated branch', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deployment(site, { 'api/notes.ts': NOTES }, [INIT], true);
  const broken = {
    name: '0002_broken.sql',
    sql: 'ALTER TABLE notes ADD COLUMN pinned INTEGER;\nINSERT INTO nowhere VALUES (1);',
  };
  const next = await deployment(site, { 'api/notes.ts': NOTES }, [INIT, broken]);
  const preview = await memberOf(t0, t0.owner.id, site.site.id, `${next.shortId}--${site.site.subdomain}`);
  const answer = await preview.get('api/notes');
  t.is(answer.statusCode, 422);
  const error = parsed<{ error: { code: string; message: string } }>(answer).error;
  t.is(error.code, 'branch_failed');
  t.regex(error.message, /0002_broken\.sql failed.*no such table: nowhere/);
  const branch = await branchOf(site, next.id);
  t.like(branch, { status: 'FAILED', bytes: 0 });
  t.regex(branch!.error!, /0002_broken\.sql/);
  t.false(branchFolders().includes(`${site.site.id}.${next.id}`), 'nothing of it is kept');
  const again = await preview.get('api/notes');
  t.is(again.statusCode, 422, 'the failure stands until the deployment ends');
  const cancelled = await t0.owner.api.delete(`v0/sites/${site.site.id}/deployments/${next.id}`);
  t.is(cancelled.statusCode, 200, JSON.stringify(cancelled.body));
  t.is(await branchOf(site, next.id), null, 'a cancelled deployment’s branch ends with it');
});

test('a cancelled deployment’s branch is dropped with its file, and the preview’s functions are told', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deployment(site, { 'api/notes.ts': NOTES }, [INIT], true);
  const next = await deployment(site, { 'api/notes.ts': NOTES }, [INIT]);
  const preview = await memberOf(t0, t0.owner.id, site.site.id, `${next.shortId}--${site.site.subdomain}`);
  const draft = await preview.post('api/notes', { json: { body: 'draft' } });
  t.is(draft.statusCode, 200, JSON.stringify(draft.body));
  t.true(branchFolders().includes(`${site.site.id}.${next.id}`));
  t.is((await t0.owner.api.delete(`v0/sites/${site.site.id}/deployments/${next.id}`)).statusCode, 200);
  t.false(branchFolders().includes(`${site.site.id}.${next.id}`));
  const query = await t0.owner.api.post(`${site.base}/query`, { json: { sql: 'SELECT 1', branch: next.id } });
  t.is(json<{ error: { code: string } }>(query).error.code, 'branch_not_found');
});

test('an instant’s preview runs on the database as it was then, and its writes reach neither the database nor a later instant', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deployment(site, { 'api/notes.ts': NOTES }, [INIT], true);
  const live = t0.site(site.site.subdomain);
  await shippedRow(site, 'before');
  await sleep(1200);
  const instant = Date.now();
  await sleep(1200);
  await shippedRow(site, 'after');
  // The replica must hold the instant before a branch can be made of it.
  await until(async () => {
    const points = json<{ latest: string | null }>(await t0.owner.read.get(`${site.base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) > instant;
  }, 'the replica to hold the instant');

  const preview = await memberOf(t0, t0.owner.id, site.site.id, `t${instant}--${site.site.subdomain}`);
  const then = await preview.post('api/notes', { json: { body: 'on the branch' } });
  t.is(then.statusCode, 200, JSON.stringify(then.body));
  t.deepEqual(notesOf(then).notes, ['before', 'on the branch']);
  t.deepEqual(notesOf(await live.get('api/notes')).notes, ['before', 'after']);
  const branch = await t0.owner.api.post(`${site.base}/query`, {
    json: { sql: 'SELECT count(*) AS n FROM notes', branch: `t${instant}` },
  });
  t.is(json<Envelope>(branch).result[0]!.results[0]!.n, 2);

  // A moment the database's history does not hold has no branch.
  const before = await t0.owner.api.post(`${site.base}/query`, {
    json: { sql: 'SELECT 1', branch: `t${instant - 30 * 24 * 3_600_000}` },
  });
  t.is(before.statusCode, 422);
  t.is(json<{ error: { code: string } }>(before).error.code, 'before_history');
});

test('a branch is only ever of the site’s own deployments: another site’s deployment id names none', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  const other = await siteWithDatabase(t0.owner);
  const theirs = await deployment(other, { 'web/index.html': 'theirs' }, []);
  const refused = await t0.owner.api.post(`${site.base}/query`, { json: { sql: 'SELECT 1', branch: theirs.id } });
  t.is(refused.statusCode, 404);
  t.is(json<{ error: { code: string } }>(refused).error.code, 'branch_not_found');
  const malformed = await t0.owner.api.post(`${site.base}/query`, {
    json: { sql: 'SELECT 1', branch: '../../sites/x' },
  });
  t.is(malformed.statusCode, 400);
  t.is(json<{ error: { code: string } }>(malformed).error.code, 'invalid_request');
  t.deepEqual(
    branchFolders().filter((name) => name.startsWith(site.site.id)),
    [],
  );
});

test('the sweep drops an instant’s branch unused for a day, and a branch folder no row places here', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deployment(site, { 'api/notes.ts': NOTES }, [INIT], true);
  // A moment the replica holds: past the start of its history, and before its latest moment.
  const points = await until(async () => {
    const read = json<{ earliest: string | null; latest: string | null }>(
      await t0.owner.read.get(`${site.base}/restore-points`),
    );
    return read.earliest !== null && Date.parse(read.latest!) > Date.parse(read.earliest) + 1000 && read;
  }, 'the replica to hold a second of history');
  const instant = Date.parse(points.earliest!) + 500;
  const made = await t0.owner.api.post(`${site.base}/query`, { json: { sql: 'SELECT 1', branch: `t${instant}` } });
  t.is(made.statusCode, 200, JSON.stringify(made.body));
  const { deps } = t0.berth;
  const stray = path.join(t0.config.dataDir, 'branches', `${site.site.id}.t0000000000001`);
  fs.mkdirSync(stray);
  fs.writeFileSync(path.join(stray, 'db.sqlite'), 'left behind');

  await sweepBranches(deps);
  t.true(branchFolders().includes(`${site.site.id}.t${instant}`), 'a branch in use stays');
  t.false(fs.existsSync(stray), 'a folder no row places here is removed');

  await deps
    .db('database_branches')
    .where({ site_id: site.site.id })
    .update({ used_at: new Date(Date.now() - INSTANT_BRANCH_IDLE_MS - 60_000).toISOString() });
  await sweepBranches(deps);
  t.false(branchFolders().includes(`${site.site.id}.t${instant}`));
  t.is(await deps.db('database_branches').where({ site_id: site.site.id }).first(), undefined);
});

test('a deployment’s branch made later is the database as of the deployment’s creation, from its replica: later writes are not on it', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deployment(site, { 'api/notes.ts': NOTES }, [INIT], true);
  const live = t0.site(site.site.subdomain);
  await shippedRow(site, 'before the deployment');
  await sleep(1100);
  const next = await deployment(site, { 'api/notes.ts': NOTES }, [INIT]);
  // Restores are to the second: the branch is of the end of the second the deployment was made in.
  await sleep(1500);
  await live.post('api/notes', { json: { body: 'after the deployment' } });
  // Past the seconds in which a branch is a copy of now, and held by the replica.
  await sleep(10_000);
  await until(async () => {
    const points = json<{ latest: string | null }>(await t0.owner.read.get(`${site.base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) > Date.now() - 2000;
  }, 'the replica to hold the deployment’s creation');
  const preview = await memberOf(t0, t0.owner.id, site.site.id, `${next.shortId}--${site.site.subdomain}`);
  const seen = await preview.get('api/notes');
  t.is(seen.statusCode, 200, JSON.stringify(seen.body));
  t.deepEqual(notesOf(seen).notes, ['before the deployment']);
  t.like(await branchOf(site, next.id), { status: 'READY', madeFrom: 'history' });
  t.deepEqual(notesOf(await live.get('api/notes')).notes, ['before the deployment', 'after the deployment']);
});
